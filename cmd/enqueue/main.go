// Command enqueue turns a dataset into fixpoint jobs: each JSONL or CSV row is
// rendered through a prompt template, recorded in the Postgres ledger and
// published to NATS JetStream.
//
// The command only wires: each action is a file (enqueue.go the default
// command, with resume.go and dryrun.go for its --resume and --dry-run;
// requeue.go, cancel.go, cap.go), parsing its own flags and checking them
// before the enqueue package does the work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/store"
)

const usage = `Usage: enqueue --batch NAME --schema S.json --template T.txt --model M [flags] DATA.jsonl|DATA.csv|-
       enqueue --batch NAME --resume
       enqueue requeue --batch NAME [--status S,...] [--class C] [--model M] [--provider P] [--max-attempts N] [--strategy S] [--dry-run]
       enqueue cancel --batch NAME
       enqueue cap --batch NAME [--max-cost-usd X|none] [--max-total-tokens N|none]
       enqueue revalidate --batch NAME --schema NEW.json [--replies] [--dry-run]

Renders each row of the dataset through the template (Go text/template over
the row's fields, e.g. {{.subject}}; numbers, null, objects and arrays print
as JSON, {{json .}} writes the whole row, and {{with index . "note"}}...{{end}}
a field some rows lack), registers the schema, records the jobs in the ledger
and publishes them to the queue, with progress on a terminal.

  enqueue --batch tickets-1 --schema ticket.json --template ticket.txt --model gpt-4o-mini --id-field id tickets.jsonl
  enqueue --batch tickets-1 ... --dry-run tickets.jsonl     (check the rows, see a prompt and the estimated cost)

The dataset is read once, in two passes. The first checks every row and
records nothing: a row that cannot be read or rendered, whose --id-field is missing or
repeats an earlier row's id with other content, or whose job would not fit the
queue's message size or the workers' prompt limit is a bad row, reported with
its line number. With more bad rows than --max-bad-rows, nothing of the batch
is recorded or published and enqueue exits 1. A template field or --id-field
that no row has is a typo, not bad rows: nothing is recorded and enqueue exits
2, naming the dataset's fields. The jobs of the rows that passed are kept in
a temporary file in $TMPDIR (two to three times the dataset's size, removed
at the end), from which the second pass records and publishes them.

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

A job's input can be a document (a contract, a report): --document-field
names the row field holding its text, --document-file-field the field holding
the path of a UTF-8 text or Markdown file (relative to the dataset's
directory). Each document is stored once in the ledger by its hash, kept byte
for byte, and sent in every call in a <document> block before the prompt; a
document that is not UTF-8, holds a NUL, is missing or is over
--max-document-bytes is a bad row.

--max-cost-usd and --max-total-tokens cap what the batch may spend (see
enqueue cap --help). requeue, cancel, cap and revalidate act on a batch after
it ran: run 'enqueue COMMAND --help' for each.

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

// subcommands are the batch actions; without one, enqueue enqueues.
var subcommands = []string{"requeue", "cancel", "cap", "revalidate"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name, err := dispatch(ctx, args, stdin, stdout, stderr)
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &uerr), errors.Is(err, store.ErrBadURL), errors.Is(err, natsconn.ErrBadURL), errors.Is(err, natsconn.ErrForeignQueue):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}

// dispatch runs the action args name, and returns the name errors are
// said under.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (string, error) {
	switch sub := firstArg(args); sub {
	case "requeue":
		return "enqueue requeue", (&requeueCommand{stdout: stdout}).Run(ctx, args[1:])
	case "cancel":
		return "enqueue cancel", (&cancelCommand{stdout: stdout}).Run(ctx, args[1:])
	case "cap":
		return "enqueue cap", (&capCommand{stdout: stdout, stderr: stderr}).Run(ctx, args[1:])
	case "revalidate":
		return "enqueue revalidate", (&revalidateCommand{stdout: stdout, stderr: stderr}).Run(ctx, args[1:])
	case "help":
		if _, statErr := os.Stat(sub); statErr != nil { // not a dataset named help
			args = []string{"--help"}
		}
		return "enqueue", (&enqueueCommand{stdin: stdin, stdout: stdout, stderr: stderr}).Run(ctx, args)
	default:
		if near := cliflags.Near(sub, subcommands...); near != "" {
			// Not a dataset: a command misspelt (a file of that name is read).
			if _, statErr := os.Stat(sub); statErr != nil {
				return "enqueue", cliflags.UnknownCommand("enqueue", sub, subcommands...)
			}
		}
		return "enqueue", (&enqueueCommand{stdin: stdin, stdout: stdout, stderr: stderr}).Run(ctx, args)
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
