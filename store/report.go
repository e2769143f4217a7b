package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/jackc/pgx/v5"
)

// BatchSummary is one row of the batch_summary view. Rates are in [0, 1]
// and NaN-free: a rate whose denominator is 0 is reported as 0 and flagged
// by the count it divides by.
type BatchSummary struct {
	// Batch names the batch ("" for jobs rejected before their batch was known).
	Batch string
	// Jobs counts every job; the status fields split it, Finished = Jobs - Queued.
	Jobs, Queued, Valid, Invalid, Failed, Rejected, Dead, Finished int64
	// Cancelled and OverBudget count jobs ended by enqueue cancel and by
	// the batch's spend cap.
	Cancelled, OverBudget int64
	// Runs is the batch's latest run (1 until a requeue).
	Runs int64
	// FirstAttemptValid counts valid jobs valid on their first attempt.
	FirstAttemptValid int64
	// Repaired counts valid jobs not valid on their first answered attempt
	// (see first_attempt_valid), or repaired locally.
	Repaired int64
	// ValidRate is Valid / Finished.
	ValidRate float64
	// FirstAttemptValidRate is FirstAttemptValid / Finished.
	FirstAttemptValidRate float64
	// RepairRate is Repaired / Valid.
	RepairRate float64
	// MeanAttempts is the mean attempt count of valid, invalid and failed jobs.
	MeanAttempts float64
	// TokensIn, TokensOut and TokensCached are totals over the batch.
	TokensIn, TokensOut, TokensCached int64
	// CostUSD is the batch's total estimated cost.
	CostUSD float64
	// TokensPerValidJob is (TokensIn + TokensOut) / Valid.
	TokensPerValidJob float64
	// CostPerValidJob is CostUSD / Valid.
	CostPerValidJob float64
	// P50WallMS and P95WallMS are job wall-time percentiles of finished jobs
	// (continuous interpolation), 0 when none finished with a wall time;
	// HasWall says whether one did (jobs cancelled unrun have none).
	P50WallMS, P95WallMS float64
	HasWall              bool
}

// Summary returns batch_summary for one batch, or for every batch (ordered
// by name) when batch is "". An unknown batch gives an empty slice.
func (s *Store) Summary(ctx context.Context, batch string) ([]BatchSummary, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT batch, jobs, queued, valid, invalid, failed, rejected, dead, finished,
		       first_attempt_valid, repaired,
		       coalesce(valid_rate, 0), coalesce(first_attempt_valid_rate, 0), coalesce(repair_rate, 0),
		       mean_attempts, tokens_in, tokens_out, tokens_cached, cost_usd,
		       coalesce(tokens_per_valid_job, 0), coalesce(cost_per_valid_job, 0),
		       coalesce(p50_wall_ms, 0), coalesce(p95_wall_ms, 0), cancelled, over_budget, runs, p50_wall_ms IS NOT NULL
		FROM batch_summary WHERE $1 = '' OR batch = $1 ORDER BY batch`, batch)
	if err != nil {
		return nil, fmt.Errorf("query batch summary: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchSummary, error) {
		var b BatchSummary
		err := r.Scan(&b.Batch, &b.Jobs, &b.Queued, &b.Valid, &b.Invalid, &b.Failed, &b.Rejected, &b.Dead, &b.Finished,
			&b.FirstAttemptValid, &b.Repaired, &b.ValidRate, &b.FirstAttemptValidRate, &b.RepairRate,
			&b.MeanAttempts, &b.TokensIn, &b.TokensOut, &b.TokensCached, &b.CostUSD,
			&b.TokensPerValidJob, &b.CostPerValidJob, &b.P50WallMS, &b.P95WallMS, &b.Cancelled, &b.OverBudget, &b.Runs, &b.HasWall)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("query batch summary: %w", err)
	}
	return out, nil
}

// ClassCount is one row of the failure_classes view.
type ClassCount struct {
	// Batch, Model, AttemptNo and Class identify the group.
	Batch, Model string
	AttemptNo    int
	Class        string
	// Attempts counts the attempts in the group.
	Attempts int64
	// Share is Attempts over every attempt with the same batch, model and number.
	Share float64
}

// FailureClasses returns failure_classes for batch ("" = all), ordered by
// batch, model, attempt number and descending count.
func (s *Store) FailureClasses(ctx context.Context, batch string) ([]ClassCount, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT batch, model, attempt_no, class, attempts, share FROM failure_classes
		WHERE $1 = '' OR batch = $1
		ORDER BY batch, model, attempt_no, attempts DESC, class`, batch)
	if err != nil {
		return nil, fmt.Errorf("query failure classes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClassCount, error) {
		var c ClassCount
		err := r.Scan(&c.Batch, &c.Model, &c.AttemptNo, &c.Class, &c.Attempts, &c.Share)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("query failure classes: %w", err)
	}
	return out, nil
}

// PathCount is one row of the error_paths view.
type PathCount struct {
	// Batch, Path (JSON pointer, array indices as '*'), Keyword and Class
	// identify the group.
	Batch, Path, Keyword, Class string
	// Errors counts error entries; Jobs counts distinct jobs with one.
	Errors, Jobs int64
}

// TopErrorPaths returns the limit most frequent (path, keyword) errors of
// batch ("" = all), most frequent first. limit <= 0 means all.
func (s *Store) TopErrorPaths(ctx context.Context, batch string, limit int) ([]PathCount, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	lim := limitArg(limit)
	rows, err := s.pool.Query(ctx, `
		SELECT batch, path, keyword, class, errors, jobs FROM error_paths
		WHERE $1 = '' OR batch = $1
		ORDER BY errors DESC, batch, path, keyword LIMIT $2`, batch, lim)
	if err != nil {
		return nil, fmt.Errorf("query error paths: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PathCount, error) {
		var p PathCount
		err := r.Scan(&p.Batch, &p.Path, &p.Keyword, &p.Class, &p.Errors, &p.Jobs)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("query error paths: %w", err)
	}
	return out, nil
}

// RepairStep is one row of the repair_effectiveness view.
type RepairStep struct {
	// Batch, AttemptNo and Class (of attempt AttemptNo) identify the group.
	Batch     string
	AttemptNo int
	Class     string
	// Failed counts jobs whose attempt AttemptNo failed with Class; Retried
	// those that made attempt AttemptNo+1; ValidNext those valid at it.
	Failed, Retried, ValidNext int64
	// Rate is ValidNext / Retried, nil when none was retried.
	Rate *float64
}

// RepairEffectiveness returns repair_effectiveness for batch ("" = all),
// ordered by batch, attempt number and class.
func (s *Store) RepairEffectiveness(ctx context.Context, batch string) ([]RepairStep, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT batch, attempt_no, class, failed, retried, valid_next, repair_rate FROM repair_effectiveness
		WHERE $1 = '' OR batch = $1
		ORDER BY batch, attempt_no, class`, batch)
	if err != nil {
		return nil, fmt.Errorf("query repair effectiveness: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RepairStep, error) {
		var p RepairStep
		err := r.Scan(&p.Batch, &p.AttemptNo, &p.Class, &p.Failed, &p.Retried, &p.ValidNext, &p.Rate)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("query repair effectiveness: %w", err)
	}
	return out, nil
}

// JobRecord is a job row.
type JobRecord struct {
	NewJob
	// Status is the job's status.
	Status fixpoint.Status
	// Published reports whether enqueue published the job; PublishedAt when.
	Published   bool
	PublishedAt time.Time
	// Value is the final value, nil for none.
	Value json.RawMessage
	// Error and FinalClass explain a job that is not valid.
	Error, FinalClass string
	// Payload is the raw message of a rejected or dead job.
	Payload []byte
	// Attempts, Calls, FirstAttemptValid and RepairedLocally summarize the attempts.
	Attempts, Calls                    int
	FirstAttemptValid, RepairedLocally bool
	// TokensIn, TokensOut, TokensCached and CostUSD are the job's totals.
	TokensIn, TokensOut, TokensCached int64
	CostUSD                           float64
	// CreatedAt, StartedAt and FinishedAt are zero when unknown.
	CreatedAt, StartedAt, FinishedAt time.Time
	// WallMS is the wall time; Deliveries the finishing delivery count.
	WallMS     int64
	Deliveries int
	// Run is the batch run the job is in (1 until it is requeued).
	Run int
	// Purged, when not nil, says that report purge deleted the job's
	// attempts: none shown is not none made.
	Purged *Purge
}

// Purge is when report purge deleted a job's attempts (the last time),
// and how many attempts and interrupted calls went in all.
type Purge struct {
	At                    time.Time
	Attempts, Interrupted int
}

// Job returns a job and the attempts of its current run in order, or
// ErrNotFound (earlier runs' outcomes are in job_runs). Each
// attempt's Request is the whole request as sent, system prompt first (read
// through attempt_requests); System is nil.
func (s *Store) Job(ctx context.Context, id string) (*JobRecord, []Attempt, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var j JobRecord
	var meta string
	var value *string
	var publishedAt, startedAt, finishedAt *time.Time
	var wall *int64
	err := s.pool.QueryRow(ctx, `
		SELECT id, coalesce(batch, ''), row_no, coalesce(schema_hash, ''), prompt, provider, model, mode, strategy,
		       metadata::text, status, published, published_at, value::text, error, final_class, payload,
		       attempts, calls, first_attempt_valid, repaired_locally, tokens_in, tokens_out, tokens_cached,
		       cost_usd::float8, created_at, started_at, finished_at, wall_ms, deliveries, run, coalesce(document_hash, '')
		FROM jobs WHERE id = $1`, id).Scan(
		&j.ID, &j.Batch, &j.RowNo, &j.SchemaHash, &j.Prompt, &j.Provider, &j.Model, &j.Mode, &j.Strategy,
		&meta, &j.Status, &j.Published, &publishedAt, &value, &j.Error, &j.FinalClass, &j.Payload,
		&j.Attempts, &j.Calls, &j.FirstAttemptValid, &j.RepairedLocally, &j.TokensIn, &j.TokensOut, &j.TokensCached,
		&j.CostUSD, &j.CreatedAt, &startedAt, &finishedAt, &wall, &j.Deliveries, &j.Run, &j.DocumentHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("get job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get job %s: %w", id, err)
	}
	j.Metadata = json.RawMessage(meta)
	if value != nil {
		j.Value = json.RawMessage(*value)
	}
	j.PublishedAt, j.StartedAt, j.FinishedAt = deref(publishedAt), deref(startedAt), deref(finishedAt)
	if wall != nil {
		j.WallMS = *wall
	}
	if j.Purged, err = s.purged(ctx, id); err != nil {
		return nil, nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+attemptSelect+attemptSelectFrom+`
		WHERE a.job_id = $1 AND a.run = $2 ORDER BY a.attempt_no`, id, j.Run)
	if err != nil {
		return nil, nil, fmt.Errorf("get attempts of job %s: %w", id, err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) { return scanAttempt(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("get attempts of job %s: %w", id, err)
	}
	return &j, attempts, nil
}

// attemptSelect are the columns of an attempt scanAttempt reads, from
// attemptSelectFrom: attempts a with their whole request (attempt_requests r).
const (
	attemptSelect = `a.attempt_no, r.request::text, request_hash, raw, source, repairs::text, errors::text, class, valid,
		       repaired_locally, finish_reason, latency_ms, tokens_in, tokens_out, tokens_cached,
		       transport_retries, retry_classes::text, provider_status, provider_error, model, request_id, started_at,
		       feedback, provider_class, price_basis, tokens_cache_write, coalesce(cost_usd, 0)::float8, coalesce(wave_id, 0),
		       coerced, patch_outcome, unpriced, provider_code, evidence::text, warnings::text, coalesce(a.schema_hash, ''),
		       a.service_tier, ` + stepSelect
	attemptSelectFrom = `
		FROM attempts a JOIN attempt_requests r ON r.job_id = a.job_id AND r.run = a.run AND r.attempt_no = a.attempt_no`
)

// scanAttempt reads a row of attemptSelect, after the columns of first
// (selected before them).
func scanAttempt(r pgx.CollectableRow, first ...any) (Attempt, error) {
	var a Attempt
	var req, repairs, retryClasses, evidence, warnings *string
	var errs string
	var started *time.Time
	var tier *string
	var step stepScan
	err := r.Scan(append(append(first, &a.No, &req, &a.RequestHash, &a.Raw, &a.Source, &repairs, &errs, &a.Class, &a.Valid,
		&a.RepairedLocally, &a.FinishReason, &a.LatencyMS, &a.TokensIn, &a.TokensOut, &a.TokensCached,
		&a.TransportRetries, &retryClasses, &a.ProviderStatus, &a.ProviderError, &a.Model, &a.RequestID, &started,
		&a.Feedback, &a.ProviderClass, &a.PriceBasis, &a.TokensCacheWrite, &a.CostUSD, &a.WaveID, &a.Coerced, &a.PatchOutcome, &a.Unpriced, &a.ProviderCode,
		&evidence, &warnings, &a.SchemaHash, &tier), step.dest()...)...)
	step.set(&a)
	a.ServiceTier = deref(tier)
	a.Request, a.Repairs, a.RetryClasses = rawPtr(req), rawPtr(repairs), rawPtr(retryClasses)
	a.Evidence, a.Warnings = rawPtr(evidence), rawPtr(warnings)
	a.Errors = json.RawMessage(errs)
	a.StartedAt = deref(started)
	return a, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func rawPtr(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// ExportRow is one job as Export streams it.
type ExportRow struct {
	// ID and RowNo identify the job and its input row.
	ID    string
	RowNo int
	// Status is the job's status.
	Status fixpoint.Status
	// Metadata is the input row (a JSON object); Value the final value
	// (of a job that is not valid, its last candidate), or nil.
	Metadata, Value json.RawMessage
	// Error explains a job that is not valid.
	Error string
	// Errors are the validation errors of a final job that is not valid:
	// its latest run's revalidation's, else that run's last attempt's, a
	// JSON array of {path, keyword, class, message} as in attempts.errors:
	// what its Value lacks. Nil when there are none: a valid or queued job, one with no
	// attempt, or one whose last attempt got no reply.
	Errors json.RawMessage
	// Evidence, with ExportOptions.Evidence, is the grades of the strings
	// and numbers of the job's final check (its latest run's revalidation,
	// else that run's valid attempt, else its last), a JSON array of {path, grade,
	// start, end} as in attempts.evidence (start and end code point
	// offsets into the job's source text, evidence.JobSource). Nil when the
	// evidence stage did not grade it, or not asked for.
	Evidence json.RawMessage
	// Steps, with ExportOptions.Steps, is a document job's steps: its
	// latest run's attempts that have one, in order, a JSON array of
	// {no, step, chunk: {n, start, end} or null, fields, class, valid,
	// tool_calls, conflicts} (the attempts' columns, null where they hold
	// none). Nil for a job with no step (another strategy's), or not asked
	// for.
	Steps json.RawMessage
}

// ExportOptions choose what ExportWith adds to each row.
type ExportOptions struct {
	// Evidence reads each job's grades (ExportRow.Evidence): one more
	// lookup on the attempts' primary key per job.
	Evidence bool
	// Steps reads each job's steps (ExportRow.Steps): one more lookup on
	// the attempts' primary key per job.
	Steps bool
}

// exportSQL reads a batch's jobs in row order with the errors of each
// final job that is not valid (its latest run's revalidation, else that
// run's last attempt): a lookup on a primary key or two per such job; with $2, the evidence of each job's final
// check (its latest run's revalidation, else that run's valid attempt,
// else its last), as the evidence_grades view counts it; with $3, the
// steps of its latest run.
const exportSQL = `
SELECT j.id, j.row_no, j.status, j.metadata::text, j.value::text, j.error,
       CASE WHEN j.status NOT IN ('valid', 'queued') THEN coalesce(
           (SELECT nullif(r.errors, '[]')::text FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run),
           (SELECT nullif(a.errors, '[]')::text FROM attempts a WHERE a.job_id = j.id AND a.run = j.run
            ORDER BY a.attempt_no DESC LIMIT 1))
       END,
       CASE WHEN $2 THEN coalesce(
           (SELECT r.evidence::text FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run),
           (SELECT a.evidence::text FROM attempts a WHERE a.job_id = j.id AND a.run = j.run
            ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1))
       END,
       CASE WHEN $3 THEN (
           SELECT jsonb_agg(jsonb_build_object('no', a.attempt_no, 'step', a.step,
                      'chunk', CASE WHEN a.chunk_n IS NOT NULL THEN
                                   jsonb_build_object('n', a.chunk_n, 'start', a.chunk_start, 'end', a.chunk_end) END,
                      'fields', a.fields, 'class', a.class, 'valid', a.valid,
                      'tool_calls', a.tool_calls, 'conflicts', a.conflicts) ORDER BY a.attempt_no)::text
           FROM attempts a WHERE a.job_id = j.id AND a.run = j.run AND a.step IS NOT NULL)
       END
FROM jobs j WHERE j.batch = $1 ORDER BY j.row_no, j.id`

// Export is ExportWith without options.
func (s *Store) Export(ctx context.Context, batch string, fn func(ExportRow) error) error {
	return s.ExportWith(ctx, batch, ExportOptions{}, fn)
}

// ExportWith streams every job of batch in row order to fn without loading
// them all in memory. It stops at and returns the first error fn returns
// (wrapped). It does not apply the statement timeout: give ctx a deadline
// if needed.
func (s *Store) ExportWith(ctx context.Context, batch string, opts ExportOptions, fn func(ExportRow) error) error {
	rows, err := s.pool.Query(ctx, exportSQL, batch, opts.Evidence, opts.Steps)
	if err != nil {
		return fmt.Errorf("export batch %s: %w", batch, err)
	}
	defer rows.Close()
	for rows.Next() {
		var e ExportRow
		var meta string
		var value, errs, evidence, steps *string
		if err := rows.Scan(&e.ID, &e.RowNo, &e.Status, &meta, &value, &e.Error, &errs, &evidence, &steps); err != nil {
			return fmt.Errorf("export batch %s: %w", batch, err)
		}
		e.Metadata, e.Value, e.Errors, e.Evidence = json.RawMessage(meta), rawPtr(value), rawPtr(errs), rawPtr(evidence)
		e.Steps = rawPtr(steps)
		if err := fn(e); err != nil {
			return fmt.Errorf("export batch %s: %w", batch, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export batch %s: %w", batch, err)
	}
	return nil
}

// ExportShape is what a batch's export is shaped by: the columns of its input
// and the top-level properties of its schema.
type ExportShape struct {
	// InputColumns are the input rows' keys: the batch's recorded
	// input_columns in the file's order, then every other key found in the
	// batch's rows, sorted. Without recorded columns (a batch a worker made,
	// for job messages enqueue did not record) it is every key found,
	// sorted. Empty for a batch with no jobs and no recorded columns.
	InputColumns []string
	// SchemaHash is the batch's recorded schema_hash, else the schema_hash of
	// one of its jobs; "" when neither names one.
	SchemaHash string
	// Properties are the names of the schema's top-level "properties",
	// sorted: the ledger keeps a schema in canonical form (keys sorted), so
	// the order it was written in is not known. Nil when the schema has no
	// "properties" object or there is no schema.
	Properties []string
}

// ExportShape returns the shape of batch's export, or ErrNotFound when
// there is no such batch. A batch with no jobs is not an error. Like Export
// it reads every job row of the batch (for the keys of their input) and
// does not apply the statement timeout: give ctx a deadline if needed.
func (s *Store) ExportShape(ctx context.Context, batch string) (ExportShape, error) {
	var sh ExportShape
	var cols, body *string
	var hash *string
	err := s.pool.QueryRow(ctx, `
		SELECT b.input_columns::text, h.hash, sc.body::text
		FROM batches b
		LEFT JOIN LATERAL (
		    SELECT coalesce(b.schema_hash,
		                    (SELECT j.schema_hash FROM jobs j
		                     WHERE j.batch = b.name AND j.schema_hash IS NOT NULL LIMIT 1)) AS hash
		) h ON true
		LEFT JOIN schemas sc ON sc.hash = h.hash
		WHERE b.name = $1`, batch).Scan(&cols, &hash, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return sh, fmt.Errorf("export shape of batch %s: %w", batch, ErrNotFound)
	}
	if err != nil {
		return sh, fmt.Errorf("export shape of batch %s: %w", batch, err)
	}
	sh.SchemaHash = deref(hash)
	seen := map[string]bool{}
	if cols != nil {
		var recorded []string
		if err := json.Unmarshal([]byte(*cols), &recorded); err != nil {
			return sh, fmt.Errorf("export shape of batch %s: input_columns: %w", batch, err)
		}
		for _, c := range recorded {
			if !seen[c] {
				seen[c] = true
				sh.InputColumns = append(sh.InputColumns, c)
			}
		}
	}
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT k
		FROM jobs j,
		     jsonb_object_keys(CASE WHEN jsonb_typeof(j.metadata) = 'object' THEN j.metadata ELSE '{}' END) k
		WHERE j.batch = $1`, batch)
	if err != nil {
		return sh, fmt.Errorf("export shape of batch %s: input keys: %w", batch, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return sh, fmt.Errorf("export shape of batch %s: input keys: %w", batch, err)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			sh.InputColumns = append(sh.InputColumns, k)
		}
	}
	if body != nil {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		// A schema that is not an object (true, false) or whose "properties"
		// is not an object has no property columns.
		if json.Unmarshal([]byte(*body), &schema) == nil {
			for p := range schema.Properties {
				sh.Properties = append(sh.Properties, p)
			}
			sort.Strings(sh.Properties)
		}
	}
	return sh, nil
}

// Progress counts a batch's jobs by status.
type Progress struct {
	// Total counts every job row; the other fields split it by status.
	Total, Queued, Valid, Invalid, Failed, Rejected, Dead, Cancelled, OverBudget int
	// Unpublished counts the queued jobs never published: recorded by an
	// enqueue that stopped before it published them (--resume does).
	Unpublished int
	// Recording is set while enqueue runs have not finished recording the
	// batch's rows (see Batch.Recording): more jobs may come (Live), or
	// the runs were killed and the rest of their datasets is missing.
	Recording *Recording
}

// Done reports whether every job is final (and there is at least one).
func (p Progress) Done() bool { return p.Total > 0 && p.Queued == 0 }

// Queued counts the jobs of batch still queued. It reads only the partial
// index of queued jobs, so it stays cheap on a large batch as it drains:
// for polling at a high rate while workers write.
func (s *Store) Queued(ctx context.Context, batch string) (int64, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE batch = $1 AND status = 'queued'`, batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count queued jobs of %s: %w", batch, err)
	}
	return n, nil
}

// Progress counts the jobs of batch by status (for `report wait`).
func (s *Store) Progress(ctx context.Context, batch string) (Progress, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var p Progress
	// The counts from the batch's rollup, the unpublished jobs through
	// their partial index (few, but while enqueue records the batch).
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(r.jobs, 0), coalesce(r.queued, 0), coalesce(r.valid, 0), coalesce(r.invalid, 0),
		       coalesce(r.failed, 0), coalesce(r.rejected, 0), coalesce(r.dead, 0), coalesce(r.cancelled, 0),
		       coalesce(r.over_budget, 0),
		       (SELECT count(*) FROM jobs WHERE batch = $1 AND NOT published AND status = 'queued')
		FROM (SELECT $1::text AS batch) b LEFT JOIN batch_rollups r USING (batch)`, batch).
		Scan(&p.Total, &p.Queued, &p.Valid, &p.Invalid, &p.Failed, &p.Rejected, &p.Dead, &p.Cancelled, &p.OverBudget, &p.Unpublished)
	if err != nil {
		return Progress{}, fmt.Errorf("count progress of %s: %w", batch, err)
	}
	if p.Recording, err = s.recording(ctx, batch); err != nil {
		return Progress{}, err
	}
	return p, nil
}

// OwedByQueue counts the jobs of batch whose messages the queue should
// hold: queued and published, and not placed in a wave (a provider batch
// owns its jobs from when it is recorded, their messages acked, until it
// hands them back to the queue or finishes them, its results recorded or
// not). Counted from the batch's rollup, less the jobs the partial indexes
// of unpublished jobs and of queued jobs in waves find. When the queue holds no message of the batch while this is not 0,
// those jobs were lost from it (its data lost, or published to another
// queue) and only enqueue --resume finishes them.
func (s *Store) OwedByQueue(ctx context.Context, batch string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce((SELECT queued FROM batch_rollups WHERE batch = $1), 0)
		       - (SELECT count(*) FROM jobs WHERE batch = $1 AND NOT published AND status = 'queued')
		       - (SELECT count(*) FROM jobs WHERE batch = $1 AND status = 'queued' AND published AND wave_id IS NOT NULL)`,
		batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs of %s the queue holds: %w", batch, err)
	}
	return n, nil
}

// InWaves returns how many jobs of batch are queued in a wave (a provider
// batch holds them), counted in one statement: the difference of two
// counts read apart (queued, then those the queue holds) counted jobs
// finishing between the reads, and unpublished ones, as in waves.
func (s *Store) InWaves(ctx context.Context, batch string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE batch = $1 AND status = 'queued' AND wave_id IS NOT NULL`, batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs of %s in waves: %w", batch, err)
	}
	return n, nil
}

// Counts holds cross-table totals of a batch for invariant checks: in a
// consistent ledger the job token totals equal the sums over their attempts
// and every job's attempts column equals its number of attempt rows.
type Counts struct {
	// Jobs counts job rows; Final those with a final status.
	Jobs, Final int64
	// AttemptRows counts attempt rows.
	AttemptRows int64
	// JobTokensIn/Out/Cached sum the jobs' token totals.
	JobTokensIn, JobTokensOut, JobTokensCached int64
	// AttemptTokensIn/Out/Cached sum the attempts' token counts.
	AttemptTokensIn, AttemptTokensOut, AttemptTokensCached int64
	// AttemptsMismatch counts finished jobs whose attempts column differs
	// from their number of attempt rows.
	AttemptsMismatch int64
	// CostMismatch counts finished jobs whose cost differs from the sum of
	// their attempts' costs, to the ledger's last decimal.
	CostMismatch int64
	// PromptsMissing counts attempts whose system prompt is not in
	// system_prompts (there is no foreign key; the save writes both).
	PromptsMissing int64
	// Published counts jobs marked published.
	Published int64
	// InterruptedRows counts interrupted_attempts rows (calls of deliveries
	// that ended without a final result) and InterruptedRetries their
	// transport retries.
	InterruptedRows, InterruptedRetries int64
	// InterruptedPromptsMissing counts interrupted attempts whose system
	// prompt is not in system_prompts.
	InterruptedPromptsMissing int64
	// Calls counts every call the ledger records for the batch: attempt
	// rows of every run and interrupted rows, each with its transport
	// retries.
	Calls int64
}

// Counts returns the invariant totals of batch.
func (s *Store) Counts(ctx context.Context, batch string) (Counts, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var c Counts
	err := s.pool.QueryRow(ctx, `
		WITH a AS (
		    SELECT a.job_id, count(*) AS n, sum(a.tokens_in) AS tin, sum(a.tokens_out) AS tout, sum(a.cost_usd) AS cost,
		           sum(a.tokens_cached) AS tcached,
		           count(*) FILTER (WHERE a.system_sha256 IS NOT NULL AND NOT EXISTS (
		               SELECT 1 FROM system_prompts p WHERE p.sha256 = a.system_sha256)) AS missing
		    FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run WHERE j.batch = $1 GROUP BY a.job_id
		)
		SELECT count(*),
		       count(*) FILTER (WHERE j.status <> 'queued'),
		       coalesce(sum(a.n), 0)::int8,
		       coalesce(sum(j.tokens_in), 0)::int8, coalesce(sum(j.tokens_out), 0)::int8,
		       coalesce(sum(j.tokens_cached), 0)::int8,
		       coalesce(sum(a.tin), 0)::int8, coalesce(sum(a.tout), 0)::int8, coalesce(sum(a.tcached), 0)::int8,
		       count(*) FILTER (WHERE j.status IN ('valid', 'invalid', 'failed') AND j.attempts <> coalesce(a.n, 0)),
		       count(*) FILTER (WHERE j.published),
		       coalesce(sum(a.missing), 0)::int8,
		       count(*) FILTER (WHERE j.status IN ('valid', 'invalid', 'failed') AND j.cost_usd <> coalesce(a.cost, 0))
		FROM jobs j LEFT JOIN a ON a.job_id = j.id
		WHERE j.batch = $1`, batch).Scan(
		&c.Jobs, &c.Final, &c.AttemptRows, &c.JobTokensIn, &c.JobTokensOut, &c.JobTokensCached,
		&c.AttemptTokensIn, &c.AttemptTokensOut, &c.AttemptTokensCached, &c.AttemptsMismatch, &c.Published, &c.PromptsMissing,
		&c.CostMismatch)
	if err != nil {
		return Counts{}, fmt.Errorf("count invariants of %s: %w", batch, err)
	}
	err = s.pool.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(a.transport_retries), 0)::int8,
		       count(*) FILTER (WHERE a.system_sha256 IS NOT NULL AND NOT EXISTS (
		           SELECT 1 FROM system_prompts p WHERE p.sha256 = a.system_sha256))
		FROM interrupted_attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = $1`, batch).Scan(
		&c.InterruptedRows, &c.InterruptedRetries, &c.InterruptedPromptsMissing)
	if err != nil {
		return Counts{}, fmt.Errorf("count interrupted attempts of %s: %w", batch, err)
	}
	err = s.pool.QueryRow(ctx, `
		SELECT coalesce(count(*) + sum(a.transport_retries), 0)::int8
		FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = $1`, batch).Scan(&c.Calls)
	if err != nil {
		return Counts{}, fmt.Errorf("count calls of %s: %w", batch, err)
	}
	c.Calls += c.InterruptedRows + c.InterruptedRetries
	return c, nil
}

// Price is one row of model_prices, in US dollars per million tokens.
type Price struct {
	// Model is a model name, or a prefix pattern ending in '*'.
	Model string
	// InputPerMTok, OutputPerMTok and CachedInputPerMTok are the prices.
	InputPerMTok, OutputPerMTok, CachedInputPerMTok float64
	// CacheWritePerMTok and the Batch prices are the other rates charged
	// (see PutModelPrices); zero in a row the migration wrote is filled in
	// by it.
	CacheWritePerMTok                                                                      float64
	BatchInputPerMTok, BatchOutputPerMTok, BatchCachedInputPerMTok, BatchCacheWritePerMTok float64
	// Source says who wrote the row: "migration" or "worker".
	Source string
}

// PutModelPrices writes what a worker charges into model_prices, one row a
// model, replacing the row of each model it names (source 'worker') and
// the rows the migration seeded: SQL that reprices attempts joins the
// prices charged. Other rows (another worker's --prices) stay. The table
// is the current price list: an attempt's cost_usd is what it was charged
// then.
func (s *Store) PutModelPrices(ctx context.Context, prices []Price) error {
	if len(prices) == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// The rows the migration seeded are superseded by a worker's table: one
	// of them priced a model no worker charges for.
	if _, err := s.pool.Exec(ctx, `DELETE FROM model_prices WHERE source = 'migration'`); err != nil {
		return fmt.Errorf("write model prices: %w", err)
	}
	var models []string
	cols := make([][]float64, 8)
	for _, p := range prices {
		models = append(models, p.Model)
		for i, v := range []float64{p.InputPerMTok, p.OutputPerMTok, p.CachedInputPerMTok, p.CacheWritePerMTok,
			p.BatchInputPerMTok, p.BatchOutputPerMTok, p.BatchCachedInputPerMTok, p.BatchCacheWritePerMTok} {
			cols[i] = append(cols[i], v)
		}
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO model_prices (model, input_per_mtok, output_per_mtok, cached_input_per_mtok, cache_write_per_mtok,
			batch_input_per_mtok, batch_output_per_mtok, batch_cached_input_per_mtok, batch_cache_write_per_mtok, source, updated_at)
		SELECT m, i, o, c, w, bi, bo, bc, bw, 'worker', now()
		FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $8::float8[], $9::float8[])
			AS t(m, i, o, c, w, bi, bo, bc, bw)
		ON CONFLICT (model) DO UPDATE SET input_per_mtok = EXCLUDED.input_per_mtok, output_per_mtok = EXCLUDED.output_per_mtok,
			cached_input_per_mtok = EXCLUDED.cached_input_per_mtok, cache_write_per_mtok = EXCLUDED.cache_write_per_mtok,
			batch_input_per_mtok = EXCLUDED.batch_input_per_mtok, batch_output_per_mtok = EXCLUDED.batch_output_per_mtok,
			batch_cached_input_per_mtok = EXCLUDED.batch_cached_input_per_mtok, batch_cache_write_per_mtok = EXCLUDED.batch_cache_write_per_mtok,
			source = 'worker', updated_at = now()`,
		models, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7])
	if err != nil {
		return fmt.Errorf("write model prices: %w", err)
	}
	return nil
}

// Prices returns the model_prices table ordered by model.
func (s *Store) Prices(ctx context.Context) ([]Price, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT model, input_per_mtok::float8, output_per_mtok::float8, cached_input_per_mtok::float8, cache_write_per_mtok::float8,
		       batch_input_per_mtok::float8, batch_output_per_mtok::float8, batch_cached_input_per_mtok::float8,
		       batch_cache_write_per_mtok::float8, source
		FROM model_prices ORDER BY model`)
	if err != nil {
		return nil, fmt.Errorf("query model prices: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Price, error) {
		var p Price
		err := r.Scan(&p.Model, &p.InputPerMTok, &p.OutputPerMTok, &p.CachedInputPerMTok, &p.CacheWritePerMTok,
			&p.BatchInputPerMTok, &p.BatchOutputPerMTok, &p.BatchCachedInputPerMTok, &p.BatchCacheWritePerMTok, &p.Source)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("query model prices: %w", err)
	}
	return out, nil
}

// limitArg is a LIMIT parameter: limit, or NULL (no limit) when limit <= 0.
func limitArg(limit int) *int {
	if limit <= 0 {
		return nil
	}
	return &limit
}

// UnpricedCount counts the attempts of a batch on one model that had no
// price in the worker's table (their cost counts 0 for want of one).
type UnpricedCount struct {
	Batch, Model string
	Attempts     int64
}

// UnpricedAttempts returns the unpriced attempts of the batches' latest
// runs by batch and model, for batch ("" = all).
func (s *Store) UnpricedAttempts(ctx context.Context, batch string) ([]UnpricedCount, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// batch_rollup_current_kinds (migration 010) keeps them by their job's
	// model, so that they stay counted once report purge deleted them.
	rows, err := s.pool.Query(ctx, `
		SELECT batch, name, n FROM batch_rollup_current_kinds
		WHERE kind = 'unpriced' AND n > 0 AND ($1 = '' OR batch = $1)
		ORDER BY batch, name`, batch)
	if err != nil {
		return nil, fmt.Errorf("count unpriced attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UnpricedCount, error) {
		var u UnpricedCount
		return u, r.Scan(&u.Batch, &u.Model, &u.Attempts)
	})
	if err != nil {
		return nil, fmt.Errorf("count unpriced attempts: %w", err)
	}
	return out, nil
}

// BatchCost is what a batch cost, from batch_spend: the calls recorded as
// attempts of every run, and those of deliveries that ended without a
// result.
type BatchCost struct {
	// Batch names the batch.
	Batch string
	// FinalUSD is the cost of the calls recorded as attempts, every run's;
	// EarlierRunsUSD the part of it in runs a requeue replaced.
	FinalUSD, EarlierRunsUSD float64
	// InterruptedCalls and InterruptedUSD are the calls whose delivery ended
	// without a result (shutdown, lost to another delivery, cancelled).
	InterruptedCalls int64
	InterruptedUSD   float64
	// TotalUSD is FinalUSD + InterruptedUSD.
	TotalUSD float64
}

// BatchCosts returns what each batch cost (one batch when batch is set),
// in batch order.
func (s *Store) BatchCosts(ctx context.Context, batch string) ([]BatchCost, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT batch, final_cost_usd, earlier_runs_cost_usd, interrupted_calls, interrupted_cost_usd::float8, cost_usd::float8
		FROM batch_spend WHERE $1 = '' OR batch = $1 ORDER BY batch`, batch)
	if err != nil {
		return nil, fmt.Errorf("batch cost: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchCost, error) {
		var c BatchCost
		err := r.Scan(&c.Batch, &c.FinalUSD, &c.EarlierRunsUSD, &c.InterruptedCalls, &c.InterruptedUSD, &c.TotalUSD)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("batch cost: %w", err)
	}
	return out, nil
}

// InterruptedAnswered counts the calls of batch kept apart from its results
// (interrupted_attempts) that got a reply: the others never ran (a provider
// batch's requests cancelled with it) and cost nothing. Read from
// batch_rollup_spend.
func (s *Store) InterruptedAnswered(ctx context.Context, batch string) (int64, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce((SELECT interrupted_answered FROM batch_rollup_spend WHERE batch = $1), 0)`, batch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count answered interrupted calls of %s: %w", batch, err)
	}
	return n, nil
}

// EndReason is how many jobs of a batch ended with one status and error
// (its first 200 characters, … marking a cut: at 120 the cap's reason lost
// the end of its advice).
type EndReason struct {
	Status, Error string
	Jobs          int64
	// Reasons and AllJobs count every reason of the batch and its jobs,
	// the rows past the limit included (the same on every row).
	Reasons, AllJobs int64
}

// EndReasons returns, most frequent first, why the jobs of a batch that
// ended dead, rejected, failed, cancelled or over budget ended so: jobs the
// attempt tables may not show at all (a dead job never reached the
// provider, a cancelled one may never have run).
func (s *Store) EndReasons(ctx context.Context, batch string, limit int) ([]EndReason, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// batch_rollup_end_reasons (migration 010) keeps the ended jobs by
	// status and reason: the error with its amounts folded
	// (fixpoint_end_reason), one example error of each.
	rows, err := s.pool.Query(ctx, `
		SELECT status, CASE WHEN length(example) > 200 THEN left(example, 199) || '…' ELSE example END,
			jobs, count(*) OVER (), sum(jobs) OVER ()
		FROM batch_rollup_end_reasons
		WHERE batch = $1 AND jobs > 0
		ORDER BY 3 DESC, 1, 2 LIMIT $2`, batch, limit)
	if err != nil {
		return nil, fmt.Errorf("end reasons of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndReason, error) {
		var e EndReason
		err := r.Scan(&e.Status, &e.Error, &e.Jobs, &e.Reasons, &e.AllJobs)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("end reasons of %s: %w", batch, err)
	}
	return out, nil
}

// MissingModel is a lane (provider and model) of a batch whose provider
// answered that it has no such model (Ollama's 404 "model not found",
// OpenAI's model_not_found): a set-up error of the lane, whose jobs
// workers hold queued, not a failure of each job.
type MissingModel struct {
	Batch, Provider, Model string
	// Calls counts the calls answered so, attempts and interrupted
	// calls alike; LastCall is when the last one started.
	Calls    int64
	LastCall time.Time
	// Queued counts the lane's jobs of the batch still queued.
	Queued int64
}

// MissingModels returns the lanes of batch ("" = every batch) whose
// provider answered a call with model_not_found, by batch, provider and
// model.
func (s *Store) MissingModels(ctx context.Context, batch string) ([]MissingModel, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		WITH c AS (
		    SELECT job_id, started_at FROM interrupted_attempts WHERE provider_class = 'model_not_found'
		    UNION ALL
		    SELECT job_id, started_at FROM attempts WHERE provider_class = 'model_not_found'
		), lanes AS (
		    SELECT coalesce(j.batch, '') AS batch, j.provider, j.model, count(*) AS calls, max(c.started_at) AS last_call
		    FROM c JOIN jobs j ON j.id = c.job_id
		    WHERE $1 = '' OR j.batch = $1
		    GROUP BY 1, 2, 3
		)
		SELECT l.batch, l.provider, l.model, l.calls, l.last_call,
		       (SELECT count(*) FROM jobs q WHERE q.batch IS NOT DISTINCT FROM nullif(l.batch, '') AND q.provider = l.provider
		                                      AND q.model = l.model AND q.status = 'queued')
		FROM lanes l ORDER BY 1, 2, 3`, batch)
	if err != nil {
		return nil, fmt.Errorf("missing models: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MissingModel, error) {
		var m MissingModel
		var last *time.Time
		err := r.Scan(&m.Batch, &m.Provider, &m.Model, &m.Calls, &last, &m.Queued)
		m.LastCall = deref(last)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("missing models: %w", err)
	}
	return out, nil
}
