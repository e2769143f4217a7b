package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PurgeParams says which attempts Purge deletes: those of the jobs
// finished before Before, of Batch ("" = every batch, and the jobs of
// none).
type PurgeParams struct {
	Before time.Time
	Batch  string
	// DryRun counts what would go and deletes nothing.
	DryRun bool
	// Chunk is how many jobs one transaction purges (0: PurgeChunk).
	Chunk int
	// Progress, when set, is called after each chunk with the totals so
	// far and the batch being purged.
	Progress func(batch string, done PurgeResult)
}

// PurgeChunk is Purge's default number of jobs per transaction: a few
// thousand attempt rows, a lock held for well under a second.
const PurgeChunk = 1000

// PurgeResult counts what Purge deleted (or, for a dry run, would).
type PurgeResult struct {
	// Jobs counts the jobs with anything deleted.
	Jobs int64
	// Attempts, Interrupted, Revalidations and WaveRequests count the
	// rows deleted from attempts (with their requests and reply text),
	// interrupted_attempts, revalidations and the recorded wave_requests.
	Attempts, Interrupted, Revalidations, WaveRequests int64
}

func (r *PurgeResult) add(o PurgeResult) {
	r.Jobs += o.Jobs
	r.Attempts += o.Attempts
	r.Interrupted += o.Interrupted
	r.Revalidations += o.Revalidations
	r.WaveRequests += o.WaveRequests
}

// purgeable selects the jobs Purge may purge, as j: finished before $2.
// A cancelled job with running totals keeps its attempts: batch_spend
// counts its run's attempts when they are more than its totals.
const purgeable = `j.status <> 'queued' AND j.finished_at < $2
	AND NOT (j.status = 'cancelled' AND (j.attempts > 0 OR j.tokens_in > 0 OR j.tokens_out > 0 OR j.cost_usd > 0))`

// Purge deletes the attempts, interrupted calls, revalidations and
// recorded wave requests of the jobs finished before p.Before, in chunks
// of p.Chunk jobs per transaction, oldest first, batch by batch. Each job
// keeps its row (status, final value, totals) and gets a purged_jobs row
// saying when and how much went; every rollup stays as it is, so report
// summary, report failures and the dashboard give the same figures after
// a purge. What still reads attempts shows less for a purged job: its
// page (which says they were purged), report job, an export with
// --attempts, and report summary's lanes whose model was not found.
func (s *Store) Purge(ctx context.Context, p PurgeParams) (PurgeResult, error) {
	var total PurgeResult
	if p.Before.IsZero() {
		return total, fmt.Errorf("%w: purge: no cutoff", ErrInvalid)
	}
	if p.Chunk <= 0 {
		p.Chunk = PurgeChunk
	}
	var batches []*string
	if p.Batch != "" {
		if _, err := s.Batch(ctx, p.Batch); err != nil {
			return total, err
		}
		batches = []*string{&p.Batch}
	} else {
		rows, err := s.pool.Query(ctx, `SELECT name FROM batches ORDER BY name`)
		if err != nil {
			return total, fmt.Errorf("purge: list batches: %w", err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return total, fmt.Errorf("purge: list batches: %w", err)
		}
		for i := range names {
			batches = append(batches, &names[i])
		}
		batches = append(batches, nil) // the jobs of no batch
	}
	for _, b := range batches {
		name := ""
		if b != nil {
			name = *b
		}
		if err := s.purgeBatch(ctx, p, b, func(r PurgeResult) {
			total.add(r)
			if p.Progress != nil {
				p.Progress(name, total)
			}
		}); err != nil {
			return total, fmt.Errorf("purge %s: %w", batchLabel(name), err)
		}
	}
	return total, nil
}

func batchLabel(b string) string {
	if b == "" {
		return "the jobs of no batch"
	}
	return "batch " + b
}

// purgeBatch purges the jobs of batch b (nil: of none) chunk by chunk,
// walking them by finish time through jobs_batch_finished.
func (s *Store) purgeBatch(ctx context.Context, p PurgeParams, b *string, done func(PurgeResult)) error {
	var after time.Time
	afterID := ""
	for {
		var ids []string
		var last time.Time
		err := func() error {
			qctx, cancel := s.timeout(ctx)
			defer cancel()
			// batch = $1 and batch IS NULL each reach an index; IS NOT
			// DISTINCT FROM neither.
			of := "j.batch = $1"
			if b == nil {
				of = "j.batch IS NULL AND $1::text IS NULL"
			}
			rows, err := s.pool.Query(qctx, `
				SELECT j.id, j.finished_at FROM jobs j
				WHERE `+of+` AND `+purgeable+`
				  AND (j.finished_at, j.id) > ($3, $4)
				ORDER BY j.finished_at, j.id LIMIT $5`, b, p.Before, after, afterID, p.Chunk)
			if err != nil {
				return err
			}
			var id string
			_, err = pgx.ForEachRow(rows, []any{&id, &last}, func() error {
				ids = append(ids, id)
				return nil
			})
			return err
		}()
		if err != nil {
			return fmt.Errorf("find the jobs to purge: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		r, err := s.purgeJobs(ctx, ids, p.DryRun)
		if err != nil {
			return err
		}
		if r != (PurgeResult{}) {
			done(r)
		}
		if len(ids) < p.Chunk {
			return nil
		}
		after, afterID = last, ids[len(ids)-1]
	}
}

// purgeJobs deletes (or, dry, counts) the rows of the jobs ids in one
// transaction.
func (s *Store) purgeJobs(ctx context.Context, ids []string, dry bool) (PurgeResult, error) {
	var r PurgeResult
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if dry {
		err := s.pool.QueryRow(ctx, `
			WITH a AS (SELECT job_id, count(*) AS n FROM attempts WHERE job_id = ANY($1) GROUP BY 1),
			     i AS (SELECT job_id, count(*) AS n FROM interrupted_attempts WHERE job_id = ANY($1) GROUP BY 1),
			     v AS (SELECT job_id, count(*) AS n FROM revalidations WHERE job_id = ANY($1) GROUP BY 1),
			     w AS (SELECT job_id, count(*) AS n FROM wave_requests WHERE job_id = ANY($1) AND recorded GROUP BY 1)
			SELECT (SELECT count(*) FROM (SELECT job_id FROM a UNION SELECT job_id FROM i
			                              UNION SELECT job_id FROM v UNION SELECT job_id FROM w) x),
			       coalesce((SELECT sum(n) FROM a), 0)::int8, coalesce((SELECT sum(n) FROM i), 0)::int8,
			       coalesce((SELECT sum(n) FROM v), 0)::int8, coalesce((SELECT sum(n) FROM w), 0)::int8`,
			ids).Scan(&r.Jobs, &r.Attempts, &r.Interrupted, &r.Revalidations, &r.WaveRequests)
		if err != nil {
			return r, fmt.Errorf("count the rows to purge: %w", err)
		}
		return r, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The jobs' rows are locked first, in id order, as the writer
		// and a requeue lock them: a job finishing a new run in the
		// meantime is not purged half way.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
			return err
		}
		// The rollups read a job's final check from its attempts and
		// revalidations when a new one replaces it: what it adds is kept
		// before they go.
		if _, err := tx.Exec(ctx, `SELECT fixpoint_keep_final_checks($1)`, ids); err != nil {
			return fmt.Errorf("keep the final checks: %w", err)
		}
		return tx.QueryRow(ctx, `
			WITH a AS (DELETE FROM attempts WHERE job_id = ANY($1) RETURNING job_id),
			     i AS (DELETE FROM interrupted_attempts WHERE job_id = ANY($1) RETURNING job_id),
			     v AS (DELETE FROM revalidations WHERE job_id = ANY($1) RETURNING job_id),
			     w AS (DELETE FROM wave_requests WHERE job_id = ANY($1) AND recorded RETURNING job_id),
			     n AS (
			         SELECT job_id, count(*) FILTER (WHERE k = 'a') AS a, count(*) FILTER (WHERE k = 'i') AS i,
			                count(*) FILTER (WHERE k = 'v') AS v, count(*) FILTER (WHERE k = 'w') AS w
			         FROM (SELECT job_id, 'a' AS k FROM a UNION ALL SELECT job_id, 'i' FROM i
			               UNION ALL SELECT job_id, 'v' FROM v UNION ALL SELECT job_id, 'w' FROM w) x
			         GROUP BY 1
			     ),
			     p AS (
			         INSERT INTO purged_jobs AS p (job_id, attempts, interrupted)
			         SELECT job_id, a, i FROM n ORDER BY job_id
			         ON CONFLICT (job_id) DO UPDATE SET purged_at = now(),
			             attempts = p.attempts + EXCLUDED.attempts, interrupted = p.interrupted + EXCLUDED.interrupted
			     )
			SELECT count(*), coalesce(sum(a), 0)::int8, coalesce(sum(i), 0)::int8, coalesce(sum(v), 0)::int8,
			       coalesce(sum(w), 0)::int8 FROM n`, ids).Scan(&r.Jobs, &r.Attempts, &r.Interrupted, &r.Revalidations, &r.WaveRequests)
	})
	if err != nil {
		return PurgeResult{}, fmt.Errorf("purge %d jobs: %w", len(ids), err)
	}
	return r, nil
}

// purged returns the purge of job id's attempts, nil when never purged.
func (s *Store) purged(ctx context.Context, id string) (*Purge, error) {
	var p Purge
	err := s.pool.QueryRow(ctx, `SELECT purged_at, attempts, interrupted FROM purged_jobs WHERE job_id = $1`, id).
		Scan(&p.At, &p.Attempts, &p.Interrupted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("purge of job %s: %w", id, err)
	}
	return &p, nil
}
