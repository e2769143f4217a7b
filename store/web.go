package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/jackc/pgx/v5"
)

// The queries of the web dashboard (package web). Each is bounded: a LIMIT
// on every list, and the Store's statement timeout unless the caller's ctx
// has a shorter deadline (the dashboard gives every request one).

// BatchOverview is one batch as the dashboard's batch list shows it.
type BatchOverview struct {
	// Name identifies the batch; CreatedAt is when it was first recorded.
	Name      string
	CreatedAt time.Time
	// Provider and Model are the batch's settings as enqueue recorded them
	// ("" for a batch a worker made).
	Provider, Model string
	// Jobs counts the job rows; the other counts split them by status.
	Jobs, Queued, Valid, Invalid, Failed, Rejected, Dead, Cancelled, OverBudget int64
	// FirstAttemptValid counts the valid jobs valid on their first answered
	// attempt of their latest run (batch_summary looks further back for a
	// requeued job; the list reads the job rows only, to stay cheap).
	FirstAttemptValid int64
	// CostUSD and Tokens are what the batch spent: its spend counter when
	// it is capped, else the sum over its jobs' latest runs.
	CostUSD float64
	Tokens  int64
	// MaxCostUSD and MaxTotalTokens are its spend caps, nil for none.
	MaxCostUSD     *float64
	MaxTotalTokens *int64
	// StartedAt is when its first job started; FinishedAt when its last
	// finished job finished (zero: none yet). CancelledAt is set by enqueue
	// cancel.
	StartedAt, FinishedAt, CancelledAt time.Time
	// OpenWaves counts its provider batches not yet done or failed.
	OpenWaves int64
	// BadRows counts the rows of its datasets that enqueue found bad and
	// left out (--max-bad-rows let them pass), as BadRows does.
	BadRows int64
}

// Finished counts the jobs with a final status.
func (b BatchOverview) Finished() int64 { return b.Jobs - b.Queued }

// Running reports whether jobs are still queued in a batch not cancelled.
func (b BatchOverview) Running() bool { return b.Queued > 0 && b.CancelledAt.IsZero() }

// ValidRate is Valid / Finished, 0 when nothing finished.
func (b BatchOverview) ValidRate() float64 { return ratio(b.Valid, b.Finished()) }

// FirstAttemptValidRate is FirstAttemptValid / Finished, 0 when nothing
// finished.
func (b BatchOverview) FirstAttemptValidRate() float64 {
	return ratio(b.FirstAttemptValid, b.Finished())
}

func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// OverviewLimitMax bounds the batches one Overviews call returns.
const OverviewLimitMax = 1000

// Overviews returns the batches named, or (names empty) the limit most
// recently created ones, newest first. limit is clamped to 1..OverviewLimitMax.
func (s *Store) Overviews(ctx context.Context, names []string, limit int) ([]BatchOverview, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	limit = min(max(limit, 1), OverviewLimitMax)
	if names == nil {
		names = []string{}
	}
	// The counts and sums are the batch's rollups (kept by the ledger's
	// triggers in the transaction of every write); the first start and the
	// last end are one index probe each.
	rows, err := s.pool.Query(ctx, `
		SELECT b.name, b.created_at, coalesce(b.settings->>'provider', ''), coalesce(b.settings->>'model', ''),
		       coalesce(r.jobs, 0), coalesce(r.queued, 0), coalesce(r.valid, 0), coalesce(r.invalid, 0),
		       coalesce(r.failed, 0), coalesce(r.rejected, 0), coalesce(r.dead, 0), coalesce(r.cancelled, 0),
		       coalesce(r.over_budget, 0), coalesce(r.first_valid, 0),
		       coalesce(sc.cost_usd::float8, r.cost_usd::float8, 0), coalesce(sc.tokens, r.tokens_in + r.tokens_out, 0),
		       b.max_cost_usd::float8, b.max_total_tokens,
		       (SELECT min(j.started_at) FROM jobs j WHERE j.batch = b.name),
		       (SELECT max(j.finished_at) FROM jobs j WHERE j.batch = b.name AND j.status <> 'queued'),
		       b.cancelled_at,
		       (SELECT count(*) FROM waves w WHERE w.batch = b.name AND w.status NOT IN ('done', 'failed')),
		       `+badRowsSQL("b.name")+`
		FROM batches b
		LEFT JOIN batch_rollups r ON r.batch = b.name
		LEFT JOIN spend_counters sc ON sc.batch = b.name
		WHERE cardinality($1::text[]) = 0 OR b.name = ANY($1)
		ORDER BY b.created_at DESC, b.name LIMIT $2`, names, limit)
	if err != nil {
		return nil, fmt.Errorf("batch overview: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchOverview, error) {
		var b BatchOverview
		var started, finished, cancelled *time.Time
		err := r.Scan(&b.Name, &b.CreatedAt, &b.Provider, &b.Model,
			&b.Jobs, &b.Queued, &b.Valid, &b.Invalid, &b.Failed, &b.Rejected, &b.Dead, &b.Cancelled, &b.OverBudget,
			&b.FirstAttemptValid, &b.CostUSD, &b.Tokens, &b.MaxCostUSD, &b.MaxTotalTokens,
			&started, &finished, &cancelled, &b.OpenWaves, &b.BadRows)
		b.StartedAt, b.FinishedAt, b.CancelledAt = deref(started), deref(finished), deref(cancelled)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("batch overview: %w", err)
	}
	return out, nil
}

// Overview returns one batch's overview, or ErrNotFound.
func (s *Store) Overview(ctx context.Context, name string) (BatchOverview, error) {
	out, err := s.Overviews(ctx, []string{name}, 1)
	if err != nil {
		return BatchOverview{}, err
	}
	if len(out) == 0 {
		return BatchOverview{}, fmt.Errorf("batch %s: %w", name, ErrNotFound)
	}
	return out[0], nil
}

// Funnel is how a batch's finished jobs ended: valid at attempt n, or never.
type Funnel struct {
	// ValidAt[n-1] counts the valid jobs valid at attempt n (of their
	// latest run); LocalAt[n-1] those of them repaired locally (the reply
	// was fixed without asking the model again).
	ValidAt, LocalAt []int64
	// Never counts the finished jobs that are not valid.
	Never int64
}

// BatchFunnel returns the funnel of a batch's jobs.
func (s *Store) BatchFunnel(ctx context.Context, batch string) (Funnel, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// The batch's finished jobs by attempt count (its rollup): a row per
	// attempt count, and n = 0 for the finished jobs not valid.
	rows, err := s.pool.Query(ctx, `
		SELECT greatest(attempts, 1), sum(valid), sum(local) FROM batch_rollup_attempts
		WHERE batch = $1 AND valid <> 0 GROUP BY 1
		UNION ALL
		SELECT 0, sum(finished - valid), 0 FROM batch_rollup_attempts WHERE batch = $1
		ORDER BY 1 LIMIT 1000`, batch)
	if err != nil {
		return Funnel{}, fmt.Errorf("funnel of %s: %w", batch, err)
	}
	var f Funnel
	var n int
	var jobs, local *int64
	_, err = pgx.ForEachRow(rows, []any{&n, &jobs, &local}, func() error {
		if jobs == nil {
			return nil
		}
		if n == 0 {
			f.Never = *jobs
			return nil
		}
		for len(f.ValidAt) < n {
			f.ValidAt, f.LocalAt = append(f.ValidAt, 0), append(f.LocalAt, 0)
		}
		f.ValidAt[n-1], f.LocalAt[n-1] = *jobs, deref(local)
		return nil
	})
	if err != nil {
		return Funnel{}, fmt.Errorf("funnel of %s: %w", batch, err)
	}
	return f, nil
}

// Cluster is one (error path, keyword) of a batch's validation errors.
type Cluster struct {
	// Path is the JSON pointer with array indices folded to '*' (as in the
	// error_paths view); Keyword the failing schema keyword; Class the
	// error's class (the first in order when it has several).
	Path, Keyword, Class string
	// Errors counts error entries across every attempt; Jobs distinct jobs.
	Errors, Jobs int64
	// ExampleJob is the first job (by id) with such an error, and
	// ExampleMessage that error's message.
	ExampleJob, ExampleMessage string
}

// FailureClusters returns the limit largest error clusters of batch (at
// most 1000), most errors first.
func (s *Store) FailureClusters(ctx context.Context, batch string, limit int) ([]Cluster, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	limit = min(max(limit, 1), 1000)
	// The batch's error rollup: a row per (path, keyword).
	rows, err := s.pool.Query(ctx, `
		SELECT path, keyword, class, errors, jobs, example_job, example_message
		FROM batch_rollup_errors WHERE batch = $1
		ORDER BY errors DESC, path, keyword LIMIT $2`, batch, limit)
	if err != nil {
		return nil, fmt.Errorf("failure clusters of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cluster, error) {
		var c Cluster
		err := r.Scan(&c.Path, &c.Keyword, &c.Class, &c.Errors, &c.Jobs, &c.ExampleJob, &c.ExampleMessage)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("failure clusters of %s: %w", batch, err)
	}
	return out, nil
}

// ModelCost is what a batch's calls to one model at one price basis cost.
type ModelCost struct {
	// Model answered the calls; Basis is their price basis (realtime or
	// batch).
	Model, Basis string
	// Calls counts the attempts (every run's); TokensIn, TokensOut and
	// CostUSD are their totals.
	Calls, TokensIn, TokensOut int64
	// TokensCached are the input tokens read from the provider's prompt
	// cache (part of TokensIn), charged at the cached rate.
	TokensCached int64
	CostUSD      float64
	// ValidJobs counts the jobs made valid by one of these calls.
	ValidJobs int64
}

// CostPerValid is CostUSD / ValidJobs, 0 when no job was made valid.
func (m ModelCost) CostPerValid() float64 {
	if m.ValidJobs == 0 {
		return 0
	}
	return m.CostUSD / float64(m.ValidJobs)
}

// ModelCosts returns what a batch's recorded attempts cost by model and
// price basis, most expensive first.
func (s *Store) ModelCosts(ctx context.Context, batch string) ([]ModelCost, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// The batch's cost rollup: a row per model and basis.
	rows, err := s.pool.Query(ctx, `
		SELECT model, basis, calls, tokens_in, tokens_out, tokens_cached, cost_usd::float8, valid_jobs
		FROM batch_rollup_costs WHERE batch = $1 AND calls > 0
		ORDER BY 7 DESC, 1, 2 LIMIT 1000`, batch)
	if err != nil {
		return nil, fmt.Errorf("model costs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ModelCost, error) {
		var m ModelCost
		err := r.Scan(&m.Model, &m.Basis, &m.Calls, &m.TokensIn, &m.TokensOut, &m.TokensCached, &m.CostUSD, &m.ValidJobs)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("model costs of %s: %w", batch, err)
	}
	return out, nil
}

// JobFilter selects and pages a batch's jobs. The zero value is every job,
// the first page.
type JobFilter struct {
	// Status is a job status ("" = any).
	Status string
	// Class is the class of the job's last failed attempt ("" = any).
	Class string
	// ErrorPath keeps the jobs with a validation error at this path (array
	// indices folded to '*', as FailureClusters gives it) in an attempt of
	// their latest run ("" = any).
	ErrorPath string
	// Attempts keeps the jobs with exactly this many attempts (0 = any).
	Attempts int
	// Coerced keeps the jobs with an attempt of their latest run whose
	// value schema-guided coercion fixed; Patched those with a patch reply
	// applied in their latest run.
	Coerced, Patched bool
	// After is the keyset cursor: JobPage's next cursor of the previous
	// page ("" = the first page). Jobs come in row order (row_no, then id).
	After string
	// Limit is the page size, clamped to 1..JobPageMax (0 = JobPageDefault).
	Limit int
}

// Page sizes of JobPage.
const (
	JobPageDefault = 50
	JobPageMax     = 1000
)

// jobStatuses and jobClasses are the values the ledger's CHECK constraints
// allow.
var (
	jobStatuses = []string{"queued", "valid", "invalid", "failed", "rejected", "dead", "cancelled", "over_budget"}
	jobClasses  = []string{"syntax", "shape", "semantic", "truncated", "refusal", "provider"}
)

// Check says what is wrong with f, wrapping ErrInvalid.
func (f JobFilter) Check() error {
	switch {
	case f.Status != "" && !slices.Contains(jobStatuses, f.Status):
		return fmt.Errorf("%w: status %q is none of %v", ErrInvalid, f.Status, jobStatuses)
	case f.Class != "" && !slices.Contains(jobClasses, f.Class):
		return fmt.Errorf("%w: class %q is none of %v", ErrInvalid, f.Class, jobClasses)
	case f.Attempts < 0:
		return fmt.Errorf("%w: attempts %d is negative", ErrInvalid, f.Attempts)
	case f.Limit < 0:
		return fmt.Errorf("%w: limit %d is negative", ErrInvalid, f.Limit)
	}
	if _, _, err := parseCursor(f.After); err != nil {
		return err
	}
	return nil
}

// cursor is the keyset cursor of the job after which a page starts.
func cursor(j JobRow) string { return strconv.Itoa(j.RowNo) + ":" + j.ID }

// parseCursor reads a cursor ("" is before the first job).
func parseCursor(c string) (row int, id string, err error) {
	if c == "" {
		return math.MinInt32, "", nil
	}
	n, id, ok := strings.Cut(c, ":")
	row, err = strconv.Atoi(n)
	if !ok || err != nil || row < math.MinInt32 || row > math.MaxInt32 {
		return 0, "", fmt.Errorf("%w: cursor %q is not a row number, ':' and a job id", ErrInvalid, c)
	}
	return row, id, nil
}

// JobRow is one job of a job list.
type JobRow struct {
	ID     string
	RowNo  int
	Status string
	// FinalClass is the class of the last failed attempt of a job not valid.
	FinalClass string
	Model      string
	Attempts   int
	// RepairedLocally: a local repair made the value valid.
	RepairedLocally bool
	CostUSD         float64
	WallMS          int64
	// Error is why the job is not valid, its first 300 characters in a page
	// (whole in an export).
	Error string
	// Metadata (the input row) and Value (the final value, nil for none)
	// are filled by JobList only.
	Metadata, Value json.RawMessage
	// Matched, filled by SearchJobs only, says where the text was found:
	// id, input, prompt, value, error.
	Matched []string
}

// jobListSQL is the FROM, WHERE, ORDER BY and LIMIT selecting the jobs
// (as j) of batch matching f after the cursor, in row order, and its
// arguments. Only the conditions f sets are in it, so that each shape of
// filter gets the plan of its index: a batch's jobs in row order, by
// status, or by class (jobs_batch_*_row), or the job_facets of an error
// path, a coercion or an applied patch in row order joined to their jobs.
func jobListSQL(batch string, f JobFilter, after string, limit int) (string, []any, error) {
	row, id, err := parseCursor(after)
	if err != nil {
		return "", nil, err
	}
	args := []any{batch}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var facets []string
	if f.ErrorPath != "" {
		facets = append(facets, "path:"+f.ErrorPath)
	}
	if f.Coerced {
		facets = append(facets, "coerced")
	}
	if f.Patched {
		facets = append(facets, "patched")
	}
	var q strings.Builder
	key := "j"
	if len(facets) > 0 {
		// The first facet drives: its rows are in row order already.
		key = "x"
		fmt.Fprintf(&q, `
	FROM job_facets x JOIN jobs j ON j.id = x.job_id AND j.run = x.run
	WHERE x.batch = $1 AND x.facet = %s AND (x.row_no, x.job_id) > (%s, %s)`, arg(facets[0]), arg(row), arg(id))
	} else {
		fmt.Fprintf(&q, `
	FROM jobs j
	WHERE j.batch = $1 AND (j.row_no, j.id) > (%s, %s)`, arg(row), arg(id))
	}
	if f.Status != "" {
		fmt.Fprintf(&q, " AND j.status = %s", arg(f.Status))
	}
	if f.Class != "" {
		fmt.Fprintf(&q, " AND j.final_class = %s", arg(f.Class))
	}
	if f.Attempts > 0 {
		fmt.Fprintf(&q, " AND j.attempts = %s", arg(f.Attempts))
	}
	// OFFSET 0 keeps each further facet a lookup per job of the first:
	// without it the planner, which cannot tell how often two facets meet,
	// joins both facets' every row by hash (0.6 s at 10M jobs) to find a page.
	for _, x := range facets[min(1, len(facets)):] {
		fmt.Fprintf(&q, `
	  AND EXISTS (SELECT 1 FROM job_facets y WHERE y.batch = $1 AND y.facet = %s
	              AND y.row_no = j.row_no AND y.job_id = j.id AND y.run = j.run OFFSET 0)`, arg(x))
	}
	if key == "x" {
		q.WriteString("\n\tORDER BY x.row_no, x.job_id")
	} else {
		q.WriteString("\n\tORDER BY j.row_no, j.id")
	}
	fmt.Fprintf(&q, " LIMIT %s", arg(limit))
	return q.String(), args, nil
}

// JobPage returns one page of the jobs of batch matching f, and the cursor
// of the next page ("" when this is the last).
func (s *Store) JobPage(ctx context.Context, batch string, f JobFilter) ([]JobRow, string, error) {
	if err := f.Check(); err != nil {
		return nil, "", err
	}
	if f.Limit == 0 {
		f.Limit = JobPageDefault
	}
	limit := min(f.Limit, JobPageMax)
	from, args, err := jobListSQL(batch, f, f.After, limit+1)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT j.id, j.row_no, j.status, j.final_class, j.model, j.attempts, j.repaired_locally,
		       j.cost_usd::float8, coalesce(j.wall_ms, 0), left(j.error, 300)`+from, args...)
	if err != nil {
		return nil, "", fmt.Errorf("jobs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		err := r.Scan(&j.ID, &j.RowNo, &j.Status, &j.FinalClass, &j.Model, &j.Attempts, &j.RepairedLocally,
			&j.CostUSD, &j.WallMS, &j.Error)
		return j, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("jobs of %s: %w", batch, err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = cursor(out[limit-1])
	}
	return out, next, nil
}

// jobListChunk is how many jobs one statement of JobList reads.
const jobListChunk = 1000

// JobList streams every job of batch matching f (f.After and f.Limit
// ignored) to fn in row order, with its input row and value, a chunk of
// jobs per statement (each bounded by the statement timeout unless ctx
// has a deadline) so that a large export holds no long transaction open.
// It stops at, and returns, the first error fn returns.
func (s *Store) JobList(ctx context.Context, batch string, f JobFilter, fn func(JobRow) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	after := ""
	for {
		chunk, err := s.jobChunk(ctx, batch, f, after)
		if err != nil {
			return err
		}
		for _, j := range chunk {
			if err := fn(j); err != nil {
				return err
			}
		}
		if len(chunk) < jobListChunk {
			return nil
		}
		after = cursor(chunk[len(chunk)-1])
	}
}

func (s *Store) jobChunk(ctx context.Context, batch string, f JobFilter, after string) ([]JobRow, error) {
	from, args, err := jobListSQL(batch, f, after, jobListChunk)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT j.id, j.row_no, j.status, j.final_class, j.model, j.attempts, j.repaired_locally,
		       j.cost_usd::float8, coalesce(j.wall_ms, 0), j.error, j.metadata::text, j.value::text`+from, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		var meta string
		var value *string
		err := r.Scan(&j.ID, &j.RowNo, &j.Status, &j.FinalClass, &j.Model, &j.Attempts, &j.RepairedLocally,
			&j.CostUSD, &j.WallMS, &j.Error, &meta, &value)
		j.Metadata, j.Value = json.RawMessage(meta), rawPtr(value)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", batch, err)
	}
	return out, nil
}

// JobDetail is a job with its attempts and the calls kept apart from them.
type JobDetail struct {
	Job *JobRecord
	// Attempts are the attempts of the job's current run, in order.
	Attempts []Attempt
	// Runs are the job's earlier runs (a requeue started each later one),
	// the latest first, at most JobRunsMax of them.
	Runs []JobRun
	// Interrupted are the calls of deliveries that ended without a result
	// (handed back, shutdown, superseded, outage, ...), grouped.
	Interrupted []InterruptedCalls
	// Revalidation is the check of the job's value that made its latest
	// run, when that run is a revalidation (enqueue revalidate); nil
	// otherwise.
	Revalidation *Revalidation
	// Evidence and EvidenceSource are the evidence settings the job's
	// latest run ran with ("evidence" and "evidence_source" of its run's
	// settings: batch_runs', or the batch's for run 1), "" where they name
	// none: what the worker checked its values against (evidence.JobSource).
	Evidence, EvidenceSource string
}

// JobRun is an earlier run of a job: how it ended (as job_runs kept it
// when a requeue started the next) and its attempts.
type JobRun struct {
	Run             int
	Status          fixpoint.Status
	Provider, Model string
	// Value is the run's final value, nil for none; Error and FinalClass
	// say why it was not valid.
	Value             json.RawMessage
	Error, FinalClass string
	Attempts, Calls   int
	// TokensIn, TokensOut, TokensCached and CostUSD are the run's totals.
	TokensIn, TokensOut, TokensCached int64
	CostUSD                           float64
	// StartedAt and FinishedAt are zero when unknown.
	StartedAt, FinishedAt time.Time
	// AttemptRows are the run's attempts, in order.
	AttemptRows []Attempt
}

// JobRunsMax bounds the earlier runs JobDetail returns (the latest).
const JobRunsMax = 20

// JobDetail returns a job, its attempts, its earlier runs and its
// interrupted calls, or ErrNotFound.
func (s *Store) JobDetail(ctx context.Context, id string) (JobDetail, error) {
	j, attempts, err := s.Job(ctx, id)
	if err != nil {
		return JobDetail{}, err
	}
	runs, err := s.jobRuns(ctx, id, j.Run)
	if err != nil {
		return JobDetail{}, err
	}
	in, err := s.JobInterrupted(ctx, id)
	if err != nil {
		return JobDetail{}, err
	}
	d := JobDetail{Job: j, Attempts: attempts, Runs: runs, Interrupted: in}
	if d.Revalidation, err = s.revalidation(ctx, id, j.Run); err != nil || j.Batch == "" {
		return d, err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `
		SELECT coalesce(coalesce(r.settings, b.settings)->>'evidence', ''), coalesce(coalesce(r.settings, b.settings)->>'evidence_source', '')
		FROM batches b LEFT JOIN batch_runs r ON r.batch = b.name AND r.run = $2
		WHERE b.name = $1`, j.Batch, j.Run).Scan(&d.Evidence, &d.EvidenceSource)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return JobDetail{}, fmt.Errorf("settings of job %s: %w", id, err)
	}
	return d, nil
}

// Revalidation is a check of a job's value by enqueue revalidate, with no
// call (a revalidations row).
type Revalidation struct {
	// Run is the run the revalidation made; PriorRun the run whose value
	// (or reply AttemptNo, 0 for the value) it checked.
	Run, PriorRun, AttemptNo int
	// SchemaHash is the schema (with its rules) it checked against.
	SchemaHash string
	// Valid says whether the value passed; Class why not.
	Valid bool
	Class string
	// Errors, Warnings and Evidence are JSON arrays as an attempt's
	// (Warnings and Evidence nil for none).
	Errors, Warnings, Evidence json.RawMessage
	CheckedAt                  time.Time
}

// revalidation returns the revalidation that made run of job id, nil when
// that run is none.
func (s *Store) revalidation(ctx context.Context, id string, run int) (*Revalidation, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	r := Revalidation{Run: run}
	var attempt *int
	var warnings, evidence *string
	var errs string
	err := s.pool.QueryRow(ctx, `
		SELECT prior_run, attempt_no, schema_hash, valid, class, errors::text, warnings::text, evidence::text, checked_at
		FROM revalidations WHERE job_id = $1 AND run = $2`, id, run).Scan(
		&r.PriorRun, &attempt, &r.SchemaHash, &r.Valid, &r.Class, &errs, &warnings, &evidence, &r.CheckedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("revalidation of job %s: %w", id, err)
	}
	r.AttemptNo, r.Errors, r.Warnings, r.Evidence = deref(attempt), json.RawMessage(errs), rawPtr(warnings), rawPtr(evidence)
	return &r, nil
}

// jobRuns returns the runs of job id before current, the latest first,
// with their attempts.
func (s *Store) jobRuns(ctx context.Context, id string, current int) ([]JobRun, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT run, status, provider, model, value::text, error, final_class, attempts, calls,
		       tokens_in, tokens_out, tokens_cached, cost_usd::float8, started_at, finished_at
		FROM job_runs WHERE job_id = $1 AND run <> $2 ORDER BY run DESC LIMIT $3`, id, current, JobRunsMax)
	if err != nil {
		return nil, fmt.Errorf("runs of job %s: %w", id, err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRun, error) {
		var jr JobRun
		var value *string
		var started, finished *time.Time
		err := r.Scan(&jr.Run, &jr.Status, &jr.Provider, &jr.Model, &value, &jr.Error, &jr.FinalClass, &jr.Attempts, &jr.Calls,
			&jr.TokensIn, &jr.TokensOut, &jr.TokensCached, &jr.CostUSD, &started, &finished)
		jr.Value, jr.StartedAt, jr.FinishedAt = rawPtr(value), deref(started), deref(finished)
		return jr, err
	})
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	nums := make([]int, len(runs))
	at := map[int]int{}
	for i, jr := range runs {
		nums[i], at[jr.Run] = jr.Run, i
	}
	rows, err = s.pool.Query(ctx, `SELECT a.run, `+attemptSelect+attemptSelectFrom+`
		WHERE a.job_id = $1 AND a.run = ANY($2) ORDER BY a.run, a.attempt_no`, id, nums)
	if err != nil {
		return nil, fmt.Errorf("attempts of the runs of job %s: %w", id, err)
	}
	var run int
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		a, err := scanAttempt(r, &run)
		if err == nil {
			runs[at[run]].AttemptRows = append(runs[at[run]].AttemptRows, a)
		}
		return struct{}{}, err
	})
	if err != nil {
		return nil, fmt.Errorf("attempts of the runs of job %s: %w", id, err)
	}
	return runs, nil
}

// RepairSteps returns, for one batch, what became of the jobs whose
// attempt n failed, by n and class: how many made attempt n+1 and how many
// were valid at it (the repair_effectiveness view for one batch, read from
// the batch's rollup).
func (s *Store) RepairSteps(ctx context.Context, batch string) ([]RepairStep, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT attempt_no, class, failed, retried, valid_next FROM batch_rollup_repairs
		WHERE batch = $1 AND failed > 0 ORDER BY 1, 2 LIMIT 1000`, batch)
	if err != nil {
		return nil, fmt.Errorf("repair steps of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RepairStep, error) {
		p := RepairStep{Batch: batch}
		err := r.Scan(&p.AttemptNo, &p.Class, &p.Failed, &p.Retried, &p.ValidNext)
		if p.Retried > 0 {
			rate := float64(p.ValidNext) / float64(p.Retried)
			p.Rate = &rate
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("repair steps of %s: %w", batch, err)
	}
	return out, nil
}

// Bounds of SearchJobs.
const (
	// SearchWindow is how many jobs of a batch one search step reads, in
	// row order: a step costs the same on a batch of any size, and a
	// search of a large batch goes on from where the last step stopped.
	SearchWindow = 10_000
	// SearchMatchesMax is how many matches one step returns at most.
	SearchMatchesMax = 50
	// SearchTextMax bounds the text searched for, in bytes.
	SearchTextMax = 200
)

// JobSearch is one step of a text search of a batch's jobs.
type JobSearch struct {
	// Jobs are the jobs matching, in row order, each with Matched set.
	Jobs []JobRow
	// FromRow and ToRow are the row numbers of the first and the last job
	// the step searched (0 when it found no job after the cursor).
	FromRow, ToRow int
	// Next is the cursor the search goes on from, "" when the step read
	// to the batch's end.
	Next string
}

// SearchJobs looks for text, case aside, in the jobs of batch after the
// cursor after ("" from the first): in each job's id, input row and final
// value (as JSON text), prompt and error. It reads at most SearchWindow
// jobs in row order (the jobs_batch_row index) and returns at most
// SearchMatchesMax matches, with the cursor to go on from.
func (s *Store) SearchJobs(ctx context.Context, batch, text, after string) (JobSearch, error) {
	var out JobSearch
	text = strings.ToLower(strings.TrimSpace(text))
	if text == "" || len(text) > SearchTextMax {
		return out, fmt.Errorf("%w: search for 1 to %d bytes of text, not %d", ErrInvalid, SearchTextMax, len(text))
	}
	row, id, err := parseCursor(after)
	if err != nil {
		return out, err
	}
	window := cmp.Or(s.searchWindow, SearchWindow)
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// The window: the next SearchWindow jobs, read from the index alone;
	// then the matches among them, the first SearchMatchesMax.
	var read int
	var first, last *int
	var lastID *string
	err = s.pool.QueryRow(ctx, `
		WITH w AS (SELECT row_no, id FROM jobs WHERE batch = $1 AND (row_no, id) > ($2, $3) ORDER BY row_no, id LIMIT $4)
		SELECT count(*), min(row_no), (SELECT row_no FROM w ORDER BY row_no DESC, id DESC LIMIT 1),
		       (SELECT id FROM w ORDER BY row_no DESC, id DESC LIMIT 1) FROM w`,
		batch, row, id, window).Scan(&read, &first, &last, &lastID)
	if err != nil {
		return out, fmt.Errorf("search jobs of %s: %w", batch, err)
	}
	if read == 0 {
		return out, nil
	}
	out.FromRow, out.ToRow = *first, *last
	rows, err := s.pool.Query(ctx, `
		WITH w AS (SELECT row_no, id FROM jobs WHERE batch = $1 AND (row_no, id) > ($2, $3) ORDER BY row_no, id LIMIT $4)
		SELECT j.id, j.row_no, j.status, j.final_class, j.model, j.attempts, j.repaired_locally,
		       j.cost_usd::float8, coalesce(j.wall_ms, 0), left(j.error, 300),
		       array_remove(ARRAY[
		           CASE WHEN strpos(lower(j.id), $5) > 0 THEN 'id' END,
		           CASE WHEN strpos(lower(j.metadata::text), $5) > 0 THEN 'input' END,
		           CASE WHEN strpos(lower(j.prompt), $5) > 0 THEN 'prompt' END,
		           CASE WHEN strpos(lower(coalesce(j.value::text, '')), $5) > 0 THEN 'value' END,
		           CASE WHEN strpos(lower(j.error), $5) > 0 THEN 'error' END], NULL) AS matched
		FROM w JOIN jobs j ON j.id = w.id
		WHERE strpos(lower(j.id), $5) > 0 OR strpos(lower(j.metadata::text), $5) > 0 OR strpos(lower(j.prompt), $5) > 0
		   OR strpos(lower(coalesce(j.value::text, '')), $5) > 0 OR strpos(lower(j.error), $5) > 0
		ORDER BY j.row_no, j.id LIMIT $6`, batch, row, id, window, text, SearchMatchesMax+1)
	if err != nil {
		return out, fmt.Errorf("search jobs of %s: %w", batch, err)
	}
	out.Jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		err := r.Scan(&j.ID, &j.RowNo, &j.Status, &j.FinalClass, &j.Model, &j.Attempts, &j.RepairedLocally,
			&j.CostUSD, &j.WallMS, &j.Error, &j.Matched)
		return j, err
	})
	if err != nil {
		return out, fmt.Errorf("search jobs of %s: %w", batch, err)
	}
	switch {
	case len(out.Jobs) > SearchMatchesMax:
		// More matches in the window than a step returns: go on after
		// the last one returned, which is where this step read to.
		out.Jobs = out.Jobs[:SearchMatchesMax]
		out.Next = cursor(out.Jobs[SearchMatchesMax-1])
		out.ToRow = out.Jobs[SearchMatchesMax-1].RowNo
	case read == window:
		out.Next = strconv.Itoa(*last) + ":" + *lastID
	}
	return out, nil
}

// JobBatch returns the batch of job id ("" for a job of none), or
// ErrNotFound: the search's exact-id lookup, by the primary key.
func (s *Store) JobBatch(ctx context.Context, id string) (string, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var batch *string
	err := s.pool.QueryRow(ctx, `SELECT batch FROM jobs WHERE id = $1`, id).Scan(&batch)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("job %s: %w", id, err)
	}
	return deref(batch), nil
}
