package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fixpoint-dev/fixpoint"
)

// NewJob is a job as enqueue records it.
type NewJob struct {
	// ID identifies the job; stable across enqueue runs. Required.
	ID string
	// Batch names the batch; it must have been stored with PutBatch.
	Batch string
	// RowNo is the job's row number in the input, from 1.
	RowNo int
	// SchemaHash is the hash PutSchema returned; "" for none.
	SchemaHash string
	// Prompt is the rendered prompt.
	Prompt string
	// Provider, Model, Mode and Strategy are the settings the job runs with.
	Provider, Model, Mode, Strategy string
	// Metadata is the input row as a JSON object; nil means {}.
	Metadata json.RawMessage
	// DocumentHash names the job's document (PutDocuments, which must
	// have stored it first), "" for a job of no document.
	DocumentHash string
	// Run is the batch run the job is in (1 until it is requeued); read
	// only: InsertJobs records every job in run 1.
	Run int
	// Continue, read only, is set on a job requeued after its revalidation
	// failed: the reply checked and why it failed, for its new run to go
	// on from (the reply, then the errors as feedback).
	Continue *Continuation
}

// Continuation is where a requeued job goes on from: the reply a
// revalidation checked (Reply, "" when the value checked came from no
// stored reply) and what it made of it.
type Continuation struct {
	Reply  string
	Class  string
	Errors json.RawMessage
}

func (j NewJob) check() error {
	if j.ID == "" {
		return fmt.Errorf("%w: job with empty id (row %d)", ErrInvalid, j.RowNo)
	}
	if j.Batch == "" {
		return fmt.Errorf("%w: job %s with empty batch", ErrInvalid, j.ID)
	}
	return nil
}

func rawOr(r json.RawMessage, def string) string {
	if len(r) == 0 {
		return def
	}
	return string(r)
}

// InsertJobs records jobs as 'queued' and unpublished, skipping every job
// whose id exists already, and returns how many it inserted: running the
// same enqueue twice inserts 0. The rows are copied straight into jobs;
// when one of them is there already (the copy stops at it), they are
// copied into a temporary table and inserted from there, skipping those,
// in one transaction.
func (s *Store) InsertJobs(ctx context.Context, jobs []NewJob) (int, error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	for _, j := range jobs {
		if err := j.check(); err != nil {
			return 0, fmt.Errorf("insert jobs: %w", err)
		}
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"jobs"}, newJobCopyColumns, newJobRows(jobs))
	if pgCode(err) == pgUniqueViolation {
		n, err = s.insertNewJobs(ctx, jobs)
	}
	if err != nil {
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return int(n), nil
}

// newJobCopyColumns are the columns InsertJobs fills, in newJobRows' order.
var newJobCopyColumns = []string{"id", "batch", "row_no", "schema_hash", "prompt", "provider", "model", "mode", "strategy", "metadata", "document_hash"}

// newJobRows are jobs as rows of newJobCopyColumns for COPY.
func newJobRows(jobs []NewJob) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(jobs), func(i int) ([]any, error) {
		j := &jobs[i]
		var hash, doc any
		if j.SchemaHash != "" {
			hash = j.SchemaHash
		}
		if j.DocumentHash != "" {
			doc = j.DocumentHash
		}
		return []any{j.ID, j.Batch, j.RowNo, hash, txt(j.Prompt), txt(j.Provider), txt(j.Model), txt(j.Mode), txt(j.Strategy), rawOr(pgJSON(j.Metadata), "{}"), doc}, nil
	})
}

// pgUniqueViolation is Postgres's code for a duplicate key.
const pgUniqueViolation = "23505"

// pgCode is the SQLSTATE of a Postgres error, "" for another error or nil.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// insertNewJobs inserts those of jobs whose id the ledger does not hold,
// through a temporary table, in one transaction.
func (s *Store) insertNewJobs(ctx context.Context, jobs []NewJob) (int64, error) {
	var inserted int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TEMP TABLE jobs_in (
			id text, batch text, row_no int, schema_hash text, prompt text,
			provider text, model text, mode text, strategy text, metadata jsonb, document_hash text
		) ON COMMIT DROP`)
		if err != nil {
			return fmt.Errorf("create temp table: %w", err)
		}
		if _, err = tx.CopyFrom(ctx, pgx.Identifier{"jobs_in"}, newJobCopyColumns, newJobRows(jobs)); err != nil {
			return fmt.Errorf("copy jobs: %w", err)
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO jobs (id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata, document_hash)
			SELECT id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata, document_hash
			FROM jobs_in
			ON CONFLICT (id) DO NOTHING`)
		if err != nil {
			return err
		}
		inserted = tag.RowsAffected()
		return nil
	})
	return inserted, err
}

// HeldJob is a job the ledger holds under the id of a job about to be
// recorded, and how it differs from it.
type HeldJob struct {
	// ID is the job id.
	ID string
	// Batch is the batch the ledger's job is in ("" for a job rejected
	// before its batch was known).
	Batch string
	// Prompt, Metadata and Document report that the ledger's prompt,
	// input row or document differs.
	Prompt, Metadata, Document bool
	// HeldMetadata is the ledger's input row when it differs, so that a
	// caller can tell a row read from another format (a CSV's "3" for a
	// JSONL's 3) from one whose content changed.
	HeldMetadata json.RawMessage
}

// Differs reports whether the held job is not the one about to be recorded
// (another batch, prompt, input row or document): InsertJobs would keep the
// ledger's.
func (h HeldJob) Differs(batch string) bool {
	return h.Batch != batch || h.Prompt || h.Metadata || h.Document
}

// HeldJobs returns, of jobs, those whose id the ledger holds, in the order
// of jobs, each with what differs: the prompt, the input row compared as
// a JSON value, after the same cleaning InsertJobs does, or the document.
func (s *Store) HeldJobs(ctx context.Context, jobs []NewJob) ([]HeldJob, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids, prompts, metas, docs := make([]string, len(jobs)), make([]string, len(jobs)), make([]string, len(jobs)), make([]string, len(jobs))
	for i, j := range jobs {
		ids[i], prompts[i], metas[i], docs[i] = j.ID, txt(j.Prompt), rawOr(pgJSON(j.Metadata), "{}"), j.DocumentHash
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT n.id, coalesce(j.batch, ''), j.prompt <> n.prompt, j.metadata <> n.metadata::jsonb,
		       CASE WHEN j.metadata <> n.metadata::jsonb THEN j.metadata::text END,
		       coalesce(j.document_hash, '') <> n.document_hash
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS n(id, prompt, metadata, document_hash, ord)
		JOIN jobs j ON j.id = n.id
		ORDER BY n.ord`, ids, prompts, metas, docs)
	if err != nil {
		return nil, fmt.Errorf("compare jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HeldJob, error) {
		var h HeldJob
		var held *string
		err := r.Scan(&h.ID, &h.Batch, &h.Prompt, &h.Metadata, &held, &h.Document)
		if held != nil {
			h.HeldMetadata = json.RawMessage(*held)
		}
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("compare jobs: %w", err)
	}
	return out, nil
}

// MarkPublished records that the jobs were published to the queue. Ids that
// do not exist or are already marked are ignored; it is safe to repeat.
func (s *Store) MarkPublished(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx,
		`UPDATE jobs SET published = true, published_at = now() WHERE id = ANY($1) AND NOT published`, ids)
	if err != nil {
		return fmt.Errorf("mark %d jobs published: %w", len(ids), err)
	}
	return nil
}

// Unpublished returns up to limit jobs of batch that were recorded but not
// yet published and are still queued, in row order (for enqueue --resume).
// limit <= 0 means all.
func (s *Store) Unpublished(ctx context.Context, batch string, limit int) ([]NewJob, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	lim := limitArg(limit)
	rows, err := s.pool.Query(ctx, `
		SELECT `+newJobColumns+`
		FROM jobs j `+continuationJoin+` WHERE j.batch = $1 AND NOT j.published AND j.status = 'queued'
		ORDER BY j.row_no, j.id LIMIT $2`, batch, lim)
	if err != nil {
		return nil, fmt.Errorf("list unpublished jobs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, scanNewJob)
	if err != nil {
		return nil, fmt.Errorf("list unpublished jobs of %s: %w", batch, err)
	}
	return out, nil
}

// JobFinal returns the job's status and whether it is final, so a worker can
// skip a redelivered job that is done. ErrNotFound if there is no row.
func (s *Store) JobFinal(ctx context.Context, id string) (status fixpoint.Status, final bool, err error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT status FROM jobs WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, fmt.Errorf("get job %s status: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", false, fmt.Errorf("get job %s status: %w", id, err)
	}
	return status, status.Final(), nil
}

// Statuses returns the status of each of ids that has a row, in one query
// (a batched JobFinal); ids without a row are absent from the map.
func (s *Store) Statuses(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, status FROM jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("get status of %d jobs: %w", len(ids), err)
	}
	var id, status string
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		out[id] = status
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get status of %d jobs: %w", len(ids), err)
	}
	return out, nil
}

// JobState is what a worker needs to know of a job it picked up.
type JobState struct {
	// Status is the job's status.
	Status fixpoint.Status
	// Run is the batch run the job is in.
	Run int
	// Wave is the wave holding the job's next attempt (batch delivery),
	// 0 when none: the ledger, not the queue, owns a job in a wave.
	Wave int64
	// Attempts counts the attempts of the run the ledger holds for a job
	// not final yet: those its waves recorded before they handed it on to
	// run realtime (batch delivery); 0 for a job never in a wave.
	Attempts int
}

// HasQueuedJobs reports whether the ledger holds a job waiting in the
// queue: queued, and not in a provider-batch wave.
func (s *Store) HasQueuedJobs(ctx context.Context) (bool, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'queued' AND wave_id IS NULL)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for queued jobs: %w", err)
	}
	return ok, nil
}

// JobStates returns the status and run of each of ids that has a row, in
// one query; ids without a row are absent from the map.
func (s *Store) JobStates(ctx context.Context, ids []string) (map[string]JobState, error) {
	out := make(map[string]JobState, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, status, run, coalesce(wave_id, 0), attempts FROM jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("get state of %d jobs: %w", len(ids), err)
	}
	var id string
	var st JobState
	_, err = pgx.ForEachRow(rows, []any{&id, &st.Status, &st.Run, &st.Wave, &st.Attempts}, func() error {
		out[id] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get state of %d jobs: %w", len(ids), err)
	}
	return out, nil
}

// Rejection records a job that cannot be processed.
type Rejection struct {
	// JobID identifies the job; required.
	JobID string
	// Batch names the batch, "" if unknown. A batch not yet stored is
	// created with default settings.
	Batch string
	// Reason is stored as the job's error.
	Reason string
	// Payload is the raw message, kept for inspection; may be nil.
	Payload []byte
	// Status is StatusRejected (bad input) or StatusDead (delivered too
	// often); "" means StatusRejected.
	Status fixpoint.Status
	// Deliveries is how often the queue delivered the job's message; 0
	// when unknown.
	Deliveries int
}

// Reject records a rejected or dead job: it inserts the row when there is
// none and updates it while it is 'queued'. It never overwrites a final row
// and returns whether it changed anything.
func (s *Store) Reject(ctx context.Context, r Rejection) (bool, error) {
	status := r.Status
	if status == "" {
		status = fixpoint.StatusRejected
	}
	if status != fixpoint.StatusRejected && status != fixpoint.StatusDead {
		return false, fmt.Errorf("reject job %s: %w: status %q is not rejected or dead", r.JobID, ErrInvalid, r.Status)
	}
	if r.JobID == "" {
		return false, fmt.Errorf("reject job: %w: empty id", ErrInvalid)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var changed bool
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if r.Batch != "" {
				if _, err := tx.Exec(ctx, `INSERT INTO batches (name) VALUES ($1) ON CONFLICT DO NOTHING`, r.Batch); err != nil {
					return err
				}
			}
			tag, err := tx.Exec(ctx, `
				INSERT INTO jobs (id, batch, status, error, payload, finished_at, deliveries)
				VALUES ($1, nullif($2, ''), $3, $4, $5, now(), $6)
				ON CONFLICT (id) DO UPDATE
				SET status = EXCLUDED.status, error = EXCLUDED.error,
				    payload = EXCLUDED.payload, finished_at = EXCLUDED.finished_at,
				    deliveries = EXCLUDED.deliveries
				WHERE jobs.status = 'queued'`,
				r.JobID, r.Batch, status, txt(r.Reason), r.Payload, r.Deliveries)
			if err != nil {
				return err
			}
			changed = tag.RowsAffected() == 1
			return nil
		})
	})
	if err != nil {
		return false, fmt.Errorf("reject job %s: %w", r.JobID, err)
	}
	return changed, nil
}
