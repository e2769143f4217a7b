package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PublishingChunk names a chunk of jobs InsertJobsPublishing recorded as
// published before the queue took them; 0 names none.
type PublishingChunk int64

// InsertJobsPublishing records new jobs, all of one batch, as InsertJobs
// does but already marked published, and keeps their ids as a chunk of the
// enqueue run of token (StartRecording's) until SettlePublishing is called
// with the jobs the queue did not take. Marking them published as they are
// copied in spares an update of every job once the queue took it. A chunk
// whose run dies before it is settled is found by ReclaimPublishing.
//
// When one of the jobs is in the ledger already, the new ones are recorded
// unpublished instead, as InsertJobs records them, and the chunk is 0: the
// caller publishes them as it publishes any job recorded unpublished.
func (s *Store) InsertJobsPublishing(ctx context.Context, token string, jobs []NewJob) (int, PublishingChunk, error) {
	if len(jobs) == 0 {
		return 0, 0, nil
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		if err := j.check(); err != nil {
			return 0, 0, fmt.Errorf("insert jobs: %w", err)
		}
		if j.Batch != jobs[0].Batch {
			return 0, 0, fmt.Errorf("insert jobs: %w: jobs of batches %s and %s in one chunk", ErrInvalid, jobs[0].Batch, j.Batch)
		}
		ids[i] = j.ID
	}
	if token == "" {
		return 0, 0, fmt.Errorf("insert jobs: %w: no recording token", ErrInvalid)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var chunk PublishingChunk
	var n int64
	at := time.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO enqueue_publishing (token, batch, job_ids) VALUES ($1, $2, $3) RETURNING id`,
			token, jobs[0].Batch, ids).Scan(&chunk)
		if err != nil {
			return err
		}
		n, err = tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, publishedJobCopyColumns, publishedJobRows(jobs, at))
		return err
	})
	if pgCode(err) == pgUniqueViolation {
		n, err = s.insertNewJobs(ctx, jobs)
		chunk = 0
	}
	if err != nil {
		return 0, 0, fmt.Errorf("insert jobs: %w", err)
	}
	return int(n), chunk, nil
}

// publishedJobCopyColumns are newJobCopyColumns and the two that mark a
// job published.
var publishedJobCopyColumns = append(append([]string{}, newJobCopyColumns...), "published", "published_at")

// publishedJobRows are jobs as rows of publishedJobCopyColumns, published
// at at.
func publishedJobRows(jobs []NewJob, at time.Time) pgx.CopyFromSource {
	rows := newJobRows(jobs)
	return pgx.CopyFromFunc(func() ([]any, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		return append(vals, true, at), nil
	})
}

// SettlePublishing ends a chunk of InsertJobsPublishing once the queue has
// answered for its jobs: the jobs of unpublished (those it did not take)
// are marked unpublished again, for a later run to publish, and the chunk
// is forgotten, in one statement. Settling a chunk twice, or 0, is
// harmless.
func (s *Store) SettlePublishing(ctx context.Context, chunk PublishingChunk, unpublished []string) error {
	if chunk == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// Its commit is not waited for on disk: a settling lost in a crash
	// leaves the chunk unsettled, and ReclaimPublishing has its jobs
	// published again, which loses none.
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit = off`)
	b.Queue(`
		WITH settled AS (DELETE FROM enqueue_publishing WHERE id = $1)
		UPDATE jobs SET published = false, published_at = NULL WHERE id = ANY($2) AND published`, int64(chunk), unpublished)
	b.Queue(`COMMIT`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("settle the publishing of %d jobs: %w", len(unpublished), err)
	}
	return nil
}

// ReclaimPublishing marks unpublished again the jobs, still queued, of the
// chunks of batch left unsettled by enqueue runs that are gone (their
// recording mark stopped, stale or removed), and by the live runs of
// dataset (the run of token, which records that whole dataset, replaces
// them), and forgets those chunks: the jobs the queue may not have taken
// are then published by the caller, as any job recorded unpublished. It
// returns how many jobs it marked. token's own chunks are kept; dataset ""
// reclaims only the chunks of runs that are gone.
func (s *Store) ReclaimPublishing(ctx context.Context, batch, token, dataset string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
		WITH gone AS (
			DELETE FROM enqueue_publishing p
			WHERE p.batch = $1 AND p.token <> $2
			  AND NOT EXISTS (SELECT 1 FROM batch_recordings r
			                  WHERE r.token = p.token AND r.beat_at > now() - $4::interval AND r.dataset_sha256 <> $3)
			RETURNING p.job_ids
		)
		UPDATE jobs j SET published = false, published_at = NULL
		FROM (SELECT DISTINCT unnest(job_ids) AS id FROM gone) g
		WHERE j.id = g.id AND j.status = 'queued' AND j.published`, batch, token, dataset, RecordingStale.String())
	if err != nil {
		return 0, fmt.Errorf("reclaim the unsettled publishing of batch %s: %w", batch, err)
	}
	return int(tag.RowsAffected()), nil
}
