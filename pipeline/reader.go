package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/fixpoint-dev/fixpoint/store"
)

// statusReader batches the skip-if-done lookups of many jobs into one ledger
// query, as the writer batches their results: when a thousand calls finish
// together, the next thousand jobs cost a few queries, not a thousand.
type statusReader struct {
	ledger   Ledger
	max      int
	interval time.Duration

	in        chan statusReq
	closeOnce sync.Once
	queries   *pool.Pool
}

type statusReq struct {
	id   string
	done chan statusResp
}

type statusResp struct {
	final bool
	err   error
}

func newStatusReader(l Ledger, max int, interval time.Duration) *statusReader {
	return &statusReader{ledger: l, max: max, interval: interval, in: make(chan statusReq, max),
		queries: pool.New().WithMaxGoroutines(2)}
}

// final reports whether the ledger holds a final row for job id.
func (r *statusReader) final(ctx context.Context, id string) (final bool, err error) {
	defer func() {
		if recover() != nil {
			final, err = false, errWriterClosed
		}
	}()
	req := statusReq{id: id, done: make(chan statusResp, 1)}
	select {
	case r.in <- req:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case resp := <-req.done:
		return resp.final, resp.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (r *statusReader) close() { r.closeOnce.Do(func() { close(r.in) }) }

func (r *statusReader) run() {
	defer r.queries.Wait()
	batchLoop(r.in, r.max, r.interval, func(reqs []statusReq) {
		r.queries.Go(func() { r.query(reqs) })
	})
}

func (r *statusReader) query(reqs []statusReq) {
	ids := make([]string, len(reqs))
	for i, q := range reqs {
		ids[i] = q.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	statuses, err := r.ledger.Statuses(ctx, ids)
	cancel()
	for _, q := range reqs {
		st, ok := statuses[q.id]
		q.done <- statusResp{final: ok && store.IsFinal(st), err: err}
	}
}
