// Package configdoc generates docs/configuration.md: every command's and
// subcommand's --help output, and the table of environment variables
// below. The help texts are the source of truth for flags; this package
// only runs the built commands and lays their output out as one page.
//
// Regenerate the page with
//
//	go test ./cmd/internal/configdoc -run TestConfigurationDoc -update
//
// (or make docs). TestConfigurationDoc fails with a diff when the page
// differs from what the commands print.
package configdoc

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// Command is one binary of cmd/ and the subcommands whose --help the page
// shows. An empty Subcommands runs only "NAME --help"; Default names the
// subcommand "NAME --help" already shows (worker run), which is not run
// again.
type Command struct {
	Name        string
	Summary     string
	Default     string
	Subcommands []string
	// ListsSubcommands: the binary's help names its subcommands, so a
	// subcommand missing from Subcommands is found (see Discover).
	ListsSubcommands bool
}

// Commands are the commands the page documents, in page order. A new
// subcommand goes here; TestConfigurationDoc fails while a command's help
// names one this list lacks.
var Commands = []Command{
	{Name: "worker", Summary: "pulls jobs, runs the repair loop, writes the ledger", Default: "run",
		Subcommands: []string{"migrate", "check", "try", "demo"}, ListsSubcommands: true},
	{Name: "enqueue", Summary: "turns a dataset into jobs, and acts on batches",
		Subcommands: []string{"requeue", "cancel", "cap", "revalidate"}, ListsSubcommands: true},
	{Name: "report", Summary: "reads the ledger",
		Subcommands: []string{"summary", "failures", "job", "steps", "export", "wait", "serve", "purge"}, ListsSubcommands: true},
	{Name: "simllm", Summary: "the LLM simulator as a server, and its long documents",
		Subcommands: []string{"docs"}, ListsSubcommands: true},
	{Name: "fixpoint-bench", Summary: "the end-to-end figures"},
}

// EnvVar is one row of the page's environment table.
type EnvVar struct {
	Name, Default, Meaning string
}

// Env is the environment table. Every variable a command's help names must
// be here, and every variable here must be named by some help
// (TestConfigurationDoc checks both). The providers' variables come from
// the provider table (providerEnv), after FIXPOINT_BUDGET.
var Env = withProviders([]EnvVar{
	{"DATABASE_URL", "`postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable`", "the ledger; `worker`, `worker migrate` and `worker demo` create the database when it is missing"},
	{"NATS_URL", "empty: the embedded queue", "the queue, for the worker, `enqueue`, `report wait` and `report serve`'s requeues alike; all workers on one server share one durable consumer"},
	{"FIXPOINT_NATS_DIR", "`.fixpoint/nats`", "the embedded queue's directory"},
	{"FIXPOINT_NATS_LISTEN", "`127.0.0.1:4223`", "where a worker's embedded NATS server listens, for `enqueue`, `report serve` and other workers"},
	{"FIXPOINT_SPILL_DIR", "`unwritten` beside the queue's directory (`FIXPOINT_NATS_DIR`, `--nats-dir`): `.fixpoint/unwritten`", "results kept when the ledger was down at a stop, and the reply journal for a `kill -9`"},
	{"FIXPOINT_METRICS_ADDR", "`127.0.0.1:9464`", "`/metrics`, `/healthz`, `/readyz`; `off` serves none. An address you set that is taken stops the start; the default taken is a warning"},
	{"FIXPOINT_RPM", "0 (unlimited)", "requests per minute of each lane (provider, base URL, model, key), shared by every worker on the same NATS (`worker run`; see `FIXPOINT_BUDGET`): give every worker the key's limit"},
	{"FIXPOINT_TPM", "0 (unlimited)", "tokens per minute of each lane, shared like `FIXPOINT_RPM`"},
	{"FIXPOINT_BUDGET", "`cluster`", "`worker run`: `cluster` shares `--rpm`/`--tpm` among the workers through a NATS KV bucket; `local` keeps them per process"},
	{"FIXPOINT_ADMIN_TOKEN", "none", "`report serve`: at least 16 characters; needed to listen off loopback; every request must then give it (HTTP Basic password or Bearer), and it turns the batch actions on"},
	{"FIXPOINT_TRACES", "`off`", "`otlp` sends an OpenTelemetry span of each job, and of each provider call under it (GenAI semantic conventions), over OTLP/HTTP; never a prompt, reply or key (`worker --traces`)"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "`http://localhost:4318`", "with `--traces otlp`: the collector's OTLP/HTTP base URL (`/v1/traces` is added)"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "none", "with `--traces otlp`: the full traces URL, over `OTEL_EXPORTER_OTLP_ENDPOINT`"},
	{"OTEL_EXPORTER_OTLP_HEADERS", "none", "headers sent to the collector, `key=value,...`; an auth token belongs in a secret"},
	{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "none", "the same, for traces only"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "`http/protobuf`", "the only protocol the worker speaks: `grpc` is a usage error"},
	{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "`http/protobuf`", "the same, for traces only"},
	{"OTEL_SERVICE_NAME", "`fixpoint-worker`", "the traces' `service.name`"},
	{"OTEL_RESOURCE_ATTRIBUTES", "none", "more resource attributes of the traces, `key=value,...` (a pod's name, a deployment)"},
	{"OTEL_TRACES_SAMPLER", "`parentbased_always_on`", "which traces are kept, e.g. `traceidratio`"},
	{"OTEL_TRACES_SAMPLER_ARG", "none", "the sampler's argument, e.g. `0.1` for one trace in ten"},
	{"LOG_LEVEL", "`info`", "`debug`, `info`, `warn` or `error`"},
	{"LOG_FORMAT", "`text`", "`text` or `json`; prompts and replies are never logged"},
}, "FIXPOINT_BUDGET")

// withProviders is env with the providers' variables after the one
// named after.
func withProviders(env []EnvVar, after string) []EnvVar {
	i := slices.IndexFunc(env, func(e EnvVar) bool { return e.Name == after }) + 1
	return slices.Concat(env[:i], providerEnv(), env[i:])
}

// providerEnv is the variables of each row of the provider table: its
// key's, when it takes one, and its base URL's.
func providerEnv() []EnvVar {
	var out []EnvVar
	for _, p := range llm.Providers() {
		if p.KeyEnv != "" {
			out = append(out, EnvVar{p.KeyEnv, "none", fmt.Sprintf("key of the `%s` provider; no key sends none", p.Name)})
		}
		out = append(out, EnvVar{p.BaseURLEnv, "`" + p.BaseURLDefault + "`", fmt.Sprintf("base URL of the `%s` provider: %s", p.Name, p.Description)})
	}
	return out
}

// providerTable is the page's table of providers, one row each.
func providerTable() string {
	var b strings.Builder
	b.WriteString("| provider | wire format | default base URL | key | deliveries | `json_schema` | `tool` |\n|---|---|---|---|---|---|---|\n")
	for _, p := range llm.Providers() {
		key := "none"
		if p.KeyEnv != "" {
			key = "`" + p.KeyEnv + "`"
		}
		var dels []string
		for _, d := range p.Deliveries {
			dels = append(dels, string(d))
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s | %s | %s |\n", p.Name, p.Wire, p.BaseURLDefault, key, strings.Join(dels, ", "),
			p.Modes[fixpoint.ModeJSONSchema], p.Modes[fixpoint.ModeTool])
	}
	return b.String()
}

// Help is the --help output of one command line.
type Help struct {
	Args []string
	Text string
}

// helpTimeout bounds one --help run: it prints and exits.
const helpTimeout = time.Minute

// RunHelp runs "binDir/args[0] args[1:]... --help" with an empty
// environment, so defaults read from the environment print as built in,
// and returns its standard output and error together (some commands print
// help on one, some on the other).
func RunHelp(ctx context.Context, binDir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, helpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, args[0]), append(args[1:], "--help")...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s --help: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Collect runs --help of every command and subcommand of Commands.
func Collect(ctx context.Context, binDir string) ([]Help, error) {
	var helps []Help
	for _, c := range Commands {
		lines := [][]string{{c.Name}}
		for _, s := range c.Subcommands {
			lines = append(lines, []string{c.Name, s})
		}
		var top string
		for _, args := range lines {
			text, err := RunHelp(ctx, binDir, args...)
			if err != nil {
				return nil, err
			}
			if len(args) == 1 {
				top = text
			} else if text == top {
				// A command that does not know the subcommand prints its
				// own help: the list names a subcommand that is gone.
				return nil, fmt.Errorf("%s --help prints the same as %s --help: is %q still a subcommand? (configdoc.Commands)", strings.Join(args, " "), c.Name, args[1])
			}
			helps = append(helps, Help{Args: args, Text: text})
		}
		if c.Default != "" {
			// The page shows the default command's help once, under NAME.
			text, err := RunHelp(ctx, binDir, c.Name, c.Default)
			if err != nil {
				return nil, err
			}
			if text != top {
				return nil, fmt.Errorf("%s %s --help differs from %s --help: list %q in Subcommands, not as Default (configdoc.Commands)", c.Name, c.Default, c.Name, c.Default)
			}
		}
	}
	return helps, nil
}

// usageLine finds "NAME SUB" at the start of a help line, followed by what
// a usage line has after a subcommand (the line's end, a flag, an
// argument, an option in brackets, or the spaces before its description).
func usageLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*(?:Usage:\s+)?` + regexp.QuoteMeta(name) + ` ([a-z][a-z-]*)(?:$|\s+(?:[-\[(A-Z|]|\s))`)
}

// Discover returns the subcommands NAME's help and "NAME help" name on
// their usage lines that c does not list.
func Discover(ctx context.Context, binDir string, c Command) ([]string, error) {
	var texts []string
	text, err := RunHelp(ctx, binDir, c.Name)
	if err != nil {
		return nil, err
	}
	texts = append(texts, text)
	// "NAME help" (no --help) is the overview some commands print (worker
	// help); a command without it exits non-zero and is read no further.
	hctx, cancel := context.WithTimeout(ctx, helpTimeout)
	defer cancel()
	cmd := exec.CommandContext(hctx, filepath.Join(binDir, c.Name), "help")
	cmd.Env = []string{}
	if out, err := cmd.CombinedOutput(); err == nil {
		texts = append(texts, string(out))
	}
	known := append([]string{c.Default, "help"}, c.Subcommands...)
	var missing []string
	for _, t := range texts {
		for _, m := range usageLine(c.Name).FindAllStringSubmatch(t, -1) {
			if !slices.Contains(known, m[1]) && !slices.Contains(missing, m[1]) {
				missing = append(missing, m[1])
			}
		}
	}
	return missing, nil
}

// envNamed finds environment variables a help text names: "(env NAME)" in
// a flag's description, and the names an Environment: section lists.
var (
	envInFlag    = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]+)\)`)
	envInSection = regexp.MustCompile(`^  ([A-Z][A-Z0-9_]+(?:, [A-Z][A-Z0-9_]+)*)(?:\s|$)`)
)

// EnvNamed returns the environment variables a help text names, sorted.
func EnvNamed(text string) []string {
	var names []string
	for _, m := range envInFlag.FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	inSection := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "Environment:":
			inSection = true
			continue
		case line != "" && !strings.HasPrefix(line, " "):
			inSection = false
		}
		if m := envInSection.FindStringSubmatch(line); inSection && m != nil {
			names = append(names, strings.Split(m[1], ", ")...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Render lays the help texts out as docs/configuration.md.
func Render(helps []Help) string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from the commands' --help by cmd/internal/configdoc. Do not edit:
     run "make docs" (go test ./cmd/internal/configdoc -run TestConfigurationDoc -update). -->

This page answers: which flags and environment variables does each command
take? It is each command's ` + "`--help`" + ` output, generated, so it matches the
binaries built from this tree. Flags are written with one dash or two
(` + "`-batch` and `--batch`" + ` are the same).

## Environment variables

A flag given on the command line takes precedence over its variable. API keys are read
from the environment only and never reach logs, the ledger or metric labels.

| variable | default | meaning |
|---|---|---|
`)
	for _, e := range Env {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Name, e.Default, e.Meaning)
	}
	b.WriteString("\n## Providers\n\n`--provider` takes these; each reads the variables above. What each column means, and how to add a provider: [providers.md](providers.md).\n\n")
	b.WriteString(providerTable())
	b.WriteString("\n## Commands\n\n| command | what it does |\n|---|---|\n")
	for _, c := range Commands {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.Name, anchor(c.Name), c.Summary)
	}
	for _, h := range helps {
		level, note := "##", ""
		if len(h.Args) > 1 {
			level = "###"
		} else if c := commandNamed(h.Args[0]); c.Default != "" {
			note = fmt.Sprintf("`%[1]s --help` and `%[1]s %[2]s --help` print the same: %[2]s is the default command.\n\n", c.Name, c.Default)
		}
		// A fence longer than any run of backticks in the text (simllm's
		// help shows ```json), so the text cannot close it.
		fence := "```"
		for strings.Contains(h.Text, fence) {
			fence += "`"
		}
		fmt.Fprintf(&b, "\n%s %s\n\n%s%stext\n%s\n%s\n", level, strings.Join(h.Args, " "), note, fence, strings.TrimRight(h.Text, "\n"), fence)
	}
	return b.String()
}

func commandNamed(name string) Command {
	for _, c := range Commands {
		if c.Name == name {
			return c
		}
	}
	return Command{}
}

// anchor is the heading id a Markdown renderer gives a one-word heading.
func anchor(s string) string {
	return strings.ToLower(s)
}
