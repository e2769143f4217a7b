package wave

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// resultTally counts a wave's results as the ledger's wave counts do:
// succeeded, errored, expired, cancelled.
type resultTally [4]int

func (t *resultTally) add(err error) {
	var perr *fixpoint.ProviderError
	switch {
	case err == nil:
		t[0]++
	case errors.As(err, &perr) && perr.Class == fixpoint.ClassExpired:
		t[2]++
	case errors.As(err, &perr) && perr.Class == fixpoint.ClassCancelled:
		t[3]++
	default:
		t[1]++
	}
}

// waveJob is a job of a wave being processed: its repair step rebuilt
// from the ledger, up to the request the wave carried.
type waveJob struct {
	req  store.WaveRequest
	env  *queue.Envelope
	step *repair.Step
	// prev is how many attempts the ledger had before this wave's.
	prev int
}

// process records an ended wave's results and moves its jobs on: final,
// into the next wave, or back to the queue to finish realtime. st is the
// provider batch as retrieved (nil: retrieve it).
func (v *Driver) process(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, st *llm.BatchStatus) error {
	if st == nil {
		s, err := client.RetrieveBatch(ctx, wave.ProviderBatchID)
		if err != nil {
			return fmt.Errorf("retrieve: %w", err)
		}
		st = &s
	}
	rs, err := v.startResults(ctx, log, wave)
	if err != nil {
		return err
	}
	v.at("download", wave.ID)
	if err := rs.download(ctx, client, *st); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := rs.unanswered(ctx, st.State); err != nil {
		return err
	}
	if err := rs.flush(ctx); err != nil {
		return err
	}
	// The provider's counts do not tell cancelled requests apart (OpenAI
	// counts them failed): the results do.
	counts := [4]int(rs.tally)
	if err := v.setWave(ctx, wave, store.WaveUpdate{Counts: &counts, Lease: v.cfg.Lease}); err != nil {
		return err
	}
	rs.traced.trace(ctx)
	log.InfoContext(ctx, "worker: wave results recorded", slog.Int("succeeded", counts[0]), slog.Int("errored", counts[1]),
		slog.Int("expired", counts[2]), slog.Int("cancelled", counts[3]))
	v.at("recorded_results", wave.ID)
	return v.next(ctx, log, client, wave, st)
}

// waveResults records the results of an ended wave as they are read, in
// chunks of waveOutcomesChunk outcomes.
type waveResults struct {
	v    *Driver
	log  *slog.Logger
	wave *store.Wave
	reqs []store.WaveRequest
	byID map[string]store.WaveRequest // by custom ID
	// prev holds the attempts the ledger has of the wave's jobs, by job.
	prev    map[string][]store.Attempt
	started time.Time
	seen    map[string]bool // custom IDs with an outcome
	// open counts each job's requests in the wave with no outcome
	// recorded; held are the outcomes taken of a job until all its open
	// requests have one (a document job's are fed together).
	open  map[string]int
	held  map[string][]heldOutcome
	tally resultTally
	// traced sums the outcomes recorded for the collect's span.
	traced collectTally
	outs   []store.WaveOutcome // not yet recorded
}

// startResults reads what recording a wave's results needs from the
// ledger: its requests and the attempts of its jobs.
func (v *Driver) startResults(ctx context.Context, log *slog.Logger, wave *store.Wave) (*waveResults, error) {
	reqs, err := v.ledger.WaveRequests(ctx, wave.ID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.WaveRequest, len(reqs))
	for _, r := range reqs {
		byID[r.CustomID] = r
	}
	prev, err := v.ledger.WaveAttempts(ctx, wave.ID)
	if err != nil {
		return nil, err
	}
	open := map[string]int{}
	for _, r := range reqs {
		if !r.Recorded {
			open[r.JobID]++
		}
	}
	return &waveResults{v: v, log: log, wave: wave, reqs: reqs, byID: byID, prev: prev, open: open, held: map[string][]heldOutcome{},
		started: cmp.Or(wave.SubmittedAt, wave.CreatedAt), seen: map[string]bool{}}, nil
}

// download reads the provider batch's results and records the outcome of
// each request of the wave.
func (rs *waveResults) download(ctx context.Context, client BatchClient, st llm.BatchStatus) error {
	return client.BatchResults(ctx, st, func(id string) (fixpoint.Request, bool) {
		r, ok := rs.byID[id]
		if !ok {
			return fixpoint.Request{}, false
		}
		var req fixpoint.Request
		if json.Unmarshal(r.Request, &req) != nil {
			return fixpoint.Request{}, false
		}
		return req, true
	}, func(br llm.BatchResult) error {
		r, ok := rs.byID[br.CustomID]
		if !ok || rs.seen[br.CustomID] {
			rs.log.WarnContext(ctx, "worker: wave result for a request the wave does not have", slog.String("custom_id", textclip.Bytes(br.CustomID, 80)))
			return nil
		}
		var callErr error
		if br.Err != nil {
			callErr = br.Err
		}
		rs.tally.add(callErr)
		return rs.outcome(ctx, r, br.Response, callErr)
	})
}

// unanswered records the requests with no result line as failed: they
// never ran. state is the provider batch's.
func (rs *waveResults) unanswered(ctx context.Context, state llm.BatchState) error {
	class, why := fixpoint.ClassExpired, "the provider batch ended without a result for this request"
	if state == llm.BatchCancelled {
		class = fixpoint.ClassCancelled
	}
	for _, r := range rs.reqs {
		if !rs.seen[r.CustomID] {
			missing := &fixpoint.ProviderError{Class: class, Code: "missing_result", Message: why}
			rs.tally.add(missing)
			if err := rs.outcome(ctx, r, nil, missing); err != nil {
				return err
			}
		}
	}
	return nil
}

// outcome takes a request's reply (or failure) and, once the outcomes of
// all its job's requests in the wave are in, feeds them to the job's
// repair step or Machine and queues their attempts, and the result when
// the job is done, for the ledger.
func (rs *waveResults) outcome(ctx context.Context, r store.WaveRequest, resp *fixpoint.Response, callErr error) error {
	rs.seen[r.CustomID] = true
	if r.Recorded {
		return nil
	}
	held := append(rs.held[r.JobID], heldOutcome{req: r, resp: resp, err: callErr})
	if len(held) < rs.open[r.JobID] {
		rs.held[r.JobID] = held
		return nil
	}
	delete(rs.held, r.JobID)
	env, job, err := rs.v.jobOf(ctx, r)
	switch {
	case err != nil:
		rs.log.ErrorContext(ctx, "worker: wave result of a job that cannot be rebuilt", slog.String("job_id", r.JobID), slog.String("error", err.Error()))
		return nil // it stays placed; the next pass hands it to the queue
	case job.Limits.Strategy.Document():
		err = rs.feedDocument(ctx, env, job, held)
	default:
		err = rs.feedStep(ctx, env, job, held[0])
	}
	if err == nil && len(rs.outs) >= waveOutcomesChunk {
		err = rs.flush(ctx)
	}
	return err
}

// feedStep feeds a request's outcome to its job's repair step rebuilt
// from the ledger and queues the attempt, and the result when the job is
// done.
func (rs *waveResults) feedStep(ctx context.Context, env *queue.Envelope, job *repair.Job, h heldOutcome) error {
	j, err := rs.v.rebuild(h.req, env, job, rs.prev[h.req.JobID], fixpoint.PriceBasisBatch)
	if err != nil {
		rs.log.ErrorContext(ctx, "worker: wave result of a job that cannot be rebuilt", slog.String("job_id", h.req.JobID), slog.String("error", err.Error()))
		return nil // it stays placed; the next pass hands it to the queue
	}
	if j == nil {
		return nil // its attempt is recorded already
	}
	a, act := j.step.Feed(h.resp, h.err, rs.started)
	rs.traced.add(a, h.err)
	o := store.WaveOutcome{WaveID: rs.wave.ID, CustomID: h.req.CustomID, Attempt: ledgerrow.Attempt(a)}
	res := ledgerrow.Result(j.step.Result(), j.env, 0)
	if act.Done() {
		o.Result = &res
	} else {
		o.Totals = &res
	}
	rs.outs = append(rs.outs, o)
	return nil
}

// flush records the outcomes queued and renews the wave's lease.
func (rs *waveResults) flush(ctx context.Context) error {
	if len(rs.outs) == 0 {
		return nil
	}
	v := rs.v
	_, err := v.ledger.RecordWaveOutcomes(context.WithoutCancel(ctx), rs.outs)
	if store.IsRefused(err) {
		var recorded []store.WaveOutcome
		recorded, err = rs.recordEach(context.WithoutCancel(ctx))
		v.w.Observe(recorded)
	} else if err == nil {
		v.w.Observe(rs.outs)
	}
	if err != nil {
		return err
	}
	rs.outs = rs.outs[:0]
	v.at("outcomes", rs.wave.ID)
	return v.setWave(ctx, rs.wave, store.WaveUpdate{Lease: v.cfg.Lease})
}

// recordEach records the outcomes queued one by one, after the ledger
// refused them together: one it refuses for its data is recorded as it
// can take it (store.WaveOutcome.Salvage), its attempt with its text,
// then with its counts only, its job failed naming the refusal. Its reply
// was paid for and must leave a row; and writing the same data again
// cannot succeed, so returning the refusal would process the wave again at
// every poll, none of the chunk's outcomes ever recorded. It returns the
// outcomes recorded, and the first refusal even the counts met (the others
// are recorded; the wave is processed again later) or the first error
// that is no refusal.
func (rs *waveResults) recordEach(ctx context.Context) ([]store.WaveOutcome, error) {
	var recorded []store.WaveOutcome
	var first error
	for i := range rs.outs {
		one := rs.outs[i : i+1]
		_, err := rs.v.ledger.RecordWaveOutcomes(ctx, one)
		if refusal := err; store.IsRefused(refusal) {
			rs.log.ErrorContext(ctx, "worker: ledger refused a wave outcome: recording its call without what it refused, the job failed",
				slog.String("job_id", rs.byID[one[0].CustomID].JobID), slog.String("custom_id", one[0].CustomID), slog.String("error", refusal.Error()))
			o := one[0]
			for _, bare := range []bool{false, true} {
				one[0] = o.Salvage(refusal, bare)
				if bare {
					one[0].Also = nil // a merge's conflicts may be what it refused
				}
				if _, err = rs.v.ledger.RecordWaveOutcomes(ctx, one); !store.IsRefused(err) {
					break
				}
			}
		}
		switch {
		case err == nil:
			recorded = append(recorded, one[0])
		case !store.IsRefused(err):
			return recorded, err // the ledger is down: so it is for the rest
		default:
			rs.log.ErrorContext(ctx, "worker: ledger refused a wave outcome, even with its counts only", slog.String("custom_id", one[0].CustomID),
				slog.String("error", err.Error()))
			first = cmp.Or(first, err)
		}
	}
	return recorded, first
}

// jobOf is the message and the job of a wave request.
func (v *Driver) jobOf(ctx context.Context, r store.WaveRequest) (*queue.Envelope, *repair.Job, error) {
	env, err := queue.DecodeEnvelope(r.Envelope)
	if err != nil {
		return nil, nil, err
	}
	job, err := v.w.Job(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	return env, job, nil
}

// rebuild starts the repair step of a wave request's job from the
// attempts the ledger has before it. nil, nil: the request's attempt is
// recorded already.
func (v *Driver) rebuild(r store.WaveRequest, env *queue.Envelope, job *repair.Job, rows []store.Attempt, basis fixpoint.PriceBasis) (*waveJob, error) {
	var before []store.Attempt
	for _, a := range rows {
		if a.No < r.AttemptNo {
			before = append(before, a)
		} else {
			return nil, nil
		}
	}
	prev := ledgerrow.ResultFrom(r.JobID, before)
	step, err := repair.Start(job, prev, v.w.StepConfig(env.Provider, basis))
	if err != nil {
		return nil, err
	}
	if act := step.Next(); act.Request == nil {
		return nil, fmt.Errorf("job %s has no attempt %d to make", r.JobID, r.AttemptNo)
	}
	return &waveJob{req: r, env: env, step: step, prev: len(before)}, nil
}
