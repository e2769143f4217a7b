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
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/term"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const usage = `Usage: enqueue --batch NAME --schema S.json --template T.txt [flags] DATA.jsonl|DATA.csv|-

Renders each row of the dataset through the template (Go text/template over
the row's fields, e.g. {{.subject}}), registers the schema, records the jobs in
the ledger and publishes them to the queue, with progress on a terminal.

Job ids are stable (from --id-field, else the batch and the row's line), so
running the same command twice enqueues nothing new. --resume republishes jobs
recorded but not yet published by an interrupted run. A bad row (template
error, unreadable line) is reported with its line number; --max-bad-rows
decides whether the run stops.

Exit status: 0 done, 1 failed (nothing is half-enqueued: rerun or --resume),
2 bad usage.`

const envHelp = `  DATABASE_URL  Postgres ledger (default postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable)
  NATS_URL      NATS server (default nats://127.0.0.1:4222; a worker with an embedded NATS listens on 127.0.0.1:4223)`

type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := enqueue(ctx, args, stdin, stdout, stderr)
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "enqueue: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "enqueue: %v\n", err)
		return 1
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func enqueue(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(stdout, "\nEnvironment:")
		fmt.Fprintln(stdout, envHelp)
	}
	var (
		cfg          pipeline.EnqueueConfig
		schemaFile   = fs.String("schema", "", "JSON Schema file every row's answer must match (required)")
		templateFile = fs.String("template", "", "prompt template file (required unless --resume)")
		systemFile   = fs.String("system-file", "", "optional file with a system prompt for every job")
		format       = fs.String("format", "", "jsonl or csv (default: from the file name)")
		mode         = fs.String("mode", string(llm.ModePrompt), "prompt, json_schema or tool")
		strategy     = fs.String("strategy", string(pipeline.StrategyDefault), "repair strategy: conversation or repair")
		feedback     = fs.String("feedback", string(pipeline.FeedbackDefault), "feedback format: text or xml")
		temp         = fs.String("temperature", "", "sampling temperature (default: the provider's)")
		dbURL        = fs.String("database-url", env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"), "Postgres URL of the ledger (env DATABASE_URL)")
		natsURL      = fs.String("nats-url", env("NATS_URL", nats.DefaultURL), "NATS server URL (env NATS_URL)")
		progress     = fs.Bool("progress", true, "show progress (a bar on a terminal, lines otherwise)")
	)
	fs.StringVar(&cfg.Batch, "batch", "", "batch name (required)")
	fs.StringVar(&cfg.IDField, "id-field", "", "row field that identifies the row (default: the line number)")
	fs.StringVar(&cfg.Provider, "provider", llm.ProviderOpenAI, "openai, anthropic or ollama")
	fs.StringVar(&cfg.Model, "model", "", "model name (required)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", pipeline.MaxTokensDefault, "output tokens per call")
	fs.IntVar(&cfg.Limits.MaxAttempts, "max-attempts", pipeline.MaxAttemptsDefault, "repair attempts per job")
	fs.IntVar(&cfg.Limits.TokenBudget, "token-budget", 0, "tokens one job may use over all attempts; 0 = no limit")
	fs.IntVar(&cfg.Limits.RetryBudget, "retry-budget", 0, "transport retries one job may use; 0 = the worker's per-call limit only")
	fs.IntVar(&cfg.MaxBadRows, "max-bad-rows", 0, "bad rows to skip (reported with line numbers) before stopping; -1 = never stop")
	fs.BoolVar(&cfg.Resume, "resume", false, "republish the batch's jobs recorded but not yet published, without reading data")
	fs.StringVar(&cfg.Queue.Stream, "stream", pipeline.StreamDefault, "JetStream stream of jobs")
	fs.StringVar(&cfg.Queue.Subject, "subject", pipeline.SubjectDefault, "subject jobs are published on")
	fs.StringVar(&cfg.Queue.Consumer, "consumer", pipeline.ConsumerDefault, "durable consumer shared by every worker")
	fs.DurationVar(&cfg.Queue.Duplicates, "duplicates-window", pipeline.DuplicatesDefault, "a job id published twice within this window is stored once")
	fs.DurationVar(&cfg.Queue.AckWait, "ack-wait", pipeline.AckWaitDefault, "consumer ack wait (must match the workers')")
	fs.IntVar(&cfg.Queue.MaxDeliver, "max-deliver", pipeline.MaxDeliverDefault, "consumer max deliveries (must match the workers')")
	fs.IntVar(&cfg.Queue.MaxAckPending, "max-ack-pending", pipeline.MaxAckPendingDefault, "consumer cap on jobs in flight (must match the workers')")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if cfg.Batch == "" || *schemaFile == "" || cfg.Model == "" || (*templateFile == "" && !cfg.Resume) {
		return usageError{errors.New("--batch, --schema, --model and --template are required (see --help)")}
	}
	if fs.NArg() != 1 && !cfg.Resume {
		return usageError{fmt.Errorf("want one dataset (a .jsonl or .csv file, or - for stdin), got %d arguments", fs.NArg())}
	}
	var err error
	if cfg.Schema, err = os.ReadFile(*schemaFile); err != nil {
		return usageError{fmt.Errorf("read schema: %w", err)}
	}
	if _, err := validate.Compile(cfg.Schema); err != nil {
		return usageError{fmt.Errorf("schema %s: %w", *schemaFile, err)}
	}
	if *templateFile != "" {
		t, err := os.ReadFile(*templateFile)
		if err != nil {
			return usageError{fmt.Errorf("read template: %w", err)}
		}
		cfg.Template = string(t)
	}
	if *systemFile != "" {
		s, err := os.ReadFile(*systemFile)
		if err != nil {
			return usageError{fmt.Errorf("read system prompt: %w", err)}
		}
		cfg.System = string(s)
	}
	if *temp != "" {
		t, err := strconv.ParseFloat(*temp, 64)
		if err != nil {
			return usageError{fmt.Errorf("--temperature %q: %w", *temp, err)}
		}
		cfg.Temp = &t
	}
	cfg.Mode = llm.Mode(*mode)
	cfg.Limits.Strategy = pipeline.Strategy(*strategy)
	cfg.Limits.Feedback = pipeline.FeedbackFormat(*feedback)

	var data io.Reader = strings.NewReader("")
	name := fs.Arg(0)
	total := 0
	if !cfg.Resume {
		cfg.Format = *format
		if name == "-" || name == "" {
			data = stdin
			if cfg.Format == "" {
				return usageError{errors.New("reading stdin: pass --format jsonl or csv")}
			}
		} else {
			if cfg.Format == "" {
				if cfg.Format, err = pipeline.DetectFormat(name); err != nil {
					return usageError{err}
				}
			}
			f, err := os.Open(name)
			if err != nil {
				return usageError{err}
			}
			defer f.Close()
			// Count lines for the progress bar, then read from the start.
			if total, err = countLines(f); err != nil {
				return usageError{fmt.Errorf("read %s: %w", name, err)}
			}
			if cfg.Format == pipeline.FormatCSV && total > 0 {
				total--
			}
			data = f
		}
	} else {
		cfg.Format = pipeline.FormatJSONL
	}

	st, err := store.Open(ctx, *dbURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	nc, err := nats.Connect(*natsURL, nats.Name("fixpoint-enqueue"))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", *natsURL, err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	bar := pipeline.NewProgressBar(stderr, tty, "enqueue", total)
	if *progress {
		cfg.ProgressFunc = func(p pipeline.EnqueueProgress) {
			bar.Update(p.Rows, fmt.Sprintf("%d published, %d already enqueued, %d bad", p.Published, p.Existing, len(p.Bad)), false)
		}
	}
	start := time.Now()
	prog, err := pipeline.Enqueue(ctx, js, st, cfg, data)
	if *progress {
		bar.Update(prog.Rows, fmt.Sprintf("%d published, %d already enqueued, %d bad", prog.Published, prog.Existing, len(prog.Bad)), true)
	}
	for _, b := range prog.Bad {
		fmt.Fprintf(stderr, "enqueue: skipped %v\n", b)
	}
	if err != nil {
		return fmt.Errorf("%w\n(the jobs recorded so far are kept: fix the input and run the same command again, or --resume to publish what is recorded)", err)
	}
	fmt.Fprintf(stdout, "batch %s: %d rows read, %d jobs recorded, %d published, %d already enqueued, %d duplicates dropped by the queue, %d bad rows, in %s\n",
		cfg.Batch, prog.Rows, prog.Recorded, prog.Published, prog.Existing, prog.Duplicates, len(prog.Bad), time.Since(start).Round(time.Millisecond))
	return nil
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
