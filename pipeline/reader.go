package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/sourcegraph/conc"
)

// statusReader batches the skip-if-done lookups of many jobs into one ledger
// query, as the writer batches their results: when a thousand calls finish
// together, the next thousand jobs cost a few queries, not a thousand.
type statusReader struct {
	ledger Ledger
	max    int

	in        chan statusReq
	closeOnce sync.Once
}

type statusReq struct {
	id   string
	done chan statusResp
}

type statusResp struct {
	state jobState
	err   error
}

// jobState is what the ledger says of a job when a worker picks it up.
type jobState struct {
	// known reports that the ledger has a row for the job; a job it never
	// recorded was enqueued into another ledger.
	known bool
	// final reports that the row is final: the job is done.
	final bool
	// run is the batch run the job is in.
	run int
	// wave is the wave holding the job's next attempt, 0 when none.
	wave int64
	// attempts counts the attempts the job's waves recorded in this run
	// before handing it on to run realtime.
	attempts int
	// cancelled reports that enqueue cancel ended the job.
	cancelled bool
}

// statusQueriesMax is how many status queries may run at once.
const statusQueriesMax = 2

func newStatusReader(l Ledger, max int) *statusReader {
	return &statusReader{ledger: l, max: max, in: make(chan statusReq, max)}
}

// state reports whether the ledger holds a row for job id and whether it
// is final.
func (r *statusReader) state(ctx context.Context, id string) (st jobState, err error) {
	defer func() {
		if recover() != nil {
			st, err = jobState{}, errWriterClosed
		}
	}()
	req := statusReq{id: id, done: make(chan statusResp, 1)}
	select {
	case r.in <- req:
	case <-ctx.Done():
		return jobState{}, ctx.Err()
	}
	select {
	case resp := <-req.done:
		return resp.state, resp.err
	case <-ctx.Done():
		return jobState{}, ctx.Err()
	}
}

func (r *statusReader) close() { r.closeOnce.Do(func() { close(r.in) }) }

func (r *statusReader) run() { groupLoop(r.in, r.max, statusQueriesMax, r.query) }

// groupLoop hands items from in to flush in batches of at most max, with at
// most parallel flushes running, until in is closed and every flush has
// returned. A batch goes as soon as a flush slot is free, with no timer: a
// lone item waits for nothing, and under load the items that arrive while
// every slot is busy make up the next batch (as a database groups commits).
func groupLoop[T any](in <-chan T, max, parallel int, flush func([]T)) {
	slots := make(chan struct{}, parallel)
	var wg conc.WaitGroup
	defer wg.Wait()
	for item := range in {
		slots <- struct{}{} // items keep arriving in in while this waits
		batch := []T{item}
	more:
		for len(batch) < max {
			select {
			case it, ok := <-in:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		wg.Go(func() {
			defer func() { <-slots }()
			flush(batch)
		})
	}
}

func (r *statusReader) query(reqs []statusReq) {
	ids := make([]string, len(reqs))
	for i, q := range reqs {
		ids[i] = q.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	states, err := r.ledger.JobStates(ctx, ids)
	cancel()
	for _, q := range reqs {
		st, ok := states[q.id]
		q.done <- statusResp{state: jobState{known: ok, final: ok && st.Status.Final(), run: st.Run, wave: st.Wave, attempts: st.Attempts,
			cancelled: st.Status == fixpoint.StatusCancelled}, err: err}
	}
}
