package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Timeline is how a batch went over time, for the batch page's plots: its
// finished jobs over time, the latency of its realtime calls, and its
// waves (provider batches).
type Timeline struct {
	// Progress is the count of finished jobs at the end of each step of
	// time, cumulative, from the first job's finish (a point with none)
	// to the last's; Step is the width of a step. Empty before any job
	// finished.
	Progress []ProgressPoint
	Step     time.Duration
	// Latency is the realtime calls (attempts with price basis realtime)
	// by latency, in buckets that double: bucket i holds the calls that
	// took under UpToMs, and at least the previous bucket's UpToMs; the
	// first under 1 ms. Every realtime call the cost table counts is in
	// one.
	Latency []LatencyBucket
	// P50, P90 and P99 are latency percentiles of those calls in
	// milliseconds; Calls how many there were.
	P50, P90, P99 float64
	Calls         int64
	// Waves are the batch's provider batches in the order made.
	Waves []WaveSpan
	// Sample is 1 when every job was read; n when a batch too large to
	// read whole within a page's time was sampled, one job in n by row
	// number, Progress counts scaled by n. LatencySample is the same for
	// Latency and Calls (a sparser sample), the percentiles those of it.
	Sample, LatencySample int
}

// ProgressPoint is the cumulative count of finished jobs by status at At.
type ProgressPoint struct {
	At                            time.Time
	Valid, Invalid, Failed, Other int64
}

// LatencyBucket counts the calls that took under UpToMs milliseconds (and
// at least half of it, but for the first bucket).
type LatencyBucket struct {
	UpToMs int64
	Calls  int64
}

// WaveSpan is one wave: when it was made, submitted and ended, and what
// became of its requests.
type WaveSpan struct {
	ID                                               int64
	Run, Number                                      int
	Status                                           string
	Created                                          time.Time
	Submitted, Ended                                 time.Time // zero: not yet
	Requests, Succeeded, Errored, Expired, Cancelled int64
	// TokensIn, TokensOut and CostUSD are the wave's recorded calls'
	// totals; ValidReplies counts those whose reply was valid.
	TokensIn, TokensOut, ValidReplies int64
	CostUSD                           float64
}

// CostPerValid is CostUSD / ValidReplies, 0 when no reply was valid.
func (w WaveSpan) CostPerValid() float64 {
	if w.ValidReplies == 0 {
		return 0
	}
	return w.CostUSD / float64(w.ValidReplies)
}

// timelineSteps is how many steps of time the progress plot has at most.
const timelineSteps = 120

// timelineWaves bounds the waves a plot shows (a batch has a few).
const timelineWaves = 500

// timelineJobs is how many jobs the progress plot reads at most: a larger
// batch is sampled, and the latency plot reads a quarter of that sample
// (each job's calls are looked up one by one). Read whole, a million jobs
// and their calls did not fit the dashboard's query timeout.
const timelineJobs = 20_000

// latencySample is how many times sparser the latency plot's sample is.
const latencySample = 4

// BatchTimeline returns the plots' data of batch.
func (s *Store) BatchTimeline(ctx context.Context, batch string) (Timeline, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	t := Timeline{Sample: 1, LatencySample: 1}
	var jobs int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(jobs), 0) FROM batch_rollups WHERE batch = $1`, batch).Scan(&jobs); err != nil {
		return Timeline{}, fmt.Errorf("timeline of %s: %w", batch, err)
	}
	limit := int64(timelineJobs)
	if s.timelineJobs > 0 {
		limit = s.timelineJobs
	}
	if jobs > limit {
		t.Sample = int((jobs + limit - 1) / limit)
	}
	if l := max(limit/latencySample, 1); jobs > l {
		t.LatencySample = int((jobs + l - 1) / l)
	}
	if err := s.progressOverTime(ctx, batch, &t); err != nil {
		return Timeline{}, fmt.Errorf("progress of %s: %w", batch, err)
	}
	if err := s.latencies(ctx, batch, &t); err != nil {
		return Timeline{}, fmt.Errorf("latency of %s: %w", batch, err)
	}
	if err := s.waveSpans(ctx, batch, &t); err != nil {
		return Timeline{}, fmt.Errorf("waves of %s: %w", batch, err)
	}
	return t, nil
}

// progressOverTime bins the finished jobs into at most timelineSteps steps
// of a whole number of seconds and sums them up.
func (s *Store) progressOverTime(ctx context.Context, batch string, t *Timeline) error {
	var first, last *time.Time
	err := s.pool.QueryRow(ctx, `SELECT min(finished_at), max(finished_at) FROM jobs
		WHERE batch = $1 AND status <> 'queued' AND finished_at IS NOT NULL`, batch).Scan(&first, &last)
	if err != nil || first == nil {
		return err
	}
	step := max(last.Sub(*first)/timelineSteps, time.Second).Truncate(time.Second)
	if last.Sub(*first)/step >= timelineSteps {
		step += time.Second
	}
	t.Step = step
	rows, err := s.pool.Query(ctx, `
		SELECT floor(extract(epoch FROM finished_at - $2) / $3)::bigint AS i,
		       count(*) FILTER (WHERE status = 'valid'),
		       count(*) FILTER (WHERE status = 'invalid'),
		       count(*) FILTER (WHERE status = 'failed'),
		       count(*) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed'))
		FROM jobs WHERE batch = $1 AND status <> 'queued' AND finished_at IS NOT NULL AND row_no % $5 = 0
		GROUP BY 1 ORDER BY 1 LIMIT $4`, batch, *first, step.Seconds(), timelineSteps+1, t.Sample)
	if err != nil {
		return err
	}
	var i int64
	var p ProgressPoint
	var valid, invalid, failed, other int64
	// The first point is the origin (none finished), so that a batch that
	// finished within one step still draws a line.
	points := make([]ProgressPoint, 1, timelineSteps+2)
	points[0].At = *first
	_, err = pgx.ForEachRow(rows, []any{&i, &valid, &invalid, &failed, &other}, func() error {
		for int64(len(points)) <= i {
			points = append(points, pointAt(p, *first, step, len(points)-1))
		}
		k := int64(t.Sample)
		p.Valid, p.Invalid, p.Failed, p.Other = p.Valid+k*valid, p.Invalid+k*invalid, p.Failed+k*failed, p.Other+k*other
		points = append(points, pointAt(p, *first, step, len(points)-1))
		return nil
	})
	t.Progress = points
	return err
}

// pointAt is p at the end of step i after first.
func pointAt(p ProgressPoint, first time.Time, step time.Duration, i int) ProgressPoint {
	p.At = first.Add(time.Duration(i+1) * step)
	return p
}

// latencies buckets the batch's realtime calls by latency, doubling.
func (s *Store) latencies(ctx context.Context, batch string, t *Timeline) error {
	var p50, p90, p99 *float64
	err := s.pool.QueryRow(ctx, `
		SELECT count(*),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.latency_ms),
		       percentile_cont(0.9) WITHIN GROUP (ORDER BY a.latency_ms),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY a.latency_ms)
		FROM attempts a JOIN jobs j ON j.id = a.job_id
		WHERE j.batch = $1 AND j.row_no % $2 = 0 AND a.price_basis = 'realtime'`, batch, t.LatencySample).Scan(&t.Calls, &p50, &p90, &p99)
	if err != nil || t.Calls == 0 {
		return err
	}
	t.P50, t.P90, t.P99 = *p50, *p90, *p99
	t.Calls *= int64(t.LatencySample)
	// Bucket i holds latencies in [2^(i-1), 2^i) ms, bucket 0 those under
	// 1 ms (0 ms: a reply from a cache or a local simulator), so that every
	// call the cost table counts is in one.
	rows, err := s.pool.Query(ctx, `
		SELECT CASE WHEN a.latency_ms < 1 THEN 0 ELSE floor(log(2, a.latency_ms))::int + 1 END AS i, count(*)
		FROM attempts a JOIN jobs j ON j.id = a.job_id
		WHERE j.batch = $1 AND j.row_no % $2 = 0 AND a.price_basis = 'realtime'
		GROUP BY 1 ORDER BY 1 LIMIT 64`, batch, t.LatencySample)
	if err != nil {
		return err
	}
	var i int
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		t.Latency = append(t.Latency, LatencyBucket{UpToMs: int64(1) << i, Calls: n * int64(t.LatencySample)})
		return nil
	})
	return err
}

// waveSpans lists the batch's waves.
func (s *Store) waveSpans(ctx context.Context, batch string, t *Timeline) error {
	rows, err := s.pool.Query(ctx, `
		SELECT w.id, w.run, w.number, w.status, w.created_at, w.submitted_at, w.ended_at,
		       w.requests, w.succeeded, w.errored, w.expired, w.cancelled,
		       c.tokens_in, c.tokens_out, c.valid, c.cost
		FROM waves w CROSS JOIN LATERAL (
		    SELECT coalesce(sum(a.tokens_in), 0) AS tokens_in, coalesce(sum(a.tokens_out), 0) AS tokens_out,
		           count(*) FILTER (WHERE a.valid) AS valid, coalesce(sum(a.cost_usd), 0)::float8 AS cost
		    FROM attempts a WHERE a.wave_id = w.id) c
		WHERE w.batch = $1 ORDER BY w.id LIMIT $2`, batch, timelineWaves)
	if err != nil {
		return err
	}
	var w WaveSpan
	var submitted, ended *time.Time
	_, err = pgx.ForEachRow(rows, []any{&w.ID, &w.Run, &w.Number, &w.Status, &w.Created, &submitted, &ended,
		&w.Requests, &w.Succeeded, &w.Errored, &w.Expired, &w.Cancelled,
		&w.TokensIn, &w.TokensOut, &w.ValidReplies, &w.CostUSD}, func() error {
		w.Submitted, w.Ended = time.Time{}, time.Time{}
		if submitted != nil {
			w.Submitted = *submitted
		}
		if ended != nil {
			w.Ended = *ended
		}
		t.Waves = append(t.Waves, w)
		return nil
	})
	return err
}
