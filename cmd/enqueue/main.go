// Command enqueue turns a dataset into fixpoint jobs: each JSONL or CSV row is
// rendered through a prompt template, recorded in the Postgres ledger and
// published to NATS JetStream.
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
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

const usage = `Usage: enqueue --batch NAME --schema S.json --template T.txt --model M [flags] DATA.jsonl|DATA.csv|-
       enqueue --batch NAME --resume
       enqueue requeue --batch NAME [--status S,...] [--class C] [--model M] [--provider P] [--max-attempts N] [--strategy S] [--dry-run]
       enqueue cancel --batch NAME
       enqueue cap --batch NAME [--max-cost-usd X|none] [--max-total-tokens N|none]

Renders each row of the dataset through the template (Go text/template over
the row's fields, e.g. {{.subject}}; numbers, null, objects and arrays print
as JSON, {{json .}} writes the whole row, and {{with index . "note"}}...{{end}}
a field some rows lack), registers the schema, records the jobs in the ledger
and publishes them to the queue, with progress on a terminal.

The dataset is read twice. The first pass checks every row and records
nothing: a row that cannot be read or rendered, whose --id-field is missing or
repeats an earlier row's id with other content, or whose job would not fit the
queue's message size or the workers' prompt limit is a bad row, reported with
its line number. With more bad rows than --max-bad-rows, nothing of the batch
is recorded or published and enqueue exits 1. A template field or --id-field
that no row has is a typo, not bad rows: nothing is recorded and enqueue exits
2, naming the dataset's fields. The second pass records and publishes the
rows that passed.

Job ids are stable (the batch and --id-field, else the batch and the row's
line; 1 and "1" are the same id), so running the same command twice enqueues
nothing new. A batch enqueued again must be given the settings it was first
recorded with; a difference is refused with its list. A run cut short while
it recorded the rows (its second pass) leaves the batch marked partly
recorded: run the same command again, which records the rest (report wait and
worker --drain --batch fail the batch until then; enqueue cancel ends it as it
is). --resume finishes a run cut short after every row was recorded: it
publishes jobs recorded but not yet published, and republishes jobs the ledger
says were published but the queue no longer holds (a lost NATS data
directory), all with the batch's recorded settings (pass only --batch).

--max-cost-usd and --max-total-tokens cap what the batch may spend (see
enqueue cap --help). requeue, cancel and cap act on a batch after it ran: run
'enqueue COMMAND --help' for each.

Exit status: 0 done; 1 failed: the dataset was refused (more bad rows than
--max-bad-rows, no rows, a header it cannot use: nothing is recorded; fix the
data), or a service failed (run the same command again; nothing is lost);
2 bad usage (a typo in a flag, an unknown provider, mode or strategy, a schema
or template that does not parse, changed settings).`

const envHelp = `  DATABASE_URL          Postgres ledger (default postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable)
  NATS_URL              NATS server; empty (the default) means the embedded queue in --nats-dir, the one
                        a worker without NATS_URL serves: enqueue writes to it directly, or through the
                        worker's embedded server at FIXPOINT_NATS_LISTEN when a worker is running
  FIXPOINT_NATS_DIR     the embedded queue's directory (default .fixpoint/nats)
  FIXPOINT_NATS_LISTEN  where a running worker's embedded server listens (default 127.0.0.1:4223)`

// usageError marks errors caused by how the command was called (exit 2).
type usageError = cliflags.UsageError

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	name := "enqueue"
	switch sub := firstArg(args); sub {
	case "requeue":
		name, err = "enqueue requeue", requeue(ctx, args[1:], stdout)
	case "cancel":
		name, err = "enqueue cancel", cancel(ctx, args[1:], stdout)
	case "cap":
		name, err = "enqueue cap", capCmd(ctx, args[1:], stdout, stderr)
	default:
		if near := nearCommand(sub); near != "" {
			// Not a dataset: a command misspelt (a file of that name is read).
			if _, statErr := os.Stat(sub); statErr != nil {
				err = usageError{Err: fmt.Errorf("unknown command %q: did you mean %s? (see --help)", sub, near)}
				break
			}
		}
		err = runEnqueue(ctx, args, stdin, stdout, stderr)
	}
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &uerr), errors.Is(err, store.ErrBadURL), errors.Is(err, natsconn.ErrBadURL):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}

// firstArg is args[0] when it is a word (a subcommand), else "".
func firstArg(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return ""
	}
	return args[0]
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// settingFlags are the flags that set a batch's settings: --resume takes
// them from the ledger instead.
var settingFlags = []string{"schema", "template", "system-file", "format", "mode", "strategy", "feedback", "temperature",
	"id-field", "provider", "model", "max-tokens", "max-attempts", "token-budget", "retry-budget", "max-bad-rows", "max-prompt-bytes",
	"max-cost-usd", "max-total-tokens", "delivery", "deadline", "prompt-cache", "coerce"}

func runEnqueue(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", usage, stdout)
	var (
		cfg          enqueue.Config
		c            commonFlags
		schemaFile   = fs.String("schema", "", "JSON Schema file every row's answer must match (required)")
		templateFile = fs.String("template", "", "prompt template file (required)")
		systemFile   = fs.String("system-file", "", "optional file with a system prompt for every job")
		format       = fs.String("format", "", "jsonl or csv (default: from the file name)")
		mode         = fs.String("mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
		strategy     = fs.String("strategy", string(fixpoint.StrategyDefault), "repair strategy: conversation, repair, or patch (an RFC 6902 JSON Patch of the failing locations, mode prompt only)")
		feedback     = fs.String("feedback", string(fixpoint.FeedbackDefault), "feedback format: text or xml")
		coerce       = fs.String("coerce", string(fixpoint.CoerceSafe), "schema-guided local repairs tried before another call: none; safe (\"42\" for an integer, an enum's letter case, a single value for an array, null for an optional property dropped, \"customerName\" for a declared \"customer_name\"); all (safe, and properties the schema does not allow dropped when every required one is there)")
		temp         = fs.String("temperature", "", "sampling temperature (default: the provider's)")
		progress     = fs.Bool("progress", true, "show progress (a bar on a terminal, lines otherwise)")
	)
	c.register(fs, true)
	fs.StringVar(&cfg.IDField, "id-field", "", "row field that identifies the row, a string or a number (default: the line number)")
	fs.StringVar(&cfg.Provider, "provider", llm.ProviderOpenAI, "openai, anthropic or ollama")
	fs.StringVar(&cfg.Model, "model", "", "model name (required)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", fixpoint.MaxTokensDefault, "output tokens per call (0 = the default)")
	fs.IntVar(&cfg.Limits.MaxAttempts, "max-attempts", fixpoint.MaxAttemptsDefault, "repair attempts per job (0 = the default)")
	fs.IntVar(&cfg.Limits.TokenBudget, "token-budget", 0, "tokens one job may use over all attempts; 0 = no limit")
	fs.IntVar(&cfg.Limits.RetryBudget, "retry-budget", 0, "transport retries one job may use; 0 = the worker's per-call limit only")
	fs.IntVar(&cfg.MaxBadRows, "max-bad-rows", 0, "bad rows to skip (reported with line numbers); with more, nothing is enqueued; -1 = no limit")
	fs.IntVar(&cfg.MaxPromptBytes, "max-prompt-bytes", pipeline.MaxPromptBytesDefault, "a row whose prompt (with the system prompt and the schema every request carries) is larger is a bad row (keep it at the workers' --max-prompt-bytes; 0 = the default)")
	maxCost := fs.String("max-cost-usd", "", "spend cap of the batch in US dollars (estimated cost; see enqueue cap --help)")
	maxTokens := fs.String("max-total-tokens", "", "cap on the batch's input plus output tokens")
	dryRun := fs.Bool("dry-run", false, "check the rows, print one full prompt, the row count and an estimate of tokens and cost; record and publish nothing")
	limit := fs.Int("limit", 0, "with --dry-run: read only the first N rows (0 = all)")
	fs.BoolVar(&cfg.Resume, "resume", false, "finish the batch's interrupted run with its recorded settings: publish jobs recorded but not published, republish jobs the queue lost")
	fs.StringVar(&cfg.Delivery, "delivery", pipeline.DeliveryRealtime, "realtime, or batch: the provider's batch API at half the price, answered within hours, repairs in waves (openai, anthropic)")
	fs.DurationVar(&cfg.Deadline, "deadline", enqueue.DeadlineDefault, "with --delivery batch: every job is final this long after the batch is first enqueued (near it, the rest runs realtime)")
	fs.BoolVar(&cfg.PromptCache, "prompt-cache", true, "ask the provider to cache the prompt prefix the batch's requests share (OpenAI prompt_cache_key, Anthropic cache_control)")
	fs.DurationVar(&c.queue.Duplicates, "duplicates-window", pipeline.DuplicatesDefault, "when the stream is created: a job id published twice within this window is stored once")
	// Flags may come before or after the dataset.
	pos, err := cliflags.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	cfg.Batch, cfg.Queue = c.batch, c.queue
	if cfg.Batch == "" {
		return usageError{Err: errors.New("--batch is required (see --help)")}
	}
	if err := queueUsage(c.queue); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-tokens", cfg.MaxTokens}, {"max-attempts", cfg.Limits.MaxAttempts}, {"token-budget", cfg.Limits.TokenBudget}, {"retry-budget", cfg.Limits.RetryBudget}} {
		if f.v < 0 {
			// Said as the flag typed, not as the job field
			// (token_budget, retry_budget...) it sets.
			return usageError{Err: fmt.Errorf("--%s %d: want 0 or more", f.name, f.v)}
		}
	}
	if cfg.Resume {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains(settingFlags, f.Name) {
				given = append(given, "--"+f.Name)
			}
		})
		if len(given) > 0 {
			return usageError{Err: fmt.Errorf("--resume takes every setting from the batch as recorded; drop %s (to run jobs again with other settings, use enqueue requeue)", strings.Join(given, ", "))}
		}
		if len(pos) != 0 {
			return usageError{Err: fmt.Errorf("--resume reads no dataset, got %d arguments", len(pos))}
		}
	} else {
		if *schemaFile == "" || cfg.Model == "" || *templateFile == "" {
			if len(pos) == 1 && !strings.ContainsAny(pos[0], "./\\") && pos[0] != "-" {
				if _, err := os.Stat(pos[0]); err != nil && slices.Contains([]string{"requeue", "cancel", "cap"}, pos[0]) {
					// enqueue --progress=false cancel --batch x: the flags
					// went to the enqueue command itself.
					return usageError{Err: fmt.Errorf("%q comes first, before any flag: enqueue %s [flags] (see enqueue %s --help)", pos[0], pos[0], pos[0])}
				}
				if _, err := os.Stat(pos[0]); err != nil {
					// enqueue frobnicate --batch x: a command, not a dataset.
					return usageError{Err: fmt.Errorf("unknown command %q (the commands are requeue, cancel and cap; a dataset is a file path)", pos[0])}
				}
			}
			return usageError{Err: errors.New("--batch, --schema, --model and --template are required (see --help)")}
		}
		if err := enqueue.CheckBatchName(cfg.Batch); err != nil {
			return usageError{Err: err}
		}
		if len(pos) != 1 {
			return usageError{Err: fmt.Errorf("want one dataset (a .jsonl or .csv file, or - for stdin), got %d arguments", len(pos))}
		}
	}

	var data io.ReadSeeker
	total := 0
	if !cfg.Resume {
		var err error
		if cfg.Schema, err = cli.ReadTextFile(*schemaFile); err != nil {
			return usageError{Err: fmt.Errorf("read schema: %w", err)}
		}
		t, err := cli.ReadTextFile(*templateFile)
		if err != nil {
			return usageError{Err: fmt.Errorf("read template: %w", err)}
		}
		for name, body := range map[string][]byte{*schemaFile: cfg.Schema, *templateFile: t} {
			if len(bytes.TrimSpace(body)) == 0 {
				return usageError{Err: fmt.Errorf("%s is empty", name)}
			}
		}
		cfg.Template = string(t)
		if *systemFile != "" {
			s, err := cli.ReadTextFile(*systemFile)
			if err != nil {
				return usageError{Err: fmt.Errorf("read system prompt: %w", err)}
			}
			cfg.System = string(s)
		}
		if *temp != "" {
			t, err := strconv.ParseFloat(*temp, 64)
			if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
				return usageError{Err: fmt.Errorf("--temperature %q: want a number, 0 or more (0.2, 1)", *temp)}
			}
			cfg.Temp = &t
		}
		if cfg.Cap.MaxCostUSD, err = parseCost(*maxCost); err != nil {
			return usageError{Err: err}
		}
		if cfg.Cap.MaxCostUSD != nil {
			warnUnpriced(stderr, "enqueue", cfg.Model)
		}
		if cfg.Cap.MaxTotalTokens, err = parseTokens(*maxTokens); err != nil {
			return usageError{Err: err}
		}
		cfg.Mode = fixpoint.Mode(*mode)
		cfg.Limits.Strategy = fixpoint.Strategy(*strategy)
		cfg.Limits.Feedback = fixpoint.FeedbackFormat(*feedback)
		mode, err := fixpoint.ParseCoerceMode(*coerce)
		if err != nil {
			return usageError{Err: fmt.Errorf("--coerce: %w", err)}
		}
		cfg.Limits.Coerce = mode
		cfg.Format = *format
		name := pos[0]
		var f *os.File
		if name == "-" {
			if cfg.Format == "" {
				return usageError{Err: errors.New("reading stdin: pass --format jsonl or csv")}
			}
			// Enqueue reads the dataset twice: keep stdin in a file.
			if f, err = spool(stdin); err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			defer os.Remove(f.Name())
		} else {
			if cfg.Format == "" {
				if cfg.Format, err = enqueue.DetectFormat(name); err != nil {
					return usageError{Err: err}
				}
			}
			if f, err = os.Open(name); err != nil {
				return usageError{Err: err}
			}
		}
		defer f.Close()
		// Count lines for the progress bar, then read from the start.
		if total, err = countLines(f); err != nil {
			return usageError{Err: fmt.Errorf("read %s: %w", name, err)}
		}
		if cfg.Format == enqueue.FormatCSV && total > 0 {
			total--
		}
		data = f
	}

	if *dryRun && cfg.Resume {
		return usageError{Err: errors.New("--dry-run and --resume do not go together")}
	}
	if *limit != 0 && !*dryRun {
		return usageError{Err: errors.New("--limit is for --dry-run")}
	}
	if *limit < 0 {
		return usageError{Err: fmt.Errorf("--limit %d: want 0 (every row) or more", *limit)}
	}
	switch cfg.Delivery {
	case pipeline.DeliveryRealtime, pipeline.DeliveryBatch:
	default:
		return usageError{Err: fmt.Errorf("--delivery %q: want realtime or batch", cfg.Delivery)}
	}
	if cfg.Deadline <= 0 {
		return usageError{Err: fmt.Errorf("--deadline %s must be positive", cfg.Deadline)}
	}
	deadlineGiven := false
	fs.Visit(func(f *flag.Flag) { deadlineGiven = deadlineGiven || f.Name == "deadline" })
	if deadlineGiven && cfg.Delivery != pipeline.DeliveryBatch && !cfg.Resume {
		// Realtime jobs run as soon as a worker takes them; a deadline
		// there would bound nothing.
		return usageError{Err: errors.New("--deadline is for --delivery batch")}
	}
	cfg.ProbeBatch = batchProbe(cfg.Provider)
	if !cfg.Resume {
		// A setting, template or schema that cannot work is the caller's to
		// fix: say so before reaching for Postgres and NATS.
		if err := enqueue.Check(cfg); err != nil {
			return usageError{Err: err}
		}
	}
	if *dryRun {
		// A dry run records nothing, and migrates nothing either: a newer
		// binary's dry run moved a shared ledger to a schema the running
		// workers refused.
		st, err := store.Open(ctx, c.dbURL, nil)
		if err != nil {
			return err
		}
		defer st.Close()
		if applied, known, err := st.SchemaVersion(ctx); errors.Is(err, store.ErrUnreleasedLedger) {
			return err
		} else if err != nil || applied != known {
			fmt.Fprintf(stderr, "enqueue: the ledger is at migration %d of this binary's %d: the dry run reads nothing of it (no earlier batches to estimate from, no jobs it already holds)\n", applied, known)
			return dryRunReport(ctx, nil, cfg, data, *limit, stdout)
		}
		return dryRunReport(ctx, st, cfg, data, *limit, stdout)
	}
	st, err := openLedger(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	conn, err := c.openQueue()
	if err != nil {
		return err
	}
	defer conn.Close()
	js := conn.JS
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	bars := map[string]*cli.ProgressBar{}
	bar := func(phase string) *cli.ProgressBar {
		if bars[phase] == nil {
			label := "enqueue"
			if phase == enqueue.PhaseCheck {
				label = "check  "
			}
			bars[phase] = cli.NewProgressBar(stderr, tty, label, total)
		}
		return bars[phase]
	}
	note := func(p enqueue.Progress) string {
		if p.Phase == enqueue.PhaseCheck {
			return fmt.Sprintf("%d bad, %d repeated", len(p.Bad), p.Repeated)
		}
		return fmt.Sprintf("%d published, %d already enqueued, %d republished", p.Published, p.Existing, p.Republished)
	}
	var last enqueue.Progress
	if *progress {
		cfg.ProgressFunc = func(p enqueue.Progress) {
			if last.Phase != "" && last.Phase != p.Phase {
				// The check read every row: their number, not the file's
				// lines (a quoted line break, a blank line), is the total.
				b := bar(last.Phase)
				b.SetTotal(last.Rows)
				b.Update(last.Rows, note(last), true)
				total = last.Rows
			}
			last = p
			bar(p.Phase).Update(p.Rows, note(p), false)
		}
	}
	start := time.Now()
	prog, err := enqueue.Run(ctx, js, st, cfg, data)
	if *progress && prog.Phase != "" {
		bar(prog.Phase).Update(prog.Rows, note(prog), true)
	}
	if !errors.Is(err, enqueue.ErrBadConfig) {
		// A setting wrong for the dataset (a template field no row has)
		// fails every row alike: the error says it once.
		for _, b := range prog.Bad {
			fmt.Fprintf(stderr, "enqueue: bad row: %v\n", b)
		}
	}
	for _, w := range prog.Warnings {
		fmt.Fprintf(stderr, "enqueue: warning: %s\n", w)
	}
	switch {
	case errors.Is(err, enqueue.ErrBadConfig):
		return usageError{Err: err}
	case errors.Is(err, enqueue.ErrTooManyBadRows), errors.Is(err, enqueue.ErrNoRows), errors.Is(err, enqueue.ErrNoBatch),
		errors.Is(err, enqueue.ErrEmptyBatch), errors.Is(err, enqueue.ErrPartlyRecorded):
		return err
	case err != nil && cfg.Resume:
		return fmt.Errorf("%w\n(run it again: --resume publishes what is left)", err)
	case err != nil && prog.Phase != enqueue.PhasePublish:
		// Stopped while checking the rows: nothing was recorded.
		return fmt.Errorf("%w\n(nothing of batch %s was recorded or published)", err, cfg.Batch)
	case err != nil && ctx.Err() != nil:
		// (it said "insert jobs: context canceled")
		return fmt.Errorf("interrupted while recording the rows of batch %s: the jobs recorded so far are kept, and the batch is marked partly recorded: run the same command again to record the rest", cfg.Batch)
	case err != nil:
		return fmt.Errorf("%w\n(the jobs recorded so far are kept, and the batch is marked partly recorded: run the same command again to record the rest)", err)
	}
	dups := ""
	if prog.Duplicates > 0 {
		// Sent, and dropped because the queue had them: another run
		// (concurrent, or earlier) published them first.
		dups = fmt.Sprintf(", %d sent that the queue already held (dropped as duplicates)", prog.Duplicates)
	}
	fmt.Fprintf(stdout, "batch %s: %s read, %s recorded, %d published, %d already enqueued, %s skipped, %s, %d republished%s, in %s\n",
		cfg.Batch, cli.Plural(prog.Rows, "row"), cli.Plural(prog.Recorded, "job"), prog.Published, prog.Existing, cli.Plural(prog.Repeated, "repeated row"),
		cli.Plural(len(prog.Bad), "bad row"), prog.Republished, dups, time.Since(start).Round(time.Millisecond))
	return nil
}

// spool copies r into a temporary file and returns it at its start.
func spool(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "fixpoint-enqueue-*.data")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

func countLines(f *os.File) (int, error) {
	buf := make([]byte, 256<<10)
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	_, err := f.Seek(0, io.SeekStart)
	return n, err
}

// dryRunReport prints what enqueue would do with the dataset and what it
// would cost; it exits 1 (ErrTooManyBadRows) when the real run would stop
// on bad rows.
func dryRunReport(ctx context.Context, st enqueue.DryRunLedger, cfg enqueue.Config, data io.Reader, limit int, stdout io.Writer) error {
	rep, err := enqueue.DryRun(ctx, st, cfg, data, limit, nil)
	if errors.Is(err, enqueue.ErrBadConfig) {
		return usageError{Err: err}
	}
	if err != nil {
		return err
	}
	read := cli.Plural(rep.Rows, "row")
	if rep.Limited {
		read = fmt.Sprintf("the first %d rows (--limit)", rep.Rows)
	}
	fmt.Fprintf(stdout, "dry run of batch %s: read %s: %d would be jobs, %d already enqueued, %d bad, %d repeated; nothing recorded or published\n",
		cfg.Batch, read, rep.Jobs, rep.Existing, len(rep.Bad), rep.Repeated)
	for _, b := range rep.Bad {
		fmt.Fprintf(stdout, "  bad row: %v\n", b)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	if rep.Jobs > 0 {
		fmt.Fprintf(stdout, "\n--- system prompt (every attempt) ---\n%s\n--- prompt of line %d ---\n%s\n---\n\n", rep.System, rep.PromptLine, rep.Prompt)
		from := "no earlier batch of this schema and model to measure: one attempt a job, repairs add more"
		if rep.Measured.Jobs > 0 {
			from = fmt.Sprintf("measured on %d jobs of %d earlier batches of this schema and model", rep.Measured.Jobs, rep.Measured.Batches)
		}
		fmt.Fprintf(stdout, "estimate: %s x %.2f attempts (%s)\n", cli.Plural(rep.Jobs, "job"), rep.Attempts, from)
		price := fmt.Sprintf("$%.4f at %s list prices", rep.CostUSD, cfg.Model)
		if !rep.PriceKnown {
			price = fmt.Sprintf("cost unknown: %s is not in the price table", cfg.Model)
		}
		fmt.Fprintf(stdout, "  ~%.0f input and ~%.0f output tokens an attempt: ~%.0f tokens in all, %s\n",
			rep.InputTokens, rep.OutputTokens, rep.Tokens, price)
		if rep.Limited {
			fmt.Fprintln(stdout, "  (for the rows read; the dataset has more)")
		}
	}
	if cfg.MaxBadRows >= 0 && len(rep.Bad) > cfg.MaxBadRows {
		return fmt.Errorf("%w: %s (limit %d): the real run would record and publish nothing", enqueue.ErrTooManyBadRows, cli.Plural(len(rep.Bad), "bad row"), cfg.MaxBadRows)
	}
	if rep.Rows > 0 && len(rep.Bad) == rep.Rows && !rep.Limited {
		return fmt.Errorf("%w: every one of the dataset's %d rows is bad: the real run would record and publish nothing", enqueue.ErrTooManyBadRows, rep.Rows)
	}
	return nil
}

// batchProbe asks an OpenAI-compatible or Anthropic server named by its
// base URL variable whether it serves the batch endpoints; nil (no
// probe) for the providers' own APIs, which do.
func batchProbe(provider string) func(context.Context) error {
	var base, key string
	switch provider {
	case llm.ProviderOpenAI:
		base, key = os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY")
	case llm.ProviderAnthropic:
		base, key = os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
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

// warnUnpriced warns that a dollar cap on model can be enforced only by
// workers given its price, when fixpoint's table has none.
func warnUnpriced(w io.Writer, cmd, model string) {
	if _, priced := repair.DefaultPrices().Lookup(model); !priced {
		fmt.Fprintf(w, "%s: warning: %s has no price in fixpoint's table, so a worker can enforce --max-cost-usd only when its --prices lists it; a worker without one ends the batch's jobs over_budget without calling the model\n", cmd, model)
	}
}

// nearCommand returns the subcommand word is a near miss of (one letter
// off, missing, extra or two swapped), or "".
func nearCommand(word string) string {
	for _, c := range []string{"requeue", "cancel", "cap"} {
		if word != c && word != "" && editDistance(word, c) <= 1+len(c)/6 {
			return c
		}
	}
	return ""
}

// editDistance is the edit distance of two short words: letters inserted,
// deleted, changed, or two neighbours swapped (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
