package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/semaphore"

	"github.com/fixpoint-dev/fixpoint/store"
)

// FlushParallelDefault is how many ledger transactions may be committing at
// once.
const FlushParallelDefault = 2

// writer batches final results from many jobs into one ledger transaction.
// Each result's callback runs after the transaction holding it has committed
// (or failed), so a message is acked only after its rows exist, while the
// job's pool slot is already free for the next job.
type writer struct {
	ledger   Ledger
	max      int
	interval time.Duration
	metrics  *Metrics

	in        chan writeReq
	budget    int64               // bytes of results that may wait for their commit
	pending   *semaphore.Weighted // holds each waiting result's bytes
	closeOnce sync.Once
	flushers  *pool.Pool // committing batches, at most FlushParallelDefault
	callbacks *pool.Pool // acks after a commit, run in parallel
}

type writeReq struct {
	r store.Result
	// done gets whether r won (its job was still queued in its run, so
	// its rows are the job's) and the error that kept it from being
	// written.
	done func(won bool, err error)
	size int64 // bytes held in the writer's budget
}

var errWriterClosed = errors.New("ledger writer closed")

// newWriter returns a writer committing up to max results a transaction.
// At most queue results, and budget bytes of results, wait while batches
// commit; beyond either submit blocks and holds the job's slot:
// back-pressure on pulling, and memory bounded by the worker's settings,
// never by the batch's size or by how long the ledger stalls.
func newWriter(l Ledger, max, queue int, budget int64, interval time.Duration, m *Metrics) *writer {
	return &writer{
		ledger: l, max: max, interval: interval, metrics: m,
		budget:    budget,
		pending:   semaphore.NewWeighted(budget),
		in:        make(chan writeReq, queue),
		flushers:  pool.New().WithMaxGoroutines(FlushParallelDefault),
		callbacks: pool.New().WithMaxGoroutines(64),
	}
}

// submit queues r; done is called once, after the commit (nil; won says
// whether r became its job's result or lost to the ledger's row) or with
// the error that kept r from being written. done must not panic.
//
// submit waits while the results already waiting hold the whole budget; a
// result larger than the budget waits until it is alone.
func (w *writer) submit(r store.Result, done func(won bool, err error)) {
	size := min(resultBytes(&r), w.budget)
	_ = w.pending.Acquire(context.Background(), size) // fails only on a done context
	w.metrics.pendingBytes(size)
	defer func() {
		if recover() != nil {
			w.release(size)
			done(false, errWriterClosed)
		}
	}()
	w.in <- writeReq{r: r, done: done, size: size}
}

func (w *writer) release(size int64) {
	w.pending.Release(size)
	w.metrics.pendingBytes(-size)
}

// resultBytes estimates the memory a result holds while it waits: its
// variable-length fields plus a fixed allowance per result and attempt
// for the structs, the message and the callback around them.
func resultBytes(r *store.Result) int64 {
	n := 1024 + len(r.JobID) + len(r.Value) + len(r.Error)
	if j := r.Job; j != nil {
		n += len(j.Prompt) + len(j.Metadata)
	}
	for i := range r.AttemptRows {
		a := &r.AttemptRows[i]
		n += 256 + len(a.Request) + len(a.RequestHash) + len(a.Raw) + len(a.Repairs) + len(a.Errors) +
			len(a.RetryClasses) + len(a.ProviderError) + len(a.RequestID)
	}
	return int64(n)
}

// save queues r and waits for its commit.
func (w *writer) save(r store.Result) error {
	_, err := w.write(r)
	return err
}

// write queues r and waits for its commit; won is submit's.
func (w *writer) write(r store.Result) (won bool, err error) {
	type done struct {
		won bool
		err error
	}
	ch := make(chan done, 1)
	w.submit(r, func(won bool, err error) { ch <- done{won, err} })
	d := <-ch
	return d.won, d.err
}

// close stops the writer once everything queued has been written and every
// callback has run.
func (w *writer) close() { w.closeOnce.Do(func() { close(w.in) }) }

func (w *writer) run() {
	defer func() {
		w.flushers.Wait()
		w.callbacks.Wait()
	}()
	batchLoop(w.in, w.max, w.interval, func(reqs []writeReq) {
		w.flushers.Go(func() { w.commit(reqs) })
	})
}

// batchLoop reads items from in into batches of at most max and hands each
// batch to flush when it is full or its first item has waited interval. It
// returns once in is closed and what it held has been handed over. Each
// batch is a new slice that flush may keep.
func batchLoop[T any](in <-chan T, max int, interval time.Duration, flush func([]T)) {
	var batch []T
	timer := time.NewTimer(interval)
	timer.Stop()
	send := func() {
		if len(batch) > 0 {
			flush(batch)
			batch = nil
		}
	}
	for {
		select {
		case item, ok := <-in:
			if !ok {
				timer.Stop()
				send()
				return
			}
			if len(batch) == 0 {
				timer.Reset(interval)
			}
			batch = append(batch, item)
			if len(batch) >= max {
				timer.Stop()
				send()
			}
		case <-timer.C:
			send()
		}
	}
}

// commit writes one batch. The store retries transient errors itself; what
// comes back here goes to each job, whose message is then negatively
// acknowledged.
func (w *writer) commit(reqs []writeReq) {
	rs := make([]store.Result, len(reqs))
	for i, q := range reqs {
		rs[i] = q.r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	won, err := w.ledger.SaveResults(ctx, rs)
	errs := make([]error, len(reqs))
	if len(won) != len(rs) {
		won = make([]bool, len(rs))
	}
	if err != nil && len(rs) > 1 && store.IsRefused(err) {
		// One result the ledger refuses must not hold back the others
		// committed with it: save each alone, and only the refused ones
		// get the error.
		for i := range rs {
			var one []bool
			one, errs[i] = w.ledger.SaveResults(ctx, rs[i:i+1])
			won[i] = len(one) == 1 && one[0]
		}
	} else {
		for i := range errs {
			errs[i] = err
		}
	}
	cancel()
	var size int64
	for i := range reqs {
		size += reqs[i].size
	}
	w.release(size)
	if w.metrics != nil {
		w.metrics.WriteBatches.Observe(float64(len(reqs)))
	}
	for i, q := range reqs {
		done, won, err := q.done, won[i] && errs[i] == nil, errs[i]
		w.callbacks.Go(func() { done(won, err) })
	}
}
