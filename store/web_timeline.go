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
	// Latency is the realtime calls (attempts with price basis realtime,
	// every run's) by latency, in buckets that double: bucket i holds the calls that
	// took under UpToMs, and at least the previous bucket's UpToMs; the
	// first under 1 ms. Every realtime call the cost table counts is in
	// one.
	Latency []LatencyBucket
	// P50, P90 and P99 are latency percentiles of those calls in
	// milliseconds, of latencies kept at three significant digits (exact
	// below 1000 ms); Calls how many there were.
	P50, P90, P99 float64
	Calls         int64
	// Waves are the batch's provider batches in the order made.
	Waves []WaveSpan
	// ByMinute is true when the batch was too large to read its jobs one
	// by one within a page's time: Progress was read by the minute, and
	// Step is a whole number of minutes.
	ByMinute bool
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

// timelineJobs is how many jobs the progress plot reads one by one, to
// the second: a larger batch's progress is read from its finished jobs by
// the minute (batch_rollup_minutes), as many rows as the batch ran minutes
// whatever its size.
const timelineJobs = 20_000

// BatchTimeline returns the plots' data of batch.
func (s *Store) BatchTimeline(ctx context.Context, batch string) (Timeline, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var t Timeline
	var jobs int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(jobs), 0) FROM batch_rollups WHERE batch = $1`, batch).Scan(&jobs); err != nil {
		return Timeline{}, fmt.Errorf("timeline of %s: %w", batch, err)
	}
	limit := int64(timelineJobs)
	if s.timelineJobs > 0 {
		limit = s.timelineJobs
	}
	src := progressFromJobs
	if jobs > limit {
		src, t.ByMinute = progressFromMinutes, true
	}
	if err := s.progressOverTime(ctx, batch, src, &t); err != nil {
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

// progressSource is where the progress plot reads a batch's finished
// jobs: bounds the first and the last finish ($1 the batch), bins the
// counts by status of step i ($2 the first finish, $3 the step in
// seconds, $4 the steps read at most), to a whole number of units.
type progressSource struct {
	bounds, bins string
	unit         time.Duration
}

var (
	progressFromJobs = progressSource{
		bounds: `SELECT min(finished_at), max(finished_at) FROM jobs
			WHERE batch = $1 AND status <> 'queued' AND finished_at IS NOT NULL`,
		bins: `SELECT floor(extract(epoch FROM finished_at - $2) / $3)::bigint AS i,
			       count(*) FILTER (WHERE status = 'valid'),
			       count(*) FILTER (WHERE status = 'invalid'),
			       count(*) FILTER (WHERE status = 'failed'),
			       count(*) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed'))
			FROM jobs WHERE batch = $1 AND status <> 'queued' AND finished_at IS NOT NULL
			GROUP BY 1 ORDER BY 1 LIMIT $4`,
		unit: time.Second,
	}
	// A minute's jobs finished before its end: the last finish is the
	// end of the last minute.
	progressFromMinutes = progressSource{
		bounds: `SELECT min(minute), max(minute) + interval '1 minute' FROM batch_rollup_minutes
			WHERE batch = $1 AND (valid, invalid, failed, other) <> (0, 0, 0, 0)`,
		bins: `SELECT floor(extract(epoch FROM minute - $2) / $3)::bigint AS i,
			       sum(valid)::bigint, sum(invalid)::bigint, sum(failed)::bigint, sum(other)::bigint
			FROM batch_rollup_minutes WHERE batch = $1 AND (valid, invalid, failed, other) <> (0, 0, 0, 0)
			GROUP BY 1 ORDER BY 1 LIMIT $4`,
		unit: time.Minute,
	}
)

// progressOverTime bins the finished jobs into at most timelineSteps steps
// of a whole number of src's units and sums them up.
func (s *Store) progressOverTime(ctx context.Context, batch string, src progressSource, t *Timeline) error {
	var first, last *time.Time
	err := s.pool.QueryRow(ctx, src.bounds, batch).Scan(&first, &last)
	if err != nil || first == nil {
		return err
	}
	step := max(last.Sub(*first)/timelineSteps, src.unit).Truncate(src.unit)
	if last.Sub(*first)/step >= timelineSteps {
		step += src.unit
	}
	t.Step = step
	rows, err := s.pool.Query(ctx, src.bins, batch, *first, step.Seconds(), timelineSteps+1)
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
		p.Valid, p.Invalid, p.Failed, p.Other = p.Valid+valid, p.Invalid+invalid, p.Failed+failed, p.Other+other
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

// latencies buckets the batch's realtime calls by latency, doubling, from
// batch_rollup_latency (latencies at three significant digits: a call of
// 1,025 ms counts as 1,020, under 1,024).
func (s *Store) latencies(ctx context.Context, batch string, t *Timeline) error {
	var p50, p90, p99 *float64
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(calls), 0)::bigint,
		       fixpoint_hist_percentile(array_agg(latency_ms), array_agg(calls), 0.5),
		       fixpoint_hist_percentile(array_agg(latency_ms), array_agg(calls), 0.9),
		       fixpoint_hist_percentile(array_agg(latency_ms), array_agg(calls), 0.99)
		FROM batch_rollup_latency WHERE batch = $1`, batch).Scan(&t.Calls, &p50, &p90, &p99)
	if err != nil || t.Calls == 0 {
		return err
	}
	t.P50, t.P90, t.P99 = *p50, *p90, *p99
	// Bucket i holds latencies in [2^(i-1), 2^i) ms, bucket 0 those under
	// 1 ms (0 ms: a reply from a cache or a local simulator), so that every
	// call the cost table counts is in one.
	rows, err := s.pool.Query(ctx, `
		SELECT CASE WHEN latency_ms < 1 THEN 0 ELSE floor(log(2, latency_ms))::int + 1 END AS i, sum(calls)::bigint
		FROM batch_rollup_latency WHERE batch = $1 AND calls > 0
		GROUP BY 1 ORDER BY 1 LIMIT 64`, batch)
	if err != nil {
		return err
	}
	var i int
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		t.Latency = append(t.Latency, LatencyBucket{UpToMs: int64(1) << i, Calls: n})
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
		    -- wave_rollups (migration 010): the attempts each wave carried
		    SELECT coalesce(sum(r.tokens_in), 0)::bigint AS tokens_in, coalesce(sum(r.tokens_out), 0)::bigint AS tokens_out,
		           coalesce(sum(r.valid), 0)::bigint AS valid, coalesce(sum(r.cost_usd), 0)::float8 AS cost
		    FROM wave_rollups r WHERE r.wave_id = w.id) c
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
