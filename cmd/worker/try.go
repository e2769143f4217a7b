package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const tryUsage = `Usage: worker try --provider P [--base-url U] --model M --schema S.json
                  (--prompt TEXT | --prompt-file F) [--mode M] [--strategy S]
                  [--max-attempts N] [--json] [--sim PRESET]

Runs one job live through the repair loop and prints each attempt as a card:
status (VALID, INVALID, PARSE ERROR, TRUNCATED, REFUSED, PROVIDER ERROR),
latency, tokens, the extracted value, the errors and the exact feedback sent
next; then a one-line verdict. --json prints the result object instead.
--sim runs against an in-process simulator instead of a real provider.

Exit status: 0 valid, 1 not valid, 2 bad usage.`

func runTry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker try", tryUsage, providerEnvHelp, stdout)
	var (
		provider    = fs.String("provider", llm.ProviderOpenAI, "openai, anthropic or ollama")
		baseURL     = fs.String("base-url", "", "provider base URL (overrides the provider's env variable)")
		model       = fs.String("model", "", "model name (required; with --sim, sim-PRESET when not given)")
		schemaFile  = fs.String("schema", "", "JSON Schema file (required)")
		prompt      = fs.String("prompt", "", "the task")
		promptFile  = fs.String("prompt-file", "", "file holding the task")
		system      = fs.String("system", "", "optional system prompt placed before the schema instructions")
		mode        = fs.String("mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
		strategy    = fs.String("strategy", string(fixpoint.StrategyDefault), "conversation, repair or patch")
		feedback    = fs.String("feedback", string(fixpoint.FeedbackDefault), "feedback format: text or xml")
		maxAttempts = fs.Int("max-attempts", fixpoint.MaxAttemptsDefault, "repair attempts (provider calls with a reply; 0 = the default)")
		maxTokens   = fs.Int("max-tokens", fixpoint.MaxTokensDefault, "output tokens per call (0 = the default)")
		budget      = fs.Int("token-budget", 0, "stop before the job's tokens would exceed this; 0 = none")
		asJSON      = fs.Bool("json", false, "print the result object as JSON instead of cards")
		pf          providerFlags
	)
	pf.register(fs)
	pos, err := cliflags.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (try takes flags only: quote a prompt with spaces)", pos[0])
	}
	if err := pf.check(); err != nil {
		return err
	}
	if *model == "" {
		if pf.simPreset == "" {
			return usagef("--model is required")
		}
		*model = "sim-" + pf.simPreset
	}
	if *schemaFile == "" {
		return usagef("--schema is required")
	}
	promptGiven := false
	fs.Visit(func(f *flag.Flag) { promptGiven = promptGiven || f.Name == "prompt" })
	switch {
	case promptGiven && *prompt == "" && *promptFile == "":
		return usagef("--prompt is empty")
	case (*prompt == "") == (*promptFile == ""):
		return usagef("give exactly one of --prompt and --prompt-file")
	}
	if *promptFile != "" {
		data, err := cli.ReadTextFile(*promptFile)
		if err != nil {
			return usagef("read prompt: %v", err)
		}
		*prompt = string(data)
	}
	// The checks a job of a batch gets at enqueue and in the worker.
	switch {
	case strings.TrimSpace(*prompt) == "":
		return usagef("the prompt is empty")
	case !utf8.ValidString(*prompt) || !utf8.ValidString(*system):
		return usagef("the prompt is not UTF-8 text")
	case len(*prompt)+len(*system) > pipeline.MaxPromptBytesDefault:
		return usagef("the prompt is %d bytes, over the workers' limit of %d", len(*prompt)+len(*system), pipeline.MaxPromptBytesDefault)
	}
	schema, raw, err := readSchema(*schemaFile)
	if err != nil {
		return err
	}
	switch *provider {
	case llm.ProviderOpenAI:
		setIf(&pf.openaiURL, *baseURL)
	case llm.ProviderAnthropic:
		setIf(&pf.anthropicURL, *baseURL)
	case llm.ProviderOllama:
		setIf(&pf.ollamaURL, *baseURL)
	default:
		return usagef("--provider %q: want openai, anthropic or ollama", *provider)
	}
	job := &repair.Job{
		ID: "try", System: *system, Prompt: *prompt, Schema: schema, SchemaRaw: raw, Model: *model,
		Mode: fixpoint.Mode(*mode), MaxTokens: *maxTokens,
		Limits: fixpoint.Limits{MaxAttempts: *maxAttempts, Strategy: fixpoint.Strategy(*strategy),
			Feedback: fixpoint.FeedbackFormat(*feedback), TokenBudget: *budget},
	}
	if err := job.Limits.WithDefaults().Validate(); err != nil {
		return usageError{Err: err}
	}
	if err := llm.CheckSchemaMode(*provider, job.Mode, raw); err != nil {
		return usageError{Err: err}
	}
	env := pipeline.Envelope{V: pipeline.EnvelopeVersion, JobID: "try", Prompt: "x", SchemaHash: "x", Provider: *provider, Model: *model, Mode: job.Mode,
		Limits: job.Limits, MaxTokens: job.MaxTokens}
	if err := env.Validate(); err != nil {
		return usageError{Err: err}
	}
	clients, closeSim, err := pf.build(nil)
	if err != nil {
		return err
	}
	defer closeSim()
	res, err := pipeline.NewLoop(clients[*provider], pipeline.LoopConfig{}).Run(ctx, job)
	if err != nil && !errors.Is(err, fixpoint.ErrTransient) {
		return err
	}
	if *asJSON {
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		cli.WriteCards(stdout, res)
	}
	if res.Status != fixpoint.StatusValid {
		return errNotValid
	}
	return nil
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
