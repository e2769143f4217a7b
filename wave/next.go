package wave

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// next moves on the jobs still placed in an ended wave: into the next
// wave, or to the queue to finish realtime; then the wave is done.
func (v *Driver) next(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, st *llm.BatchStatus) error {
	placed, err := v.ledger.PlacedJobs(ctx, wave.ID)
	if err != nil {
		return err
	}
	again, realtime, err := v.sortPlaced(ctx, wave, st, placed)
	if err != nil {
		return err
	}
	var nw *store.Wave
	var taken []store.WaveRequest
	stopNw, driven := func() {}, false
	if len(again) > 0 {
		var err error
		nw, taken, err = v.ledger.RecordWave(context.WithoutCancel(ctx), store.WaveParams{Batch: wave.Batch, Run: wave.Run,
			Provider: wave.Provider, Model: wave.Model, Deadline: wave.Deadline, Requests: again, From: wave.ID,
			Owner: v.cfg.Owner, Lease: v.cfg.Lease, Home: wave.Home})
		if err != nil {
			return err
		}
		if nw != nil {
			// Held from its record on, as a collected wave is.
			v.take(nw.ID)
			stopNw = v.keepLease(ctx, log, nw)
			defer func() {
				stopNw()
				if !driven {
					v.drop(nw.ID)
				}
			}()
			log.InfoContext(ctx, "worker: repair wave recorded", slog.Int64("next_wave", nw.ID), slog.Int("requests", len(taken)))
			v.at("repair_recorded", nw.ID)
		}
	}
	if len(realtime) > 0 {
		if err := v.toRealtime(ctx, wave, realtime); err != nil {
			return err
		}
		log.InfoContext(ctx, "worker: jobs of the wave go on realtime", slog.Int("jobs", len(realtime)))
	}
	if err := v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveDone, NextPoll: time.Second}); err != nil {
		return err
	}
	v.w.WaveStep(wave.Provider, "done")
	if nw != nil {
		stopNw()
		driven = true
		// This step, the collect, ends here: the repair wave's submit is
		// a step of its own, and its time is not the collect's.
		trace.SpanFromContext(ctx).End()
		v.drive(ctx, nw, taken)
	}
	return nil
}

// sortPlaced sorts the jobs still placed in an ended wave: again those
// that go into the next wave, each with its next request, and realtime
// those that go back to the queue to finish realtime.
func (v *Driver) sortPlaced(ctx context.Context, wave *store.Wave, st *llm.BatchStatus, placed []store.WaveRequest) (again, realtime []store.WaveRequest, err error) {
	if len(placed) == 0 {
		return nil, nil, nil
	}
	rows, err := v.ledger.WaveAttempts(ctx, wave.ID)
	if err != nil {
		return nil, nil, err
	}
	now := v.clock.Now()
	took := now.Sub(cmp.Or(wave.SubmittedAt, wave.CreatedAt))
	if st != nil && !st.EndedAt.IsZero() && !wave.SubmittedAt.IsZero() {
		took = st.EndedAt.Sub(wave.SubmittedAt)
	}
	// A job with a request of the wave not recorded (its outcome could not
	// be fed) goes on realtime: its next attempts would take that
	// request's number, which has its place in this wave.
	unrecorded := map[string]bool{}
	for _, p := range placed {
		unrecorded[p.JobID] = unrecorded[p.JobID] || !p.Recorded
	}
	deadline := time.Time{}
	for _, p := range oneEach(placed) {
		env, err := queue.DecodeEnvelope(p.Envelope)
		if err != nil || unrecorded[p.JobID] {
			realtime = append(realtime, p)
			continue
		}
		deadline = env.DeadlineTime()
		if rs, ok := v.nextRequests(ctx, p, rows[p.JobID]); ok {
			again = append(again, rs...)
		} else {
			realtime = append(realtime, p)
		}
	}
	// A wave that cannot end before the deadline is not started (one
	// more wave is taken to last twice as long as this one did), nor a
	// wave too small to be worth its wait.
	late := !deadline.IsZero() && now.Add(2*took+v.cfg.DeadlineMargin).After(deadline)
	if late || wave.Error == waveDeadlineCancel || (v.cfg.RealtimeBelow > 0 && len(oneEach(again)) < v.cfg.RealtimeBelow) {
		realtime, again = append(realtime, again...), nil
	}
	return again, realtime, nil
}

// nextRequests are the requests of a placed job's next attempts (one, or
// a document job's several), from the attempts the ledger has of its run
// (rows); false when the job goes on realtime: it cannot be rebuilt, has
// no attempt left to make, or got no reply in waveNoReplyMax waves.
func (v *Driver) nextRequests(ctx context.Context, p store.WaveRequest, rows []store.Attempt) ([]store.WaveRequest, bool) {
	noReply := map[int64]bool{}
	for _, a := range rows {
		if a.WaveID != 0 && a.Class == fixpoint.OutcomeProvider {
			noReply[a.WaveID] = true
		}
	}
	if len(noReply) >= waveNoReplyMax {
		return nil, false
	}
	env, job, err := v.jobOf(ctx, p)
	if err != nil {
		return nil, false
	}
	if job.Limits.Strategy.Document() {
		return v.nextDocument(p, env, job, rows)
	}
	r := p
	r.AttemptNo = len(rows) + 1
	j, err := v.rebuild(r, env, job, rows, fixpoint.PriceBasisBatch)
	if err != nil || j == nil {
		return nil, false
	}
	b, err := json.Marshal(j.step.Next().Request)
	if err != nil {
		return nil, false
	}
	r.Request = b
	return []store.WaveRequest{r}, true
}

// oneEach is placed with one request per job: the ledger lists a job once
// for each of its requests in the wave.
func oneEach(placed []store.WaveRequest) []store.WaveRequest {
	seen := map[string]bool{}
	var out []store.WaveRequest
	for _, p := range placed {
		if !seen[p.JobID] {
			seen[p.JobID] = true
			out = append(out, p)
		}
	}
	return out
}

// toRealtime hands jobs placed in the wave to the queue, to finish
// realtime from the attempts the ledger holds, then ends their place in
// the wave. placed nil means every job still placed there.
func (v *Driver) toRealtime(ctx context.Context, wave *store.Wave, placed []store.WaveRequest) error {
	if placed == nil {
		var err error
		if placed, err = v.ledger.PlacedJobs(ctx, wave.ID); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(placed))
	for _, p := range oneEach(placed) {
		env, err := queue.DecodeEnvelope(p.Envelope)
		if err != nil {
			return fmt.Errorf("job %s of wave %d: %w", p.JobID, wave.ID, err)
		}
		env.FromWave = wave.ID
		if err := queue.PublishFromWave(ctx, v.js, v.queue, env); err != nil {
			return err
		}
		ids = append(ids, p.JobID)
	}
	v.at("published", wave.ID)
	if len(ids) == 0 {
		return nil
	}
	return v.ledger.ReleaseWaveJobs(ctx, wave.ID, ids)
}
