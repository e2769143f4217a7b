package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// writer batches final results from many jobs into one ledger transaction.
// Each caller of save blocks until the transaction holding its result has
// committed (or failed), so a message is acked only after its rows exist.
type writer struct {
	ledger   Ledger
	max      int
	interval time.Duration
	metrics  *Metrics

	in        chan writeReq
	closeOnce sync.Once
}

type writeReq struct {
	r    store.Result
	done chan error
}

var errWriterClosed = errors.New("ledger writer closed")

func newWriter(l Ledger, max int, interval time.Duration, m *Metrics) *writer {
	return &writer{ledger: l, max: max, interval: interval, metrics: m, in: make(chan writeReq, max)}
}

// save queues r and waits for its commit.
func (w *writer) save(r store.Result) (err error) {
	defer func() {
		if recover() != nil {
			err = errWriterClosed
		}
	}()
	req := writeReq{r: r, done: make(chan error, 1)}
	w.in <- req
	return <-req.done
}

// close stops the writer once everything queued has been written.
func (w *writer) close() { w.closeOnce.Do(func() { close(w.in) }) }

func (w *writer) run() {
	var batch []writeReq
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(batch) == 0 {
			return
		}
		rs := make([]store.Result, len(batch))
		for i, q := range batch {
			rs[i] = q.r
		}
		// The store retries transient errors itself; what comes back here
		// goes to each job, whose message is then negatively acknowledged.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := w.ledger.SaveResults(ctx, rs)
		cancel()
		if w.metrics != nil {
			w.metrics.WriteBatches.Observe(float64(len(batch)))
		}
		for _, q := range batch {
			q.done <- err
		}
		batch = batch[:0]
	}
	for {
		select {
		case q, ok := <-w.in:
			if !ok {
				flush()
				return
			}
			if len(batch) == 0 {
				timer.Reset(w.interval)
			}
			batch = append(batch, q)
			if len(batch) >= w.max {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}
