package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/jackc/pgx/v5"
)

// ErrOverBudget is returned by Reserve when what the batch has spent
// leaves no room for the call under its cap: the cap is reached.
var ErrOverBudget = errors.New("batch spend cap reached")

// ErrBudgetHeld is returned by Reserve when the call fits under the cap
// with what is spent but not with what calls in flight hold: try again
// when some of them have been charged (most use less than they hold).
var ErrBudgetHeld = errors.New("batch budget held by calls in flight")

// RequeueParams chooses the jobs of a batch to run again.
type RequeueParams struct {
	// Batch names the batch; required.
	Batch string
	// Statuses are the final statuses to requeue; required.
	Statuses []fixpoint.Status
	// Class, when set, keeps only jobs whose final class is Class.
	Class string
	// Jobs, when set, keeps only these jobs of the batch (at most
	// RequeueJobsMax): a requeue of one job, or of a selection.
	Jobs []string
	// Settings are the settings of the new run (as batches.settings).
	Settings json.RawMessage
	// Request records what was asked for, for the batch_runs row.
	Request json.RawMessage
	// Provider, Model, Mode and Strategy, when set, replace the jobs' own.
	Provider, Model, Mode, Strategy string
	// DryRun counts the jobs without changing anything.
	DryRun bool
}

// RequeueResult says what Requeue did.
type RequeueResult struct {
	// Run is the new run's number (the one it would be, with DryRun); 0
	// when no job matched.
	Run int
	// Jobs counts the jobs requeued (or that would be), by their status.
	Jobs map[string]int
}

// Total is the number of jobs requeued.
func (r RequeueResult) Total() int {
	n := 0
	for _, v := range r.Jobs {
		n += v
	}
	return n
}

// RequeueJobsMax bounds the jobs one requeue or cancel of chosen jobs
// names (RequeueParams.Jobs, CancelJobs).
const RequeueJobsMax = 1000

// requeueWhere selects the jobs of a requeue ($1 the batch, $2 the
// statuses, $3 the class, $4 the chosen jobs): only the ids' condition
// when some are chosen, so that a requeue of a few jobs reads them by id
// rather than every final job of the batch.
func requeueWhere(jobs []string) string {
	w := `batch = $1 AND status = ANY($2) AND ($3 = '' OR final_class = $3) AND prompt <> ''`
	if len(jobs) > 0 {
		return w + ` AND id = ANY($4::text[])`
	}
	return w + ` AND cardinality($4::text[]) = 0`
}

// checkJobs says what is wrong with a list of chosen jobs, wrapping
// ErrInvalid.
func checkJobs(jobs []string) error {
	if len(jobs) > RequeueJobsMax {
		return fmt.Errorf("%w: %d jobs chosen, at most %d at once", ErrInvalid, len(jobs), RequeueJobsMax)
	}
	if slices.Contains(jobs, "") {
		return fmt.Errorf("%w: an empty job id", ErrInvalid)
	}
	return nil
}

// endRunSet carries what batch_summary counts of a job's runs into the
// job's row when a requeue or a revalidation ends its run (the old values
// on the right): the attempts of its earlier runs, and its first try, the
// first_attempt_valid of its first run that made a call. The rollup
// triggers then count them from the row (migration 009).
const endRunSet = `earlier_attempts = earlier_attempts + attempts,
				first_try = coalesce(first_try, CASE WHEN calls > 0 THEN first_attempt_valid END)`

// Requeue starts a new run of the batch with the jobs whose status (and
// class, and id when chosen) match: each keeps its outcome so far in job_runs, goes back to
// 'queued' and unpublished in the new run, with the settings given, ready
// for the caller to publish. Jobs without a prompt (messages rejected
// before they could be read) are never requeued. Repeating the same call
// finds no job left with those statuses until the new run has ended them.
func (s *Store) Requeue(ctx context.Context, p RequeueParams) (RequeueResult, error) {
	res := RequeueResult{Jobs: map[string]int{}}
	if p.Batch == "" || len(p.Statuses) == 0 {
		return res, fmt.Errorf("requeue: %w: batch and statuses are required", ErrInvalid)
	}
	for _, st := range p.Statuses {
		if !st.Final() {
			return res, fmt.Errorf("requeue: %w: %q is not a final status", ErrInvalid, st)
		}
	}
	if err := checkJobs(p.Jobs); err != nil {
		return res, fmt.Errorf("requeue: %w", err)
	}
	jobs := append([]string{}, p.Jobs...) // never nil: a text[] of none
	where := requeueWhere(p.Jobs)
	settings := string(p.Settings)
	if len(p.Settings) == 0 || !json.Valid(p.Settings) {
		return res, fmt.Errorf("requeue: %w: settings are not JSON", ErrInvalid)
	}
	request := "{}"
	if len(p.Request) > 0 {
		request = string(p.Request)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One requeue of a batch at a time.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT true FROM batches WHERE name = $1 FOR UPDATE`, p.Batch).Scan(&exists); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("batch %s: %w", p.Batch, ErrNotFound)
			}
			return err
		}
		if err := tx.QueryRow(ctx, `
			SELECT greatest(coalesce((SELECT max(run) FROM batch_runs WHERE batch = $1), 1),
			                coalesce((SELECT max(run) FROM jobs WHERE batch = $1), 1)) + 1`, p.Batch).Scan(&res.Run); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT status, count(*) FROM jobs WHERE `+where+` GROUP BY status`,
			p.Batch, statusText(p.Statuses), p.Class, jobs)
		if err != nil {
			return err
		}
		var st string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { res.Jobs[st] = n; return nil }); err != nil {
			return err
		}
		if res.Total() == 0 {
			res.Run = 0
			return nil
		}
		if p.DryRun {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_runs (batch, run, settings, request, jobs) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5)`,
			p.Batch, res.Run, settings, request, res.Total()); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO job_runs (job_id, run, status, provider, model, value, error, final_class, attempts, calls,
				first_attempt_valid, repaired_locally, tokens_in, tokens_out, tokens_cached, cost_usd,
				started_at, finished_at, deliveries, schema_hash)
			SELECT id, run, status, provider, model, value, error, final_class, attempts, calls,
				first_attempt_valid, repaired_locally, tokens_in, tokens_out, tokens_cached, cost_usd,
				started_at, finished_at, deliveries, schema_hash
			FROM jobs WHERE `+where+`
			ON CONFLICT (job_id, run) DO NOTHING`, p.Batch, statusText(p.Statuses), p.Class, jobs); err != nil {
			return fmt.Errorf("keep the jobs' outcomes: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE jobs SET status = 'queued', run = $5, published = false, published_at = NULL,
				`+endRunSet+`, value = NULL, error = '', final_class = '', payload = NULL, attempts = 0, calls = 0,
				first_attempt_valid = false, repaired_locally = false, tokens_in = 0, tokens_out = 0,
				tokens_cached = 0, cost_usd = 0, started_at = NULL, finished_at = NULL, wall_ms = NULL,
				deliveries = 0, wave_id = NULL,
				provider = coalesce(nullif($6, ''), provider), model = coalesce(nullif($7, ''), model),
				mode = coalesce(nullif($8, ''), mode), strategy = coalesce(nullif($9, ''), strategy)
			WHERE `+where,
			p.Batch, statusText(p.Statuses), p.Class, jobs, res.Run, p.Provider, p.Model, p.Mode, p.Strategy); err != nil {
			return fmt.Errorf("requeue jobs: %w", err)
		}
		// A cancelled batch whose jobs run again is not cancelled any more.
		_, err = tx.Exec(ctx, `UPDATE batches SET cancelled_at = NULL WHERE name = $1`, p.Batch)
		return err
	})
	if err != nil {
		return RequeueResult{}, fmt.Errorf("requeue jobs of %s: %w", p.Batch, err)
	}
	return res, nil
}

// RunSettings returns the settings of each run of the batch after the
// first (batch_runs), by run number; run 1 uses batches.settings.
func (s *Store) RunSettings(ctx context.Context, batch string) (map[int]json.RawMessage, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT run, settings::text FROM batch_runs WHERE batch = $1`, batch)
	if err != nil {
		return nil, fmt.Errorf("read runs of %s: %w", batch, err)
	}
	out := map[int]json.RawMessage{}
	var run int
	var settings string
	if _, err := pgx.ForEachRow(rows, []any{&run, &settings}, func() error {
		out[run] = json.RawMessage(settings)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read runs of %s: %w", batch, err)
	}
	return out, nil
}

// CancelledReason is the error of a job enqueue cancel ended.
const CancelledReason = "cancelled by enqueue cancel"

// Cancel ends every job of the batch that is not final yet as 'cancelled'
// and marks the batch cancelled; it returns how many jobs it ended. Jobs
// in flight finish their call, and their result loses to the cancellation
// (its calls are kept as superseded). It is safe to repeat.
func (s *Store) Cancel(ctx context.Context, batch string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE batches SET cancelled_at = coalesce(cancelled_at, now()) WHERE name = $1`, batch)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("batch %s: %w", batch, ErrNotFound)
		}
		tag, err = tx.Exec(ctx, `
			UPDATE jobs SET status = 'cancelled', error = $2, finished_at = now(), wave_id = NULL
			WHERE batch = $1 AND status = 'queued'`, batch, CancelledReason)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		// Open provider batches are cancelled by the worker driving them;
		// the replies they already have are still recorded.
		_, err = tx.Exec(ctx, `
			UPDATE waves SET status = 'cancelling', next_poll_at = now()
			WHERE batch = $1 AND status IN ('recorded', 'uploaded', 'submitted')`, batch)
		if err != nil {
			return err
		}
		// A run stopped while recording left rows of its dataset out: the
		// cancel ends the batch as it is (a marked batch could not be
		// closed but by rerunning the enqueue, whose rows would run). A
		// run still going keeps its mark: its rows are recorded after
		// the cancel and run, and a kill later must still be seen.
		_, err = tx.Exec(ctx, `DELETE FROM batch_recordings WHERE batch = $1 AND beat_at <= now() - $2::interval`, batch, RecordingStale.String())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cancel batch %s: %w", batch, err)
	}
	return int(n), nil
}

// CancelledJobReason is the error of a job a cancel of chosen jobs ended.
const CancelledJobReason = "cancelled by a cancel of this job"

// CancelJobs ends the chosen jobs of the batch (at most RequeueJobsMax)
// that are not final yet as 'cancelled', as Cancel does for every job, the
// batch and its other jobs going on; it returns how many jobs it ended.
// Jobs final already, or not of the batch, are left as they are.
// ErrNotFound for no such batch.
func (s *Store) CancelJobs(ctx context.Context, batch string, jobs []string) (int, error) {
	if len(jobs) == 0 {
		return 0, fmt.Errorf("cancel jobs of %s: %w: no job chosen", batch, ErrInvalid)
	}
	if err := checkJobs(jobs); err != nil {
		return 0, fmt.Errorf("cancel jobs of %s: %w", batch, err)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT true FROM batches WHERE name = $1`, batch).Scan(&exists); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("batch %s: %w", batch, ErrNotFound)
			}
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE jobs SET status = 'cancelled', error = $3, finished_at = now(), wave_id = NULL
			WHERE id = ANY($2::text[]) AND batch = $1 AND status = 'queued'`, batch, jobs, CancelledJobReason)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cancel jobs of %s: %w", batch, err)
	}
	return int(n), nil
}

// Cap is a batch's spend cap. A nil field means no cap on that measure.
type Cap struct {
	// MaxCostUSD caps the estimated cost in US dollars.
	MaxCostUSD *float64
	// MaxTotalTokens caps input plus output tokens.
	MaxTotalTokens *int64
}

// Capped reports whether c caps anything.
func (c Cap) Capped() bool { return c.MaxCostUSD != nil || c.MaxTotalTokens != nil }

// Spend is what a capped batch has spent and holds for calls in flight.
type Spend struct {
	Cap
	// Tokens and CostUSD are charged so far; HeldTokens and HeldCostUSD
	// are reserved by calls in flight.
	Tokens, HeldTokens   int64
	CostUSD, HeldCostUSD float64
	// Calls counts the calls charged.
	Calls int64
}

// SetCap sets (or, with a Cap capping nothing, removes) the batch's spend
// cap. When a batch becomes capped, its spend counter starts from what the
// ledger has recorded of it (final jobs and interrupted calls); calls in
// flight at that moment are charged when their rows are written.
func (s *Store) SetCap(ctx context.Context, batch string, c Cap) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE batches SET max_cost_usd = $2, max_total_tokens = $3 WHERE name = $1`,
			batch, c.MaxCostUSD, c.MaxTotalTokens)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("batch %s: %w", batch, ErrNotFound)
		}
		if !c.Capped() {
			_, err := tx.Exec(ctx, `DELETE FROM spend_counters WHERE batch = $1`, batch)
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO spend_counters (batch, tokens, cost_usd, calls)
			SELECT $1, coalesce(final_tokens_in + final_tokens_out + interrupted_tokens_in + interrupted_tokens_out, 0),
			       coalesce(cost_usd, 0), 0
			FROM (SELECT $1::text AS batch) b LEFT JOIN batch_spend s USING (batch)
			ON CONFLICT (batch) DO NOTHING`, batch)
		return err
	})
	if err != nil {
		return fmt.Errorf("set cap of batch %s: %w", batch, err)
	}
	return nil
}

// BatchSpend returns the batch's cap and what it has spent: a capped
// batch's spend counter, or for a batch without a cap (which keeps no
// counter) its spend in the ledger, as a cap set later would start from.
// ErrNotFound for no such batch.
func (s *Store) BatchSpend(ctx context.Context, batch string) (Spend, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var sp Spend
	err := s.pool.QueryRow(ctx, `
		SELECT b.max_cost_usd::float8, b.max_total_tokens,
		       coalesce(c.tokens, (SELECT s.final_tokens_in + s.final_tokens_out + s.interrupted_tokens_in + s.interrupted_tokens_out
		                           FROM batch_spend s WHERE s.batch = b.name), 0),
		       coalesce(c.cost_usd, (SELECT s.cost_usd FROM batch_spend s WHERE s.batch = b.name), 0)::float8,
		       coalesce(c.calls, 0),
		       coalesce((SELECT sum(tokens) FROM spend_holds h WHERE h.batch = b.name AND h.expires_at > now()), 0)::int8,
		       coalesce((SELECT sum(cost_usd) FROM spend_holds h WHERE h.batch = b.name AND h.expires_at > now()), 0)::float8
		FROM batches b LEFT JOIN spend_counters c ON c.batch = b.name WHERE b.name = $1`, batch).Scan(
		&sp.MaxCostUSD, &sp.MaxTotalTokens, &sp.Tokens, &sp.CostUSD, &sp.Calls, &sp.HeldTokens, &sp.HeldCostUSD)
	if errors.Is(err, pgx.ErrNoRows) {
		return Spend{}, fmt.Errorf("batch %s: %w", batch, ErrNotFound)
	}
	if err != nil {
		return Spend{}, fmt.Errorf("read spend of batch %s: %w", batch, err)
	}
	return sp, nil
}

// Hold is a reservation of a capped batch's budget for one call: taken
// before the call is sent (Reserve), set to what the call used once it
// ended (SettleHold), and dropped by the transaction that writes the
// call's row (Result.Holds, Interruption.Holds), which charges the
// batch's spend counter with the row: until then the call's spend is
// held, after it counted, never neither. A hold whose worker died expires.
type Hold struct {
	ID    int64
	Batch string
}

// Reserve holds tokens and costUSD of the batch's budget for one call
// about to be sent, until ttl passes (a worker that dies releases its holds
// that way), and returns the hold: ErrOverBudget when what is spent and
// asked would pass the cap, ErrBudgetHeld when only the holds of calls in
// flight are in the way. Holds of a batch are taken one at a time (the
// batch row is locked), so workers together never reserve past the cap;
// the batch's expired holds are cleared then. A batch without a cap
// returns a zero Hold and no error.
func (s *Store) Reserve(ctx context.Context, batch string, tokens int64, costUSD float64, ttl time.Duration) (Hold, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var h Hold
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var c Cap
		if err := tx.QueryRow(ctx, `SELECT max_cost_usd::float8, max_total_tokens FROM batches WHERE name = $1 FOR UPDATE`, batch).
			Scan(&c.MaxCostUSD, &c.MaxTotalTokens); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("batch %s: %w", batch, ErrNotFound)
			}
			return err
		}
		if !c.Capped() {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM spend_holds WHERE batch = $1 AND expires_at <= now()`, batch); err != nil {
			return err
		}
		var spentT, heldT int64
		var spentC, heldC float64
		if err := tx.QueryRow(ctx, `
			SELECT coalesce((SELECT tokens FROM spend_counters WHERE batch = $1), 0),
			       coalesce((SELECT cost_usd FROM spend_counters WHERE batch = $1), 0)::float8,
			       coalesce((SELECT sum(tokens) FROM spend_holds WHERE batch = $1), 0)::int8,
			       coalesce((SELECT sum(cost_usd) FROM spend_holds WHERE batch = $1), 0)::float8`,
			batch).Scan(&spentT, &spentC, &heldT, &heldC); err != nil {
			return err
		}
		if c.MaxTotalTokens != nil && spentT+tokens > *c.MaxTotalTokens {
			return fmt.Errorf("%w: %d tokens spent of %d, and this call may take up to %d (its prompt and all its max tokens of output), more than the %d left",
				ErrOverBudget, spentT, *c.MaxTotalTokens, tokens, *c.MaxTotalTokens-spentT)
		}
		if c.MaxCostUSD != nil && spentC+costUSD > *c.MaxCostUSD {
			return fmt.Errorf("%w: $%.6f spent of $%.6f, and this call may cost up to $%.6f (its prompt and all its max tokens of output), more than the $%.6f left",
				ErrOverBudget, spentC, *c.MaxCostUSD, costUSD, *c.MaxCostUSD-spentC)
		}
		if (c.MaxTotalTokens != nil && spentT+heldT+tokens > *c.MaxTotalTokens) ||
			(c.MaxCostUSD != nil && spentC+heldC+costUSD > *c.MaxCostUSD) {
			return fmt.Errorf("%w: %d tokens and $%.6f held", ErrBudgetHeld, heldT, heldC)
		}
		h.Batch = batch
		return tx.QueryRow(ctx, `
			INSERT INTO spend_holds (batch, tokens, cost_usd, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))
			RETURNING id`, batch, tokens, costUSD, ttl.Seconds()).Scan(&h.ID)
	})
	if err != nil {
		if errors.Is(err, ErrOverBudget) || errors.Is(err, ErrBudgetHeld) {
			return Hold{}, fmt.Errorf("batch %s: %w", batch, err)
		}
		return Hold{}, fmt.Errorf("reserve budget of batch %s: %w", batch, err)
	}
	return h, nil
}

// SettleHold sets a hold to what its call used, once the call ended: it
// holds that much until the call's row is written (or the hold expires).
// A call that used nothing (it got no reply) has its hold dropped. A zero
// Hold (an uncapped batch) does nothing.
func (s *Store) SettleHold(ctx context.Context, h Hold, tokens int64, costUSD float64) error {
	if h.ID == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var err error
	if tokens == 0 && costUSD == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM spend_holds WHERE id = $1`, h.ID)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE spend_holds SET tokens = $2, cost_usd = $3 WHERE id = $1`, h.ID, tokens, costUSD)
	}
	if err != nil {
		return fmt.Errorf("settle hold of batch %s: %w", h.Batch, err)
	}
	return nil
}

// RenewHolds moves the expiry of the holds ids to ttl from now: their
// calls are in flight, or ended and not yet written. A hold that is gone
// (written, or expired and cleared) is not brought back.
func (s *Store) RenewHolds(ctx context.Context, ids []int64, ttl time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE spend_holds SET expires_at = now() + $2::interval WHERE id = ANY($1)`, ids, ttl); err != nil {
		return fmt.Errorf("renew %d holds: %w", len(ids), err)
	}
	return nil
}

// dropHolds deletes the holds ids in the transaction that writes their
// calls' rows (which charges the spend counters).
func dropHolds(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM spend_holds WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("drop the holds of the calls written: %w", err)
	}
	return nil
}

// BatchCap returns the batch's spend cap; it caps nothing when none is
// set, or the ledger does not have the batch.
func (s *Store) BatchCap(ctx context.Context, batch string) (Cap, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var c Cap
	err := s.pool.QueryRow(ctx, `SELECT max_cost_usd::float8, max_total_tokens FROM batches WHERE name = $1`,
		batch).Scan(&c.MaxCostUSD, &c.MaxTotalTokens)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cap{}, nil
	}
	if err != nil {
		return Cap{}, fmt.Errorf("read the spend cap of batch %s: %w", batch, err)
	}
	return c, nil
}

// RunCount is what one run of a batch did.
type RunCount struct {
	// Jobs counts the run's jobs by their outcome in that run (from
	// job_runs when a later run replaced it, else from the job row).
	Jobs map[string]int
	// Attempts counts the run's attempt rows.
	Attempts int
}

// RunCounts returns what run of batch did.
func (s *Store) RunCounts(ctx context.Context, batch string, run int) (RunCount, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rc := RunCount{Jobs: map[string]int{}}
	rows, err := s.pool.Query(ctx, `
		SELECT status, count(*) FROM (
			SELECT r.status FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.batch = $1 AND r.run = $2
			UNION ALL
			SELECT status FROM jobs WHERE batch = $1 AND run = $2
		) x GROUP BY status`, batch, run)
	if err != nil {
		return rc, fmt.Errorf("count run %d of %s: %w", run, batch, err)
	}
	var st string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { rc.Jobs[st] = n; return nil }); err != nil {
		return rc, fmt.Errorf("count run %d of %s: %w", run, batch, err)
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = $1 AND a.run = $2`,
		batch, run).Scan(&rc.Attempts)
	if err != nil {
		return rc, fmt.Errorf("count run %d of %s: %w", run, batch, err)
	}
	return rc, nil
}

// Measured is what earlier batches of a schema and model did, per job.
type Measured struct {
	// Jobs and Batches count the finished jobs measured (valid, invalid or
	// failed) and their batches; 0 when there is no history.
	Jobs, Batches int
	// MeanAttempts, MeanTokensIn and MeanTokensOut are per job.
	MeanAttempts, MeanTokensIn, MeanTokensOut float64
}

// Measure returns what the finished jobs of earlier batches with this
// schema and model did, for an estimate of a new batch.
func (s *Store) Measure(ctx context.Context, schemaHash, model string) (Measured, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var m Measured
	err := s.pool.QueryRow(ctx, `
		SELECT count(*), count(DISTINCT batch), coalesce(avg(attempts), 0)::float8,
		       coalesce(avg(tokens_in), 0)::float8, coalesce(avg(tokens_out), 0)::float8
		FROM jobs WHERE schema_hash = $1 AND model = $2 AND status IN ('valid', 'invalid', 'failed') AND attempts > 0`,
		schemaHash, model).Scan(&m.Jobs, &m.Batches, &m.MeanAttempts, &m.MeanTokensIn, &m.MeanTokensOut)
	if err != nil {
		return m, fmt.Errorf("measure earlier batches: %w", err)
	}
	return m, nil
}

// statusText is statuses as the ledger's text column holds them.
func statusText(statuses []fixpoint.Status) []string {
	out := make([]string, len(statuses))
	for i, st := range statuses {
		out[i] = string(st)
	}
	return out
}
