package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const tryUsage = `Usage: worker try --provider P [--base-url U] --model M --schema S.json
                  (--prompt TEXT | --prompt-file F) [--mode M] [--strategy S]
                  [--document-file F] [--chunk-tokens N] [--chunk-overlap N] [--strict]
                  [--max-attempts N] [--json] [--sim PRESET]

Runs one job live through the repair loop and prints each attempt as a card:
status (VALID, INVALID, PARSE ERROR, TRUNCATED, REFUSED, PROVIDER ERROR),
latency, tokens, the extracted value, the errors and the exact feedback sent
next; then a one-line verdict. --json prints the result object instead.
--sim runs against an in-process simulator instead of a real provider: its
replies are drawn from the prompt, the schema and the model (and
--sim-seed), the same each time for one input, the preset's faults varying
from input to input.

Under a document strategy (parallel, sequential, agent; --document-file
needed) each step is a card: a chunk call with its offsets in the document,
the merge with its conflicts (no call, or with --merge-model M a call to M),
a repair, an agent turn with its tool calls; then the final value and the
totals. --json prints the value and an "attempts" list, one entry per call
and one for a merge by rule ("call": false).

  worker try --model gpt-4o-mini --schema ticket.json --prompt-file ticket-42.txt
  worker try --sim messy --schema ticket.json --prompt "Printer on fire, floor 3"
  worker try --sim messy --strategy parallel --document-file contract.md --schema contract.json --prompt "Extract the parties"

Exit status: 0 valid, 1 not valid, 2 bad usage.`

// tryFlags are worker try's flags.
type tryFlags struct {
	fs                                   *flag.FlagSet
	provider, baseURL, model, schemaFile string
	prompt, promptFile, system           string
	mode, strategy, feedback             string
	evidence, sourceFile                 string
	maxAttempts, maxTokens, budget       int
	asJSON                               bool
	pf                                   providerFlags
	doc                                  tryDocFlags
}

func newTryFlags(stdout io.Writer) *tryFlags {
	f := &tryFlags{fs: newFlagSet("worker try", tryUsage, providerEnvHelp, stdout)}
	fs := f.fs
	fs.StringVar(&f.provider, "provider", llm.ProviderOpenAI, providerChoices())
	fs.StringVar(&f.baseURL, "base-url", "", "provider base URL (overrides the provider's env variable)")
	fs.StringVar(&f.model, "model", "", "model name (required; with --sim, sim-PRESET when not given)")
	fs.StringVar(&f.schemaFile, "schema", "", "JSON Schema file (required)")
	fs.StringVar(&f.prompt, "prompt", "", "the task")
	fs.StringVar(&f.promptFile, "prompt-file", "", "file holding the task")
	fs.StringVar(&f.system, "system", "", "optional system prompt placed before the schema instructions")
	fs.StringVar(&f.mode, "mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
	fs.StringVar(&f.strategy, "strategy", string(fixpoint.StrategyDefault), strings.Join(fixpoint.StrategyNames(), ", ")+" (parallel, sequential and agent run over --document-file)")
	f.doc.register(fs)
	fs.StringVar(&f.feedback, "feedback", string(fixpoint.FeedbackDefault), "feedback format: text or xml")
	fs.IntVar(&f.maxAttempts, "max-attempts", fixpoint.MaxAttemptsDefault, "repair attempts (provider calls with a reply; 0 = the default)")
	fs.IntVar(&f.maxTokens, "max-tokens", fixpoint.MaxTokensDefault, "output tokens per call (0 = the default)")
	fs.IntVar(&f.budget, "token-budget", 0, "stop before the job's tokens would exceed this; 0 = none")
	fs.StringVar(&f.evidence, "evidence", string(fixpoint.EvidenceDefault), "check each valid value's strings and numbers against the source: off, check (grade them) or require (one the source does not hold is an error the model is asked to fix)")
	fs.StringVar(&f.sourceFile, "source", "", "text file the value is checked against (default: the prompt)")
	fs.BoolVar(&f.asJSON, "json", false, "print the result object as JSON instead of cards")
	f.pf.register(fs)
	return f
}

// tryCommand is worker try.
type tryCommand struct{ stdout, stderr io.Writer }

func (c *tryCommand) Run(ctx context.Context, args []string) error {
	stdout := c.stdout
	f := newTryFlags(stdout)
	pos, err := cliflags.ParseArgs(f.fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (try takes flags only: quote a prompt with spaces)", pos[0])
	}
	if err := f.check(); err != nil {
		return err
	}
	if err := f.readPrompt(); err != nil {
		return err
	}
	schema, raw, err := readSchema(f.schemaFile)
	if err != nil {
		return err
	}
	if err := f.setBaseURL(); err != nil {
		return err
	}
	spec := f.spec(schema, raw)
	if err := f.doc.read(&spec); err != nil {
		return err
	}
	if f.sourceFile != "" {
		text, err := cli.ReadTextFile(f.sourceFile)
		if err != nil {
			return usagef("read --source: %v", err)
		}
		spec.Source = string(text)
	}
	job, err := pipeline.TryJob(spec)
	if err != nil {
		return usageError{Err: err}
	}
	clients, closeSim, err := f.pf.build(nil)
	if err != nil {
		return err
	}
	defer closeSim()
	res, err := pipeline.Try(ctx, clients[f.provider], job, pipeline.LoopHooks{})
	if err != nil && !errors.Is(err, fixpoint.ErrTransient) {
		return err
	}
	switch doc := job.Limits.Strategy.Document(); {
	case f.asJSON && doc:
		writeDocJSON(stdout, res)
	case f.asJSON:
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	case doc:
		writeDocCards(stdout, res)
	default:
		cli.WriteCards(stdout, res)
	}
	if res.Status != fixpoint.StatusValid {
		return errNotValid
	}
	return nil
}

// check refuses flags that cannot work and requires the ones try needs.
func (f *tryFlags) check() error {
	if err := f.pf.check(); err != nil {
		return err
	}
	if f.model == "" {
		if f.pf.simPreset == "" {
			return usagef("--model is required")
		}
		f.model = "sim-" + f.pf.simPreset
	}
	if f.schemaFile == "" {
		return usagef("--schema is required")
	}
	switch {
	case given(f.fs, "prompt") && f.prompt == "" && f.promptFile == "":
		return usagef("--prompt is empty")
	case (f.prompt == "") == (f.promptFile == ""):
		return usagef("give exactly one of --prompt and --prompt-file")
	}
	if err := checkStrategy(f.strategy); err != nil {
		return err
	}
	return f.doc.check(f.fs, fixpoint.Strategy(f.strategy))
}

// readPrompt reads --prompt-file; pipeline.TryJob checks the prompt as a
// job of a batch is checked at enqueue and in the worker.
func (f *tryFlags) readPrompt() error {
	if f.promptFile != "" {
		data, err := cli.ReadTextFile(f.promptFile)
		if err != nil {
			return usagef("read prompt: %v", err)
		}
		f.prompt = string(data)
	}
	return nil
}

// setBaseURL points --provider at --base-url, when given.
func (f *tryFlags) setBaseURL() error {
	u, ok := f.pf.baseURLs[f.provider]
	if !ok {
		return usagef("--provider %q: want %s", f.provider, strings.Join(llm.ProviderNames(), ", "))
	}
	setIf(u, f.baseURL)
	return nil
}

// spec is the job to try. Its id is drawn from its input
// (pipeline.TryJobID): the simulator's draws differ from prompt to prompt
// and repeat for one prompt and --sim-seed.
func (f *tryFlags) spec(schema *validate.Schema, raw []byte) pipeline.TrySpec {
	return pipeline.TrySpec{Provider: f.provider, Model: f.model, System: f.system, Prompt: f.prompt,
		Schema: raw, Compiled: schema, Mode: fixpoint.Mode(f.mode), MaxTokens: f.maxTokens,
		Limits: fixpoint.Limits{MaxAttempts: f.maxAttempts, Strategy: fixpoint.Strategy(f.strategy),
			Feedback: fixpoint.FeedbackFormat(f.feedback), TokenBudget: f.budget},
		Evidence: fixpoint.EvidenceMode(f.evidence)}
}

// readSchema reads and compiles a schema file, refusing (as a usage error)
// one no value satisfies: every call made for it would be paid for and
// never valid.
func readSchema(name string) (*validate.Schema, []byte, error) {
	raw, err := cli.ReadTextFile(name)
	if err != nil {
		return nil, nil, usagef("read schema: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, usagef("schema %s is empty", name)
	}
	schema, err := validate.Compile(raw)
	if err != nil {
		return nil, nil, usagef("schema %s: %v", name, err)
	}
	if err := schema.Satisfiable(); err != nil {
		return nil, nil, usagef("schema %s: %v", name, err)
	}
	return schema, raw, nil
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// checkStrategy refuses a strategy fixpoint does not know, naming those
// it does.
func checkStrategy(s string) error {
	if !slices.Contains(fixpoint.StrategyNames(), s) {
		return usagef("--strategy %q: want one of %s", s, strings.Join(fixpoint.StrategyNames(), ", "))
	}
	return nil
}
