package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// enqueueCommand is enqueue itself: a dataset into a batch, or --resume,
// or --dry-run.
type enqueueCommand struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// enqueueFlags are the enqueue command's flags: cfg holds what maps onto
// enqueue.Config as given, the rest is read into it by config.
type enqueueFlags struct {
	fs     *flag.FlagSet
	cfg    enqueue.Config
	common commonFlags

	schemaFile, templateFile, systemFile string
	format, mode, strategy, feedback     string
	coerce, temp, maxCost, maxTokens     string
	evidence                             string
	progress, dryRun                     bool
	limit                                int
}

// enqueueFlagGroups lays out enqueue's help by topic.
var enqueueFlagGroups = []cliflags.FlagGroup{
	{Title: "Batch and run", Flags: []string{"batch", "resume", "dry-run", "limit", "progress"}},
	{Title: "Dataset and prompt", Flags: []string{"schema", "template", "system-file", "format", "id-field", "max-bad-rows", "max-prompt-bytes"}},
	{Title: "Documents", Flags: []string{"document-field", "document-file-field", "max-document-bytes", "chunk-tokens", "chunk-overlap",
		"list-passes", "strict", "max-validation-attempts", "merge-model"}},
	{Title: "Model and repair", Flags: []string{"provider", "model", "mode", "temperature", "max-tokens", "max-attempts", "strategy",
		"feedback", "coerce", "token-budget", "retry-budget"}},
	{Title: "Checks after the schema", Flags: []string{"evidence", "evidence-source"}},
	{Title: "Spend cap", Flags: []string{"max-cost-usd", "max-total-tokens"}},
	{Title: "Delivery", Flags: []string{"delivery", "batch-fallback", "deadline", "prompt-cache"}},
	{Title: "Queue", Flags: []string{"nats-url", "nats-dir", "nats-listen", "stream", "subject", "duplicates-window", "stream-replicas"}},
	{Title: "Ledger", Flags: []string{"database-url"}},
}

func newEnqueueFlags(stdout io.Writer) *enqueueFlags {
	f := &enqueueFlags{fs: newFlagSet("enqueue", usage, stdout)}
	fs, cfg := f.fs, &f.cfg
	fs.Usage = func() {
		fmt.Fprintln(stdout, usage)
		cliflags.PrintGroups(stdout, fs, enqueueFlagGroups)
		fmt.Fprintln(stdout, "\nEnvironment:")
		fmt.Fprintln(stdout, envHelp)
	}
	fs.StringVar(&f.schemaFile, "schema", "", "JSON Schema file every row's answer must match (required)")
	fs.StringVar(&f.templateFile, "template", "", "prompt template file (required)")
	fs.StringVar(&f.systemFile, "system-file", "", "optional file with a system prompt for every job")
	fs.StringVar(&f.format, "format", "", "jsonl or csv (default: from the file name)")
	fs.StringVar(&f.mode, "mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
	fs.StringVar(&f.strategy, "strategy", string(fixpoint.StrategyDefault), strategyHelp())
	registerDocumentFlags(fs, &cfg.Limits)
	fs.StringVar(&f.feedback, "feedback", string(fixpoint.FeedbackDefault), "feedback format: text or xml")
	fs.StringVar(&f.coerce, "coerce", string(fixpoint.CoerceSafe), "schema-guided local repairs tried before another call: none; safe (\"42\" for an integer, an enum's letter case, a single value for an array, null for an optional property dropped, \"customerName\" for a declared \"customer_name\"); all (safe, and properties the schema does not allow dropped when every required one is there)")
	fs.StringVar(&f.evidence, "evidence", string(fixpoint.EvidenceDefault), "check each valid value's strings and numbers against the job's source: off; check (grade and record each, docs/evidence.md); require (one the source does not hold is an error the model is asked to fix)")
	fs.StringVar(&cfg.EvidenceSource, "evidence-source", "", "what a job's values are checked against: row (the row's values the template rendered, never the template's own text); prompt (the whole rendered prompt); field:NAME (one field of the row); document (the job's document) (default: document when the jobs have one, else row)")
	fs.StringVar(&cfg.DocumentField, "document-field", "", "row field holding the job's document, its text: stored once in the ledger by its hash, and sent in each request in a <document> block of its own before the prompt (leave it out of the template; the row is recorded without it)")
	fs.StringVar(&cfg.DocumentFileField, "document-file-field", "", "row field holding the path of the job's document, a UTF-8 text or Markdown file read at enqueue (relative to the dataset's directory; an absolute path as given); stored and sent as --document-field's. Give one of the two")
	fs.IntVar(&cfg.MaxDocumentBytes, "max-document-bytes", enqueue.MaxDocumentBytesDefault, "a row whose document is larger is a bad row (0 = the default)")
	fs.StringVar(&f.temp, "temperature", "", "sampling temperature (default: the provider's)")
	fs.BoolVar(&f.progress, "progress", true, "show progress (a bar on a terminal, lines otherwise)")
	f.common.register(fs, true)
	fs.StringVar(&cfg.IDField, "id-field", "", "row field that identifies the row, a string or a number (default: the line number)")
	fs.StringVar(&cfg.Provider, "provider", llm.ProviderOpenAI, "provider: "+strings.Join(llm.ProviderNames(), ", ")+" (what each is: docs/providers.md)")
	fs.StringVar(&cfg.Model, "model", "", "model name (required)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", fixpoint.MaxTokensDefault, "output tokens per call (0 = the default)")
	fs.IntVar(&cfg.Limits.MaxAttempts, "max-attempts", fixpoint.MaxAttemptsDefault, "repair attempts per job (0 = the default)")
	fs.IntVar(&cfg.Limits.TokenBudget, "token-budget", 0, "tokens one job may use over all attempts; 0 = no limit")
	fs.IntVar(&cfg.Limits.RetryBudget, "retry-budget", 0, "transport retries one job may use; 0 = the worker's per-call limit only")
	fs.IntVar(&cfg.MaxBadRows, "max-bad-rows", 0, "bad rows to skip (reported with line numbers); with more, nothing is enqueued; -1 = no limit")
	fs.IntVar(&cfg.MaxPromptBytes, "max-prompt-bytes", pipeline.MaxPromptBytesDefault, "a row whose prompt (with the system prompt and the schema every request carries) is larger is a bad row (keep it at the workers' --max-prompt-bytes; 0 = the default)")
	fs.StringVar(&f.maxCost, "max-cost-usd", "", "spend cap of the batch in US dollars (estimated cost; see enqueue cap --help)")
	fs.StringVar(&f.maxTokens, "max-total-tokens", "", "cap on the batch's input plus output tokens")
	fs.BoolVar(&f.dryRun, "dry-run", false, "check the rows, print one full prompt, the row count and an estimate of tokens and cost; record and publish nothing")
	fs.IntVar(&f.limit, "limit", 0, "with --dry-run: read only the first N rows (0 = all)")
	fs.BoolVar(&cfg.Resume, "resume", false, "finish the batch's interrupted run with its recorded settings: publish jobs recorded but not published, republish jobs the queue lost")
	fs.StringVar(&cfg.Delivery, "delivery", queue.DeliveryRealtime, "realtime; batch: the provider's batch API at half the price, answered within hours, repairs in waves (openai, anthropic); or flex: realtime calls on the provider's flex tier at batch prices, slower, repairs at once (openai; see docs/delivery.md)")
	fs.StringVar(&cfg.BatchFallback, "batch-fallback", "", "with --delivery batch: realtime runs the batch realtime, at the full price, when the provider or its server has no batch API; without it such a batch is refused (exit 2)")
	fs.DurationVar(&cfg.Deadline, "deadline", enqueue.DeadlineDefault, "with --delivery batch: every job is final this long after the batch is first enqueued (near it, the rest runs realtime)")
	fs.BoolVar(&cfg.PromptCache, "prompt-cache", true, "ask the provider to cache the prompt prefix the batch's requests share (OpenAI prompt_cache_key, Anthropic cache_control)")
	fs.DurationVar(&f.common.queue.Duplicates, "duplicates-window", queue.DuplicatesDefault, "when the stream is created: a job id published twice within this window is stored once")
	return f
}

func (c *enqueueCommand) Run(ctx context.Context, args []string) error {
	f := newEnqueueFlags(c.stdout)
	// Flags may come before or after the dataset.
	pos, err := cliflags.ParseArgs(f.fs, args)
	if err != nil {
		return err
	}
	if err := f.check(pos); err != nil {
		return err
	}
	cfg := f.cfg
	cfg.Batch, cfg.Queue = f.common.batch, f.common.queue
	cfg.ProbeBatch = batchProbe(cfg.Provider)
	if cfg.Resume {
		return c.enqueue(ctx, f, cfg, nil)
	}
	if err := f.config(&cfg, c.stderr); err != nil {
		return err
	}
	ds, err := openDataset(pos[0], cfg.Format, c.stdin)
	if err != nil {
		return err
	}
	defer ds.Close()
	cfg.Format = ds.format
	if pos[0] != "-" {
		cfg.DatasetDir = filepath.Dir(pos[0])
	}
	// A setting, template or schema that cannot work is the caller's to
	// fix: say so before reaching for Postgres and NATS.
	if err := enqueue.Check(cfg); err != nil {
		return usageError{Err: err}
	}
	for _, w := range enqueue.SchemaWarnings(cfg.Schema) {
		fmt.Fprintf(c.stderr, "enqueue: warning: %s\n", w)
	}
	if f.dryRun {
		return dryRun(ctx, c.stdout, c.stderr, f.common.dbURL, cfg, ds.file, f.limit)
	}
	return c.enqueue(ctx, f, cfg, ds)
}

// check refuses flags and arguments that cannot go together, before any
// file is read.
func (f *enqueueFlags) check(pos []string) error {
	if f.common.batch == "" {
		return usageError{Err: errors.New("--batch is required (see --help)")}
	}
	if err := queueUsage(f.common.queue, f.common.natsURL); err != nil {
		return err
	}
	if err := f.checkCounts(); err != nil {
		return err
	}
	if !f.cfg.Resume {
		if err := checkStrategy("--strategy", f.strategy); err != nil {
			return err
		}
		if err := checkDocumentFlags(f.fs, fixpoint.Strategy(f.strategy), &f.cfg.Limits); err != nil {
			return err
		}
	}
	if f.cfg.Resume {
		if err := checkResume(f.fs, pos, f.dryRun); err != nil {
			return err
		}
	} else if err := f.checkDatasetArgs(pos); err != nil {
		return err
	}
	return f.checkDelivery()
}

// checkCounts refuses negative counts and a --limit outside a dry run.
func (f *enqueueFlags) checkCounts() error {
	cfg := &f.cfg
	for _, n := range []struct {
		name string
		v    int
	}{{"max-tokens", cfg.MaxTokens}, {"max-attempts", cfg.Limits.MaxAttempts}, {"token-budget", cfg.Limits.TokenBudget}, {"retry-budget", cfg.Limits.RetryBudget}} {
		if n.v < 0 {
			// Said as the flag typed, not as the job field
			// (token_budget, retry_budget...) it sets.
			return usageError{Err: fmt.Errorf("--%s %d: want 0 or more", n.name, n.v)}
		}
	}
	if f.limit != 0 && !f.dryRun {
		return usageError{Err: errors.New("--limit is for --dry-run")}
	}
	if f.limit < 0 {
		return usageError{Err: fmt.Errorf("--limit %d: want 0 (every row) or more", f.limit)}
	}
	return nil
}

// checkDatasetArgs checks what enqueueing a dataset needs: the required
// flags, a batch name enqueue takes, and one dataset. A lone word where a
// dataset goes that names no file is a command mistyped or misplaced.
func (f *enqueueFlags) checkDatasetArgs(pos []string) error {
	if f.schemaFile == "" || f.cfg.Model == "" || f.templateFile == "" {
		if len(pos) == 1 && !strings.ContainsAny(pos[0], "./\\") && pos[0] != "-" {
			if _, err := os.Stat(pos[0]); err != nil {
				return misplacedCommand(pos[0])
			}
		}
		return usageError{Err: errors.New("--batch, --schema, --model and --template are required (see --help)")}
	}
	if err := enqueue.CheckBatchName(f.common.batch); err != nil {
		return usageError{Err: err}
	}
	if len(pos) != 1 {
		return usageError{Err: fmt.Errorf("want one dataset (a .jsonl or .csv file, or - for stdin), got %d arguments", len(pos))}
	}
	return nil
}

// misplacedCommand is the error of a word given where the dataset goes,
// with no file of that name: a command after the flags (enqueue
// --progress=false cancel --batch x, whose flags went to enqueue itself),
// or no command at all (enqueue frobnicate --batch x).
func misplacedCommand(word string) error {
	if slices.Contains(subcommands, word) {
		return usageError{Err: fmt.Errorf("%q comes first, before any flag: enqueue %s [flags] (see enqueue %s --help)", word, word, word)}
	}
	return usageError{Err: fmt.Errorf("unknown command %q (the commands are requeue, cancel and cap; a dataset is a file path)", word)}
}

// flexProviders names the providers whose row has the flex tier.
func flexProviders() []string {
	var names []string
	for _, p := range llm.Providers() {
		if p.Has(llm.DeliveryFlex) {
			names = append(names, p.Name)
		}
	}
	return names
}

// checkDelivery checks --delivery and --deadline.
func (f *enqueueFlags) checkDelivery() error {
	cfg := &f.cfg
	switch cfg.Delivery {
	case queue.DeliveryRealtime, queue.DeliveryBatch:
	case queue.DeliveryFlex:
		if !llm.HasFlex(cfg.Provider) {
			return usageError{Err: fmt.Errorf("--delivery flex: provider %s has no flex tier (flex: %s)", cfg.Provider, strings.Join(flexProviders(), ", "))}
		}
	default:
		return usageError{Err: fmt.Errorf("--delivery %q: want realtime, batch or flex", cfg.Delivery)}
	}
	if cfg.Deadline <= 0 {
		return usageError{Err: fmt.Errorf("--deadline %s must be positive", cfg.Deadline)}
	}
	deadlineGiven := false
	f.fs.Visit(func(fl *flag.Flag) { deadlineGiven = deadlineGiven || fl.Name == "deadline" })
	switch cfg.BatchFallback {
	case "", enqueue.BatchFallbackRealtime:
	default:
		return usageError{Err: fmt.Errorf("--batch-fallback %q: want realtime (or leave it out to refuse a batch that cannot have batch delivery)", cfg.BatchFallback)}
	}
	if cfg.BatchFallback != "" && cfg.Delivery != queue.DeliveryBatch && !cfg.Resume {
		return usageError{Err: errors.New("--batch-fallback is for --delivery batch")}
	}
	if deadlineGiven && cfg.Delivery != queue.DeliveryBatch && !cfg.Resume {
		// Realtime jobs run as soon as a worker takes them; a deadline
		// there would bound nothing.
		return usageError{Err: errors.New("--deadline is for --delivery batch")}
	}
	return nil
}

// config reads into cfg what the flags name: the schema, template and
// system prompt files, and the values that need parsing.
func (f *enqueueFlags) config(cfg *enqueue.Config, stderr io.Writer) error {
	if err := f.readFiles(cfg); err != nil {
		return err
	}
	if f.temp != "" {
		t, err := strconv.ParseFloat(f.temp, 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return usageError{Err: fmt.Errorf("--temperature %q: want a number, 0 or more (0.2, 1)", f.temp)}
		}
		cfg.Temp = &t
	}
	var err error
	if cfg.Cap.MaxCostUSD, err = parseCost(f.maxCost); err != nil {
		return usageError{Err: err}
	}
	if cfg.Cap.MaxCostUSD != nil {
		warnUnpriced(stderr, "enqueue", cfg.Model)
	} else if !f.cfg.Resume {
		warnNoPrice(stderr, cfg.Model)
	}
	if m := cfg.Limits.MergeModel; m != "" && !f.cfg.Resume {
		if cfg.Cap.MaxCostUSD != nil {
			warnUnpriced(stderr, "enqueue", m)
		} else {
			warnNoPrice(stderr, m)
		}
	}
	if cfg.Cap.MaxTotalTokens, err = parseTokens(f.maxTokens); err != nil {
		return usageError{Err: err}
	}
	cfg.Mode = fixpoint.Mode(f.mode)
	cfg.Limits.Strategy = fixpoint.Strategy(f.strategy)
	cfg.Limits.Feedback = fixpoint.FeedbackFormat(f.feedback)
	if cfg.Limits.Coerce, err = fixpoint.ParseCoerceMode(f.coerce); err != nil {
		return usageError{Err: fmt.Errorf("--coerce: %w", err)}
	}
	if cfg.Evidence, err = fixpoint.ParseEvidenceMode(f.evidence); err != nil {
		return usageError{Err: fmt.Errorf("--evidence: %w", err)}
	}
	if cfg.DocumentField != "" && cfg.DocumentFileField != "" {
		return usageError{Err: errors.New("--document-field and --document-file-field: a job has one document, give one of them")}
	}
	if cfg.MaxDocumentBytes < 0 {
		return usageError{Err: fmt.Errorf("--max-document-bytes %d: want 0 (the default) or more", cfg.MaxDocumentBytes)}
	}
	if cfg.EvidenceSource != "" {
		if err := enqueue.CheckEvidenceSource(cfg.EvidenceSource, cfg.DocumentField != "" || cfg.DocumentFileField != ""); err != nil {
			return usageError{Err: fmt.Errorf("--evidence-source: %w", err)}
		}
	}
	cfg.Format = f.format
	return nil
}

// readFiles reads the schema, the template and the system prompt.
func (f *enqueueFlags) readFiles(cfg *enqueue.Config) error {
	var err error
	if cfg.Schema, err = cli.ReadTextFile(f.schemaFile); err != nil {
		return usageError{Err: fmt.Errorf("read schema: %w", err)}
	}
	t, err := cli.ReadTextFile(f.templateFile)
	if err != nil {
		return usageError{Err: fmt.Errorf("read template: %w", err)}
	}
	for _, file := range []struct {
		name string
		body []byte
	}{{f.schemaFile, cfg.Schema}, {f.templateFile, t}} {
		if len(bytes.TrimSpace(file.body)) == 0 {
			return usageError{Err: fmt.Errorf("%s is empty", file.name)}
		}
	}
	cfg.Template = string(t)
	if f.systemFile != "" {
		s, err := cli.ReadTextFile(f.systemFile)
		if err != nil {
			return usageError{Err: fmt.Errorf("read system prompt: %w", err)}
		}
		cfg.System = string(s)
	}
	return nil
}

// enqueue records and publishes the dataset ds (nil for --resume), with
// progress, and says what it did.
func (c *enqueueCommand) enqueue(ctx context.Context, f *enqueueFlags, cfg enqueue.Config, ds *dataset) error {
	if !cfg.Resume {
		// A first run (the nightly cron line on a new machine) makes its
		// ledger as worker migrate does; openLedger migrates it.
		created, err := store.EnsureDatabase(ctx, f.common.dbURL)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(c.stderr, "enqueue: created the database %s, which did not exist (the workers must use the same DATABASE_URL)\n", store.DatabaseName(f.common.dbURL))
		}
	}
	st, err := openLedger(ctx, f.common.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	conn, err := f.common.openQueue()
	if err != nil {
		return err
	}
	defer conn.Close()
	var data io.ReadSeeker
	var prog *progress
	if ds != nil {
		data = ds.file
	}
	if f.progress {
		prog = newProgress(c.stderr, ds.total())
		cfg.ProgressFunc = prog.update
	}
	start := time.Now()
	res, err := enqueue.Run(ctx, conn.JS, st, cfg, data)
	prog.finish(res)
	if !errors.Is(err, enqueue.ErrBadConfig) {
		// A setting wrong for the dataset (a template field no row has)
		// fails every row alike: the error says it once.
		for _, b := range res.Bad {
			fmt.Fprintf(c.stderr, "enqueue: bad row: %v\n", b)
		}
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(c.stderr, "enqueue: warning: %s\n", w)
	}
	if err != nil {
		return runError(ctx, err, cfg, res)
	}
	writeEnqueued(c.stdout, cfg.Batch, res, time.Since(start))
	return nil
}

// runError is the command's error for enqueue.Run's, saying what of the
// batch is kept and what to run next.
func runError(ctx context.Context, err error, cfg enqueue.Config, res enqueue.Progress) error {
	switch {
	case errors.Is(err, enqueue.ErrBadConfig):
		return usageError{Err: err}
	case errors.Is(err, enqueue.ErrTooManyBadRows), errors.Is(err, enqueue.ErrNoRows), errors.Is(err, enqueue.ErrNoBatch),
		errors.Is(err, enqueue.ErrEmptyBatch), errors.Is(err, enqueue.ErrPartlyRecorded):
		return err
	case cfg.Resume:
		return fmt.Errorf("%w\n(run it again: --resume publishes what is left)", err)
	case res.Phase != enqueue.PhasePublish:
		// Stopped while checking the rows: nothing was recorded.
		return fmt.Errorf("%w\n(nothing of batch %s was recorded or published)", err, cfg.Batch)
	case ctx.Err() != nil:
		// (it said "insert jobs: context canceled")
		return fmt.Errorf("interrupted while recording the rows of batch %s: the jobs recorded so far are kept, and the batch is marked partly recorded: run the same command again to record the rest", cfg.Batch)
	}
	return fmt.Errorf("%w\n(the jobs recorded so far are kept, and the batch is marked partly recorded: run the same command again to record the rest)", err)
}

// writeEnqueued says what a run did.
func writeEnqueued(w io.Writer, batch string, res enqueue.Progress, took time.Duration) {
	dups := ""
	if res.Duplicates > 0 {
		// Sent, and dropped because the queue had them: another run
		// (concurrent, or earlier) published them first.
		dups = fmt.Sprintf(", %d sent that the queue already held (dropped as duplicates)", res.Duplicates)
	}
	fmt.Fprintf(w, "batch %s: %s read, %s recorded, %d published, %d already enqueued, %s skipped, %s, %d republished%s, in %s\n",
		batch, cli.Plural(res.Rows, "row"), cli.Plural(res.Recorded, "job"), res.Published, res.Existing, cli.Plural(res.Repeated, "repeated row"),
		cli.Plural(len(res.Bad), "bad row"), res.Republished, dups, took.Round(time.Millisecond))
}

// batchProbe asks a server named by the provider's base URL variable
// whether it serves the batch endpoints; nil (no probe) for a provider
// without a batch API, and for the providers' own APIs, which do.
func batchProbe(provider string) func(context.Context) error {
	row, ok := llm.ProviderNamed(provider)
	if !ok || !row.Has(llm.DeliveryBatch) {
		return nil
	}
	base, key := os.Getenv(row.BaseURLEnv), ""
	if row.KeyEnv != "" {
		key = os.Getenv(row.KeyEnv)
	}
	if base == "" {
		return nil
	}
	return func(ctx context.Context) error {
		c, err := llm.New(llm.Config{Provider: provider, BaseURL: base, APIKey: key,
			Retry: llm.RetryConfig{MaxRetries: 1, MaxElapsedTime: 10 * time.Second}})
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return c.ProbeBatch(pctx)
	}
}
