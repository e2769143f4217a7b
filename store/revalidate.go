package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint"
)

// RevalidationJob is a final job of a batch as a revalidation checks it:
// its value in its current run, what its evidence source is made of (its
// input row and prompt), and, when asked, its run's replies.
type RevalidationJob struct {
	ID       string
	RowNo    int
	Run      int
	Status   fixpoint.Status
	Value    json.RawMessage
	Metadata json.RawMessage
	Prompt   string
	// Replies are the replies of the run's attempts that got one, the
	// newest first; only when RevalidationJobs was asked for them.
	Replies []Reply
}

// Reply is one stored reply of a job.
type Reply struct {
	No  int
	Raw string
}

// RevalidationJobs returns up to limit jobs of batch that are valid or
// invalid (the final jobs that hold a value), in row order after the job
// at (afterRow, afterID) (0 and "" for the first page), with their replies
// when replies is set.
func (s *Store) RevalidationJobs(ctx context.Context, batch string, afterRow int, afterID string, limit int, replies bool) ([]RevalidationJob, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id, row_no, run, status, coalesce(value::text, ''), metadata::text, prompt
		FROM jobs WHERE batch = $1 AND status IN ('valid', 'invalid') AND (row_no, id) > ($2, $3)
		ORDER BY row_no, id LIMIT $4`, batch, afterRow, afterID, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("read jobs of %s to revalidate: %w", batch, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RevalidationJob, error) {
		var j RevalidationJob
		var value, meta string
		err := r.Scan(&j.ID, &j.RowNo, &j.Run, &j.Status, &value, &meta, &j.Prompt)
		j.Value, j.Metadata = rawOrNil(value), json.RawMessage(meta)
		return j, err
	})
	if err != nil || !replies || len(jobs) == 0 {
		return jobs, err
	}
	return jobs, s.readReplies(ctx, jobs)
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// readReplies fills jobs' Replies from their runs' attempts.
func (s *Store) readReplies(ctx context.Context, jobs []RevalidationJob) error {
	ids, runs := make([]string, len(jobs)), make([]int32, len(jobs))
	at := make(map[string]int, len(jobs))
	for i, j := range jobs {
		ids[i], runs[i], at[j.ID] = j.ID, int32(j.Run), i
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.job_id, a.attempt_no, a.raw FROM attempts a
		JOIN unnest($1::text[], $2::int[]) AS k(id, run) ON a.job_id = k.id AND a.run = k.run
		WHERE a.raw <> '' ORDER BY a.job_id, a.attempt_no DESC`, ids, runs)
	if err != nil {
		return fmt.Errorf("read replies to revalidate: %w", err)
	}
	var id string
	var r Reply
	_, err = pgx.ForEachRow(rows, []any{&id, &r.No, &r.Raw}, func() error {
		j := &jobs[at[id]]
		j.Replies = append(j.Replies, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read replies to revalidate: %w", err)
	}
	return nil
}

// RevalidationOutcome is what a revalidation made of one job: whether the
// value it checked (the job's value in PriorRun, or its reply AttemptNo)
// passes the new schema, its rules and the evidence stage, the value it
// keeps, and why it fails.
type RevalidationOutcome struct {
	JobID     string
	PriorRun  int
	AttemptNo int // 0: the run's final value
	Valid     bool
	Value     json.RawMessage
	// Error and Class are the job's final error and class when it fails.
	Error, Class string
	// Errors, Warnings and Evidence are JSON arrays as an attempt's.
	Errors, Warnings, Evidence json.RawMessage
}

// RevalidationParams is what a revalidation records besides its outcomes:
// the batch, the schema the values were checked against (its hash, the
// schema stored with PutSchema), the settings of the new run and what was
// asked for.
type RevalidationParams struct {
	Batch, SchemaHash string
	Settings, Request json.RawMessage
}

// ErrBatchRunning is returned for an action on a batch whose jobs are not
// all final.
var ErrBatchRunning = errors.New("the batch has jobs still queued")

// SaveRevalidation records a revalidation of a batch as a new run, in one
// transaction: each outcome next gives (until it returns nil) moves its
// job into the run, valid or invalid, its earlier run kept in job_runs,
// and leaves a row in revalidations. A job whose run changed since it was
// read is left as it is. A batch with jobs still queued is refused
// (ErrBatchRunning). It returns the run and how many jobs it holds.
func (s *Store) SaveRevalidation(ctx context.Context, p RevalidationParams, next func() (*RevalidationOutcome, error)) (run, jobs int, err error) {
	if p.Batch == "" || p.SchemaHash == "" || !json.Valid(p.Settings) {
		return 0, 0, fmt.Errorf("revalidate: %w: batch, schema hash and settings are required", ErrInvalid)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var queued int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs WHERE batch = $1 AND status = 'queued') FROM batches WHERE name = $1 FOR UPDATE`,
			p.Batch).Scan(&queued); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("batch %s: %w", p.Batch, ErrNotFound)
			}
			return err
		}
		if queued > 0 {
			return fmt.Errorf("%w: %d jobs of batch %s are queued: revalidate a batch once it is done", ErrBatchRunning, queued, p.Batch)
		}
		if err := tx.QueryRow(ctx, `
			SELECT greatest(coalesce((SELECT max(run) FROM batch_runs WHERE batch = $1), 1),
			                coalesce((SELECT max(run) FROM jobs WHERE batch = $1), 1)) + 1`, p.Batch).Scan(&run); err != nil {
			return err
		}
		request := p.Request
		if len(request) == 0 {
			request = json.RawMessage(`{}`)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_runs (batch, run, settings, request) VALUES ($1, $2, $3::jsonb, $4::jsonb)`,
			p.Batch, run, string(p.Settings), string(request)); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		var err error
		jobs, err = applyRevalidation(ctx, tx, p, run, next)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("revalidate batch %s: %w", p.Batch, err)
	}
	return run, jobs, nil
}

// revalColumns are the columns of the revalidation's staging table.
var revalColumns = []string{"job_id", "prior_run", "attempt_no", "valid", "value", "error", "class", "errors", "warnings", "evidence"}

// applyRevalidation streams the outcomes into a staging table and applies
// them to the jobs of the batch still in the runs they were read in.
func applyRevalidation(ctx context.Context, tx pgx.Tx, p RevalidationParams, run int, next func() (*RevalidationOutcome, error)) (int, error) {
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE reval (job_id text PRIMARY KEY, prior_run int, attempt_no int, valid bool, value jsonb, error text,
			class text, errors jsonb, warnings jsonb, evidence jsonb) ON COMMIT DROP`); err != nil {
		return 0, err
	}
	src := pgx.CopyFromFunc(func() ([]any, error) {
		o, err := next()
		if err != nil || o == nil {
			return nil, err
		}
		return []any{o.JobID, int32(o.PriorRun), nullID(int64(o.AttemptNo)), o.Valid, nullRaw(pgJSON(o.Value)), txt(o.Error), txt(o.Class),
			rawOrEmpty(pgJSON(o.Errors)), nullRaw(pgJSON(o.Warnings)), nullRaw(pgJSON(o.Evidence))}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"reval"}, revalColumns, src); err != nil {
		return 0, fmt.Errorf("stage the outcomes: %w", err)
	}
	const mine = `FROM reval r WHERE j.id = r.job_id AND j.batch = $1 AND j.run = r.prior_run AND j.status IN ('valid', 'invalid')`
	if _, err := tx.Exec(ctx, `
		INSERT INTO job_runs (job_id, run, status, provider, model, value, error, final_class, attempts, calls,
			first_attempt_valid, repaired_locally, tokens_in, tokens_out, tokens_cached, cost_usd,
			started_at, finished_at, deliveries, schema_hash)
		SELECT j.id, j.run, j.status, j.provider, j.model, j.value, j.error, j.final_class, j.attempts, j.calls,
			j.first_attempt_valid, j.repaired_locally, j.tokens_in, j.tokens_out, j.tokens_cached, j.cost_usd,
			j.started_at, j.finished_at, j.deliveries, j.schema_hash
		FROM jobs j, reval r WHERE j.id = r.job_id AND j.batch = $1 AND j.run = r.prior_run AND j.status IN ('valid', 'invalid')
		ON CONFLICT (job_id, run) DO NOTHING`, p.Batch); err != nil {
		return 0, fmt.Errorf("keep the jobs' outcomes: %w", err)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE jobs j SET run = $2, schema_hash = $3, `+endRunSet+`, status = CASE WHEN r.valid THEN 'valid' ELSE 'invalid' END,
			value = r.value, error = CASE WHEN r.valid THEN '' ELSE r.error END, final_class = CASE WHEN r.valid THEN '' ELSE r.class END,
			attempts = 0, calls = 0, first_attempt_valid = false, repaired_locally = false, tokens_in = 0, tokens_out = 0,
			tokens_cached = 0, tokens_cache_write = 0, cost_usd = 0, started_at = now(), finished_at = now(), wall_ms = 0,
			deliveries = 0, wave_id = NULL `+mine, p.Batch, run, p.SchemaHash)
	if err != nil {
		return 0, fmt.Errorf("move the jobs into run %d: %w", run, err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO revalidations (job_id, run, prior_run, attempt_no, schema_hash, valid, class, errors, warnings, evidence)
		SELECT r.job_id, $2, r.prior_run, r.attempt_no, $3, r.valid, r.class, r.errors, r.warnings, r.evidence
		FROM reval r JOIN jobs j ON j.id = r.job_id AND j.batch = $1 AND j.run = $2`, p.Batch, run, p.SchemaHash); err != nil {
		return 0, fmt.Errorf("record the checks: %w", err)
	}
	n := int(tag.RowsAffected())
	if _, err := tx.Exec(ctx, `UPDATE batch_runs SET jobs = $3 WHERE batch = $1 AND run = $2`, p.Batch, run, n); err != nil {
		return 0, err
	}
	return n, nil
}
