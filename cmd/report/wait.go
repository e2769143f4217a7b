package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

const waitUsage = `Usage: report wait BATCH [--max-failure-rate R] [--timeout D] [flags]

Shows the batch's progress on stderr until every job is final, then prints
its verdict. It fails (exit 1) when the share of jobs not valid exceeds R,
when no job is valid (unless every one was cancelled), or when jobs are
still queued after D; a batch with no jobs is done at once. It also stops
waiting, saying what to run, when jobs cannot finish: recorded but never
published (an enqueue stopped before publishing them), or published and
no longer in the queue (--nats-url, or the embedded one a worker serves
from --nats-dir) after they stopped finishing for 30s.

  enqueue --batch b1 ... data.jsonl && report wait b1 --max-failure-rate 0.05 --timeout 2h

Exit status: 0 done, 1 an error, not done in time or the failure rate over --max-failure-rate, 2 bad usage.`

const waitEnv = `  DATABASE_URL       Postgres ledger (default ` + databaseURLDefault + `)
  NATS_URL           the queue's NATS server (empty: the embedded queue)
  FIXPOINT_NATS_DIR  the embedded queue's directory (default ` + natsaddr.DirDefault + `)`

// waitCommand is report wait.
type waitCommand struct{ stdout, stderr io.Writer }

func (c *waitCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("wait", waitUsage, waitEnv, c.stdout)
	maxFail := fs.Float64("max-failure-rate", 1, "exit 1 when (jobs not valid)/(jobs) exceeds this")
	every := fs.Duration("interval", time.Second, "how often to poll")
	timeout := fs.Duration("timeout", 0, "exit 1 when the batch is not done after this long (0 = wait as long as it takes)")
	natsURL := fs.String("nats-url", envOr("NATS_URL", ""), "the queue's NATS server (env NATS_URL), to see whether it still holds jobs that stop finishing; empty: the embedded queue a running worker serves from --nats-dir")
	natsDir := fs.String("nats-dir", envOr("FIXPOINT_NATS_DIR", natsaddr.DirDefault), "the embedded queue's directory (env FIXPOINT_NATS_DIR)")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	// Values that cannot work are said before the ledger is reached.
	switch {
	case *every <= 0:
		return usageError{Err: fmt.Errorf("--interval %s: want a positive duration", *every)}
	case *timeout < 0:
		return usageError{Err: fmt.Errorf("--timeout %s: want 0 (no limit) or a positive duration", *timeout)}
	case !(*maxFail >= 0 && *maxFail <= 1): // NaN too
		return usageError{Err: fmt.Errorf("--max-failure-rate %v: want a share between 0 and 1", *maxFail)}
	case *natsURL != "":
		if err := natsaddr.CheckURL(*natsURL); err != nil {
			return usageError{Err: fmt.Errorf("--nats-url (env NATS_URL): %w", err)}
		}
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	batch := pos[0]
	return wait(ctx, c.stdout, c.stderr, st, batch, *maxFail, *every, *timeout, unpublishedGrace, queueCheck(st, batch, *natsURL, *natsDir))
}

// unpublishedGrace is how long every queued job of a batch must stay
// unpublished, with no enqueue recording it, before report wait gives up.
const unpublishedGrace = 30 * time.Second

// queueHolds reports whether the batch's queue holds any message of it,
// and says where it looked.
type queueHolds func(ctx context.Context) (held bool, where string, err error)

// queueScanMax bounds the messages queueCheck reads; past them it cannot
// say, and report wait goes on waiting.
const queueScanMax = 20000

// queueCheck looks in the queue the batch was enqueued on: the server at
// url, or the one a running worker serves from dir (report never starts
// one: it would hold the directory a worker needs).
func queueCheck(st batchLedger, batch, url, dir string) queueHolds {
	return func(ctx context.Context) (bool, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := st.Batch(ctx, batch)
		if err != nil {
			return false, "", err
		}
		settings, err := enqueue.ParseBatchSettings(b)
		if err != nil {
			return false, "", err
		}
		q := queue.Config{Stream: settings.Stream, Subject: settings.Subject}.WithDefaults()
		if url == "" {
			if url = natsaddr.RunningURL(dir); url == "" {
				return false, "", fmt.Errorf("no worker serves the embedded queue in %s (set --nats-dir, or --nats-url for a NATS server)", dir)
			}
		}
		nc, err := nats.Connect(url, nats.Name("fixpoint-report"), nats.Timeout(5*time.Second))
		if err != nil {
			return false, "", fmt.Errorf("connect to NATS at %s: %w", url, err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false, "", err
		}
		held, err := queue.HoldsBatch(ctx, js, q, batch, queueScanMax)
		return held, fmt.Sprintf("the queue (stream %s at %s)", q.Stream, url), err
	}
}

// waitLedger is what report wait reads. *store.Store satisfies it.
type waitLedger interface {
	batchLedger
	cli.SpendLedger
	Progress(ctx context.Context, batch string) (store.Progress, error)
	OwedByQueue(ctx context.Context, batch string) (int, error)
	InWaves(ctx context.Context, batch string) (int, error)
}

var _ waitLedger = (*store.Store)(nil)

// waiter is the state of one report wait between polls.
type waiter struct {
	st             waitLedger
	stdout, stderr io.Writer
	batch          string
	maxFail        float64
	timeout, grace time.Duration
	queue          queueHolds

	stuckSince time.Time // since when every queued job is unpublished, with no run recording
	// Since when no job has become final (stillDone of them), and when the
	// queue was last looked at.
	stillSince, looked time.Time
	stillDone          int
	noted              bool // the queue could not be checked, and that was said
	startDone          int
	start              time.Time
}

// wait polls the batch until it is done, then prints its verdict. Jobs
// that stop finishing are checked against the queue (queue, nil for none)
// once they have not moved for grace: published jobs whose messages the
// queue does not hold would be waited for for ever.
func wait(ctx context.Context, stdout, stderr io.Writer, st waitLedger, batch string, maxFail float64, every, timeout, grace time.Duration, queue queueHolds) error {
	if err := needBatch(ctx, st, batch); err != nil {
		return err
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	w := &waiter{st: st, stdout: stdout, stderr: stderr, batch: batch, maxFail: maxFail, timeout: timeout, grace: grace, queue: queue,
		stillDone: -1, startDone: -1, start: time.Now()}
	bar := cli.NewProgressBar(stderr, false, "wait", 0)
	for first := true; ; first = false {
		p, err := st.Progress(ctx, batch)
		if err != nil {
			return err
		}
		done := p.Total - p.Queued
		if w.startDone < 0 {
			w.startDone = done
		}
		note := fmt.Sprintf("of %d: %s", p.Total, cli.Statuses(p))
		if w.finished(p) {
			// A batch done at the first look needs no progress line.
			if !first {
				bar.Update(done, note, true)
			}
			return w.verdict(ctx, p)
		}
		if err := w.stuck(ctx, p, done); err != nil {
			bar.Update(done, note, true)
			return err
		}
		bar.Update(done, note, false)
		select {
		case <-ctx.Done():
			bar.Update(done, note, true)
			return fmt.Errorf("stopped waiting: batch %s is not done (%d of %s still queued)", batch, p.Queued, cli.Plural(p.Total, "job"))
		case <-expired:
			// Look once more: the last poll may be up to --interval old,
			// and jobs finished since (or the whole batch) count.
			if p, err = st.Progress(ctx, batch); err != nil {
				return err
			}
			done = p.Total - p.Queued
			note = fmt.Sprintf("of %d: %s", p.Total, cli.Statuses(p))
			bar.Update(done, note, true)
			if w.finished(p) {
				return w.verdict(ctx, p)
			}
			return w.timedOut(ctx, p, done)
		case <-time.After(every):
		}
	}
}

// finished reports whether the wait is over. A batch with no jobs has
// nothing to wait for. While an enqueue is recording the batch's rows more
// may come; once its runs are all killed, the batch cannot be done however
// long it waits.
func (w *waiter) finished(p store.Progress) bool {
	live := p.Recording != nil && p.Recording.Live
	return (p.Done() || p.Total == 0) && !live || p.Recording != nil && !live
}

// verdict prints the batch's verdict and returns its error.
func (w *waiter) verdict(ctx context.Context, p store.Progress) error {
	line, notes, err := cli.BatchVerdict(w.batch, p, cli.OverBudgetSpend(ctx, w.st, w.batch, p), w.maxFail)
	fmt.Fprintln(w.stdout, line)
	for _, n := range notes {
		fmt.Fprintln(w.stdout, n)
	}
	return err
}

// stuck returns an error when the batch's queued jobs cannot finish.
func (w *waiter) stuck(ctx context.Context, p store.Progress, done int) error {
	if err := w.unpublished(p); err != nil {
		return err
	}
	if done != w.stillDone {
		w.stillDone, w.stillSince = done, time.Now()
		return nil
	}
	if w.queue == nil || p.Recording != nil || p.Queued <= p.Unpublished ||
		time.Since(w.stillSince) < w.grace || time.Since(w.looked) < w.grace {
		return nil
	}
	return w.lostFromQueue(ctx)
}

// unpublished fails a batch whose queued jobs were all recorded but never
// published (their enqueue stopped in between) for grace: they run only
// once published, and waiting for them waited for ever. A requeue
// publishes what it queued a moment later, so it must hold for a while.
func (w *waiter) unpublished(p store.Progress) error {
	if p.Recording != nil || p.Queued == 0 || p.Unpublished != p.Queued {
		w.stuckSince = time.Time{}
		return nil
	}
	if w.stuckSince.IsZero() {
		w.stuckSince = time.Now()
		return nil
	}
	if time.Since(w.stuckSince) < w.grace {
		return nil
	}
	return fmt.Errorf("batch %s cannot finish: its %s %s recorded but never published (the enqueue or requeue stopped before publishing them): run enqueue --batch %s --resume",
		w.batch, cli.Plural(p.Queued, "queued job"), were(p.Queued), w.batch)
}

// lostFromQueue looks in the queue of jobs that stopped finishing, and
// fails the batch when it holds none of their messages. A queue it cannot
// look in is said once, and the wait goes on.
func (w *waiter) lostFromQueue(ctx context.Context) error {
	w.looked = time.Now()
	held, where, err := w.queue(ctx)
	switch {
	case err != nil && ctx.Err() == nil && !w.noted:
		w.noted = true
		fmt.Fprintf(w.stderr, "report: no job of batch %s has finished for %s, and its queue cannot be checked (%v); waiting on\n",
			w.batch, w.grace, err)
	case err == nil && !held:
		// Counted after the look: a job acked meanwhile is final in the
		// ledger by then (a result commits before its ack).
		owed, err := w.st.OwedByQueue(ctx, w.batch)
		if err != nil {
			return err
		}
		if owed > 0 {
			return fmt.Errorf("batch %s cannot finish: %d of its queued jobs %s published, but %s holds none of their messages (its data was lost, or they went to another queue): run enqueue --batch %s --resume to republish them",
				w.batch, owed, were(owed), where, w.batch)
		}
	}
	return nil
}

// timedOut is the error of a wait past its --timeout, saying what holds
// the batch up.
func (w *waiter) timedOut(ctx context.Context, p store.Progress, done int) error {
	batch, timeout := w.batch, w.timeout
	if p.Recording != nil && p.Recording.Live {
		return fmt.Errorf("batch %s not done after %s: an enqueue is still recording its rows (since %s); %d of %s recorded so far %s queued",
			batch, timeout, p.Recording.Since.UTC().Format(time.RFC3339), p.Queued, cli.Plural(p.Total, "job"), cli.Are(p.Queued))
	}
	if p.Unpublished > 0 {
		return fmt.Errorf("batch %s not done after %s: %d of %s still queued, %d of them never published (run enqueue --batch %s --resume)", batch, timeout, p.Queued, cli.Plural(p.Total, "job"), p.Unpublished, batch)
	}
	if n, err := w.st.InWaves(ctx, batch); err == nil && n > 0 {
		// The rest sit in provider batches a worker drives.
		return fmt.Errorf("batch %s not done after %s: %d of %s still queued, %d of them in open provider batches (waves take minutes to hours: see them in report summary %s)",
			batch, timeout, p.Queued, cli.Plural(p.Total, "job"), n, batch)
	}
	if moved := done - w.startDone; moved > 0 {
		// Workers are at it: say at what pace, not ask whether they run.
		rate := float64(moved) / time.Since(w.start).Seconds()
		return fmt.Errorf("batch %s not done after %s: %d of %s still queued; %d finished while waiting (%.1f a second: about %s more at that pace)",
			batch, timeout, p.Queued, cli.Plural(p.Total, "job"), moved, rate, (time.Duration(float64(p.Queued)/rate) * time.Second).Round(time.Second))
	}
	return fmt.Errorf("batch %s not done after %s: %d of %s still queued, none finished while waiting (are workers running on this ledger?)", batch, timeout, p.Queued, cli.Plural(p.Total, "job"))
}

// were is the past verb of n things: "was" for one, "were" for any other
// count.
func were[N ~int | ~int64](n N) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
