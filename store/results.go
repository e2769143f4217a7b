package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/jackc/pgx/v5"
)

// Attempt is one provider call of a job and what came of it.
type Attempt struct {
	// No is the attempt number from 1; 0 means its position in the slice + 1.
	No int
	// Request is the request as sent (messages) as JSON; nil when only
	// RequestHash is kept. With System set, it holds the messages after
	// the system prompt; Store.Job returns them with the system prompt first.
	Request json.RawMessage
	// System is the system prompt sent first, kept once per distinct text
	// in system_prompts; nil when none was sent or only RequestHash is kept.
	System *Prompt
	// RequestHash is a hash of the request.
	RequestHash string
	// Raw is the model's reply text.
	Raw string
	// Source says where in the reply the value was found.
	Source string
	// Repairs lists the local repairs applied, as JSON; may be nil.
	Repairs json.RawMessage
	// Errors is a JSON array of {path, keyword, class, message}; nil means [].
	Errors json.RawMessage
	// Class is "" for a valid attempt, else one of syntax, shape, semantic,
	// truncated, refusal, provider (a CHECK constraint enforces the set).
	Class string
	// Valid reports whether the attempt produced a schema-valid value.
	Valid bool
	// RepairedLocally reports whether local repairs made the value valid.
	RepairedLocally bool
	// FinishReason is the provider's finish reason, normalized.
	FinishReason string
	// LatencyMS is the provider call's latency in milliseconds.
	LatencyMS int64
	// TokensIn, TokensOut and TokensCached are the provider's usage counts.
	TokensIn, TokensOut, TokensCached int64
	// TransportRetries is how many times the call was retried in transport.
	TransportRetries int
	// RetryClasses is a JSON array of the retried failures' classes; may be nil.
	RetryClasses json.RawMessage
	// ProviderStatus is the HTTP status of the last call, 0 if none.
	ProviderStatus int
	// ProviderError is the provider's error message, if any.
	ProviderError string
	// Model is the model that answered.
	Model string
	// RequestID is the provider's request id.
	RequestID string
	// StartedAt is when the attempt started; zero means unknown.
	StartedAt time.Time
	// CostUSD is the attempt's estimated cost at its price basis.
	CostUSD float64
	// Feedback is the correction sent after this attempt, "" when none: a
	// job continued from the ledger (a later wave) goes on from it.
	Feedback string
	// ProviderClass is why a call got no reply, as package llm classifies
	// it (rate_limited, expired, cancelled, ...); "" for a reply.
	ProviderClass string
	// ProviderCode is the provider's own code of a failed call
	// (context_length_exceeded, not_found_error, ...); "" when none.
	ProviderCode string
	// PriceBasis is "realtime", "batch" or "flex"; "" means realtime.
	PriceBasis string
	// ServiceTier is the tier the provider says it served a call asked
	// for flex on ("flex", "default"); "" (stored NULL) for a call asked
	// for no tier, or whose reply named none.
	ServiceTier string
	// TokensCacheWrite counts prompt tokens written to the provider's cache.
	TokensCacheWrite int64
	// WaveID is the wave that carried the call, 0 for a realtime call.
	WaveID int64
	// Coerced counts the schema-guided fixes applied to the reply's value
	// (each is in Repairs too); a valid attempt with some is a call saved.
	Coerced int
	// PatchOutcome says how a reply to a patch request went ("applied",
	// "parse_error", "apply_error", "out_of_scope"); "" when none.
	PatchOutcome string
	// Unpriced: the worker had no price for the model; CostUSD is 0 for
	// want of one.
	Unpriced bool
	// Evidence is the JSON array of the value's leaves graded against the
	// job's source ({path, grade, start, end}); nil when the stage did not
	// run.
	Evidence json.RawMessage
	// Warnings is the JSON array of the schema's rules of severity warn
	// the value failed; nil for none.
	Warnings json.RawMessage
	// SchemaHash is the schema the reply was checked against, "" for the
	// job's own.
	SchemaHash string
	// Step is the part of a document strategy the call was (chunk, merge,
	// repair, agent: fixpoint.StepKind); "" for the other strategies, whose
	// rows keep NULL.
	Step string
	// Chunk is the chunk a chunk step read, nil for none.
	Chunk *fixpoint.ChunkRef
	// Fields counts the non-null strings, numbers and booleans of a
	// step's value (CountFields); nil when the attempt has no step or no
	// value.
	Fields *int
	// ToolCalls is the JSON array of the reply's tool calls ({id, name,
	// arguments}), nil for none.
	ToolCalls json.RawMessage
	// Conflicts is the JSON array of a merge step's conflicts ({path,
	// values, chunks, chosen}), nil for none.
	Conflicts json.RawMessage
}

// Result is a job's final outcome, as the pipeline saves it.
type Result struct {
	// JobID identifies the job; required.
	JobID string
	// Status is the final status: valid, invalid or failed (rejected and dead
	// are accepted too, but Reject is the usual path for them).
	Status fixpoint.Status
	// Value is the final value as JSON; nil for none.
	Value json.RawMessage
	// Error describes why the job is not valid.
	Error string
	// FinalClass is the class of the last failed attempt.
	FinalClass string
	// Attempts and Calls count attempts and provider calls.
	Attempts, Calls int
	// FirstAttemptValid and RepairedLocally summarize the attempts.
	FirstAttemptValid, RepairedLocally bool
	// TokensIn, TokensOut and TokensCached are the job's totals.
	TokensIn, TokensOut, TokensCached int64
	// CostUSD is the estimated cost in US dollars.
	CostUSD float64
	// StartedAt is when the worker started the job; zero means unknown.
	StartedAt time.Time
	// FinishedAt is when the job finished; zero means the commit time.
	FinishedAt time.Time
	// WallMS is the job's wall time in milliseconds.
	WallMS int64
	// Deliveries is the JetStream delivery count of the finishing message.
	Deliveries int
	// Run is the batch run the result belongs to; 0 means 1. A result
	// whose run is not the job's current run (the job was requeued since)
	// does not win.
	Run int
	// TokensCacheWrite is the job's prompt tokens written to a cache.
	TokensCacheWrite int64
	// Recorded is how many of the job's first attempts of the run the
	// ledger holds already (recorded wave by wave): AttemptRows then holds
	// only the later ones.
	Recorded int
	// AttemptRows are the attempts, written only if this result wins (a
	// loser's are kept as interrupted calls).
	AttemptRows []Attempt
	// Holds are the holds on the batch's budget of the calls the result
	// writes (see Hold): dropped by the transaction that writes them,
	// won or lost.
	Holds []int64
	// Job, when set, is inserted first if the job has no row (a job published
	// without a ledger row). Without it a missing job gets a bare row holding
	// only its id and the result.
	Job *NewJob
}

func validJSON(name, id string, r json.RawMessage) error {
	if badJSON(r) {
		return fmt.Errorf("%w: job %s: %s is not valid JSON", ErrInvalid, id, name)
	}
	return nil
}

// badJSON reports whether r is set and is not valid JSON.
func badJSON(r json.RawMessage) bool { return len(r) > 0 && !json.Valid(r) }

func (r Result) check() error {
	if r.JobID == "" {
		return fmt.Errorf("%w: result with empty job id", ErrInvalid)
	}
	if !r.Status.Final() {
		return fmt.Errorf("%w: job %s: status %q is not final", ErrInvalid, r.JobID, r.Status)
	}
	if r.Job != nil && r.Job.ID != r.JobID {
		return fmt.Errorf("%w: job %s: Job.ID is %q", ErrInvalid, r.JobID, r.Job.ID)
	}
	if err := validJSON("value", r.JobID, r.Value); err != nil {
		return err
	}
	if r.Job != nil {
		if err := validJSON("metadata", r.JobID, r.Job.Metadata); err != nil {
			return err
		}
	}
	for _, a := range r.AttemptRows {
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"request", a.Request}, {"repairs", a.Repairs}, {"errors", a.Errors}, {"retry_classes", a.RetryClasses},
			{"evidence", a.Evidence}, {"warnings", a.Warnings}, {"tool_calls", a.ToolCalls}, {"conflicts", a.Conflicts}} {
			if badJSON(f.raw) { // the name is formatted only for the error
				return fmt.Errorf("%w: job %s: attempt %d %s is not valid JSON", ErrInvalid, r.JobID, a.No, f.name)
			}
		}
		if a.System != nil && a.System.sha == "" {
			return fmt.Errorf("%w: job %s: attempt %d system prompt not made with NewPrompt", ErrInvalid, r.JobID, a.No)
		}
		if err := a.checkStep(); err != nil {
			return fmt.Errorf("%w: job %s: attempt %d: %v", ErrInvalid, r.JobID, a.No, err)
		}
	}
	return nil
}

func nullJSON(r json.RawMessage) *string {
	if len(r) == 0 {
		return nil
	}
	s := string(r)
	return &s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// saveJobsSQL inserts the rows of jobs that have none, so that every result
// has a row to update. It runs only for the ids applyResultsSQL found
// missing: a job enqueued by the CLI already has its row, and its prompt is
// not sent again.
const saveJobsSQL = `
INSERT INTO jobs (id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata)
SELECT r.id, nullif(r.batch, ''), r.row_no, (SELECT hash FROM schemas WHERE hash = r.schema_hash),
       r.prompt, r.provider, r.model, r.mode, r.strategy, r.metadata::jsonb
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
     AS r(id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata)
ON CONFLICT (id) DO NOTHING`

// applyResultsSQL locks the still-queued jobs in id order (so concurrent
// savers cannot deadlock) and sets their final state. It returns the ids it
// set (won = true: the results that won) and the ids that have no job row
// yet (won = false).
//
// Every join in it has the jobs primary key on its inner side, so it costs
// the same per row whatever the batch size and whatever plan Postgres picks.
// The locking query is an InitPlan, (SELECT count(*) FROM locked), run once
// before the update reads a row, not a relation joined with the batch: the
// planner estimates an unnested array at 10 rows and, once most jobs in the
// table are final, the locked rows at one, and joined the two by a nested
// loop that rescanned the batch for each locked row. That took 40 to 80 ms
// per 256-job batch in the bench, rising with the ledger's history
// (TestApplyResultsPlanIsLinear).
//
// The status is tested with IS NOT DISTINCT FROM (the same as = on this NOT
// NULL column) so that the partial index of queued jobs cannot serve these
// lookups: with statistics taken before a new batch was enqueued, Postgres
// believes few jobs are queued and scanned that whole index, every queued
// job of every batch, for each commit.
const applyResultsSQL = `
WITH r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[],
                         $8::bool[], $9::bool[], $10::int8[], $11::int8[], $12::int8[], $13::float8[],
                         $14::timestamptz[], $15::timestamptz[], $16::int8[], $17::int[], $18::int[], $19::int8[])
    AS r(id, status, value, error, final_class, attempts, calls, first_attempt_valid, repaired_locally,
         tokens_in, tokens_out, tokens_cached, cost_usd, started_at, finished_at, wall_ms, deliveries, run, tokens_cache_write)
), locked AS (
    SELECT j.id FROM jobs j WHERE j.id = ANY($1::text[]) AND j.status IS NOT DISTINCT FROM 'queued'
    ORDER BY j.id FOR UPDATE
), upd AS (
    UPDATE jobs j
    SET status = r.status, value = r.value::jsonb, error = r.error, final_class = r.final_class,
        attempts = r.attempts, calls = r.calls, first_attempt_valid = r.first_attempt_valid,
        repaired_locally = r.repaired_locally, tokens_in = r.tokens_in, tokens_out = r.tokens_out,
        tokens_cached = r.tokens_cached, cost_usd = r.cost_usd, started_at = r.started_at,
        finished_at = coalesce(r.finished_at, now()), wall_ms = r.wall_ms, deliveries = r.deliveries,
        tokens_cache_write = r.tokens_cache_write, wave_id = NULL
    FROM r
    WHERE j.id = r.id AND j.status IS NOT DISTINCT FROM 'queued' AND j.run = r.run AND (SELECT count(*) FROM locked) >= 0
    RETURNING j.id
)
SELECT id, true FROM upd
UNION ALL
SELECT r.id, false FROM r WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = r.id)`

// attemptColumns are the attempts columns SaveResults copies, in the order
// attemptRows.Values returns them.
var attemptColumns = []string{"job_id", "attempt_no", "request", "request_hash", "raw", "source", "repairs", "errors",
	"class", "valid", "repaired_locally", "finish_reason", "latency_ms", "tokens_in", "tokens_out", "tokens_cached",
	"transport_retries", "retry_classes", "provider_status", "provider_error", "model", "request_id", "started_at", "system_sha256", "run",
	"feedback", "provider_class", "price_basis", "tokens_cache_write", "cost_usd", "wave_id", "coerced", "patch_outcome", "unpriced", "provider_code",
	"evidence", "warnings", "schema_hash",
	"step", "chunk_n", "chunk_start", "chunk_end", "fields", "tool_calls", "conflicts", "service_tier"}

// SaveResults stores final results in one transaction and reports, for each
// result, whether this call set it (won[i]). It is idempotent:
//   - the first final result of a job wins: a job already final is left as it
//     is, and its won entry is false (so is that of a second result for the
//     same job in the same slice);
//   - attempt rows are inserted only for the results that won, so a loser
//     adds nothing;
//   - a job with no row gets one (from Result.Job when set) before the result
//     is applied.
//
// The job rows are set with one statement over arrays; the attempt rows,
// the bulk of the bytes (requests and replies), are streamed with COPY, so
// the memory a save holds beyond its results does not grow with the slice.
// Attempts are written only by the transaction that moved their job out of
// 'queued' under a row lock, so the COPY never meets an existing row.
//
// Writing a call's row charges its batch's spend counter, when the batch
// has a cap, in the same transaction (a trigger does, whatever writes the
// row), and the results' Holds are dropped in it.
//
// Transient errors retry the whole transaction with a bounded backoff. If
// the connection drops during COMMIT the retry may find that the first try
// did commit; the results then report won=false although they were stored,
// which is still safe to ack. Malformed results fail with ErrInvalid before
// anything is written.
func (s *Store) SaveResults(ctx context.Context, results []Result) ([]bool, error) {
	won := make([]bool, len(results))
	if len(results) == 0 {
		return won, nil
	}
	first := make(map[string]int, len(results))
	var order []int // indices of the first result per job
	for i, r := range results {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("save results: %w", err)
		}
		if _, dup := first[r.JobID]; !dup {
			first[r.JobID] = i
			order = append(order, i)
		}
	}

	var holds []int64
	for i := range results {
		holds = append(holds, results[i].Holds...)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var winners []int    // indices into results, in the order they won
	var prompts []string // system prompts written, by hash
	err := s.retry(ctx, func(ctx context.Context) error {
		winners, prompts = winners[:0], nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := dropHolds(ctx, tx, holds); err != nil {
				return err
			}
			set, missing, err := applyResults(ctx, tx, results, order, first)
			if err != nil {
				return err
			}
			winners = append(winners, set...)
			if len(missing) > 0 {
				if err := insertJobs(ctx, tx, results, missing); err != nil {
					return err
				}
				set, _, err := applyResults(ctx, tx, results, missing, first)
				if err != nil {
					return err
				}
				winners = append(winners, set...)
			}
			// The results that lost (their job was final already) made
			// calls too: keep them as superseded deliveries.
			if losers := lostResults(results, winners, missing); len(losers) > 0 {
				losers, err := supersededBy(ctx, tx, results, losers)
				if err != nil {
					return fmt.Errorf("find superseded results: %w", err)
				}
				if _, err := s.insertInterrupted(ctx, tx, losers); err != nil {
					return fmt.Errorf("save superseded attempts: %w", err)
				}
			}
			if len(winners) == 0 {
				return nil
			}
			var texts []string
			prompts, texts = s.newPrompts(results, winners)
			if err := putPrompts(ctx, tx, prompts, texts); err != nil {
				return fmt.Errorf("save system prompts: %w", err)
			}
			_, err = tx.CopyFrom(ctx, pgx.Identifier{"attempts"}, attemptColumns, newAttemptRows(results, winners))
			if err != nil {
				return fmt.Errorf("copy attempts: %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("save %d results: %w", len(results), err)
	}
	if len(prompts) > 0 {
		s.prompts.add(prompts) // committed
	}
	for _, i := range winners {
		won[i] = true
	}
	return won, nil
}

// sameStart reports whether a stored started_at is t (Postgres keeps
// microseconds; a zero t is stored as NULL).
func sameStart(stored *time.Time, t time.Time) bool {
	if stored == nil {
		return t.IsZero()
	}
	return stored.Equal(t.Truncate(time.Microsecond))
}

// lostResults are the indices of the results with attempts that neither
// won nor lacked a job row: their job was final already, or another result
// for it in the same slice came first.
func lostResults(results []Result, winners, missing []int) []int {
	if len(winners) == len(results) {
		return nil
	}
	done := make(map[int]bool, len(winners)+len(missing))
	for _, i := range winners {
		done[i] = true
	}
	for _, i := range missing {
		done[i] = true
	}
	var out []int
	for i := range results {
		if !done[i] && len(results[i].AttemptRows) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// supersededBy returns the interruptions of the losing results whose job
// was finished by another run: a result whose job row holds its own
// delivery and start time is this result, committed by an earlier try of
// the same save (the connection dropped during COMMIT), not a loser.
func supersededBy(ctx context.Context, tx pgx.Tx, results []Result, losers []int) ([]Interruption, error) {
	ids := make([]string, len(losers))
	for k, i := range losers {
		ids[k] = results[i].JobID
	}
	type final struct {
		deliveries int
		started    *time.Time
		status     string
	}
	finals := make(map[string]final, len(ids))
	rows, err := tx.Query(ctx, `SELECT id, deliveries, started_at, status FROM jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	var id string
	var f final
	if _, err := pgx.ForEachRow(rows, []any{&id, &f.deliveries, &f.started, &f.status}, func() error {
		finals[id] = f
		return nil
	}); err != nil {
		return nil, err
	}
	var out []Interruption
	for _, i := range losers {
		r := &results[i]
		f, ok := finals[r.JobID]
		if ok && f.deliveries == r.Deliveries && sameStart(f.started, r.StartedAt) {
			continue // our own earlier commit
		}
		reason := InterruptSuperseded
		if f.status == string(fixpoint.StatusCancelled) {
			reason = InterruptCancelled // enqueue cancel ended the job while this delivery ran
		}
		out = append(out, Interruption{JobID: r.JobID, Run: r.Run, Delivery: r.Deliveries, Reason: reason, Attempts: r.AttemptRows})
	}
	return out, nil
}

// applyResults sets the final state of the jobs of results[idx] that are
// still queued. It returns the indices it set and those whose job has no
// row.
func applyResults(ctx context.Context, tx pgx.Tx, results []Result, idx []int, first map[string]int) (set, missing []int, err error) {
	var c jobColumns
	for _, i := range idx {
		c.add(results[i])
	}
	rows, err := tx.Query(ctx, applyResultsSQL, c.args()...)
	if err != nil {
		return nil, nil, err
	}
	var id string
	var won bool
	_, err = pgx.ForEachRow(rows, []any{&id, &won}, func() error {
		if won {
			set = append(set, first[id])
		} else {
			missing = append(missing, first[id])
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return set, missing, nil
}

// insertJobs gives the jobs of results[idx] a row (and their batches one)
// where they have none.
func insertJobs(ctx context.Context, tx pgx.Tx, results []Result, idx []int) error {
	var batches, id, batch, schema, prompt, provider, model, mode, strategy, meta []string
	var rowNo []int32
	seen := map[string]bool{}
	for _, i := range idx {
		r := results[i]
		j := r.Job
		if j == nil {
			j = &NewJob{}
		}
		if j.Batch != "" && !seen[j.Batch] {
			seen[j.Batch] = true
			batches = append(batches, j.Batch)
		}
		id = append(id, r.JobID)
		batch = append(batch, txt(j.Batch))
		rowNo = append(rowNo, int32(j.RowNo))
		schema = append(schema, txt(j.SchemaHash))
		prompt = append(prompt, txt(j.Prompt))
		provider = append(provider, txt(j.Provider))
		model = append(model, txt(j.Model))
		mode = append(mode, txt(j.Mode))
		strategy = append(strategy, txt(j.Strategy))
		meta = append(meta, rawOr(pgJSON(j.Metadata), "{}"))
	}
	b := &pgx.Batch{}
	if len(batches) > 0 {
		b.Queue(`INSERT INTO batches (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, batches)
	}
	b.Queue(saveJobsSQL, id, batch, rowNo, schema, prompt, provider, model, mode, strategy, meta)
	return tx.SendBatch(ctx, b).Close()
}

// jobColumns holds the job-level fields of a slice of results as one array
// per SQL column, the shape unnest() takes: one statement carries any
// number of rows.
type jobColumns struct {
	id, status, error, class          []string
	value                             []*string
	attempts, calls, deliveries, run  []int32
	first, repaired                   []bool
	in, out, cached, wall, cacheWrite []int64
	cost                              []float64
	started, finished                 []*time.Time
}

// args are applyResultsSQL's arguments, $1 to $19.
func (c *jobColumns) args() []any {
	return []any{c.id, c.status, c.value, c.error, c.class, c.attempts, c.calls, c.first, c.repaired,
		c.in, c.out, c.cached, c.cost, c.started, c.finished, c.wall, c.deliveries, c.run, c.cacheWrite}
}

func (c *jobColumns) add(r Result) {
	c.id = append(c.id, r.JobID)
	c.status = append(c.status, txt(string(r.Status)))
	c.value = append(c.value, nullJSON(pgJSON(r.Value)))
	c.error = append(c.error, txt(r.Error))
	c.class = append(c.class, txt(r.FinalClass))
	c.attempts = append(c.attempts, int32(r.Attempts))
	c.calls = append(c.calls, int32(r.Calls))
	c.first = append(c.first, r.FirstAttemptValid)
	c.repaired = append(c.repaired, r.RepairedLocally)
	c.in = append(c.in, r.TokensIn)
	c.out = append(c.out, r.TokensOut)
	c.cached = append(c.cached, r.TokensCached)
	c.cost = append(c.cost, r.CostUSD)
	c.started = append(c.started, nullTime(r.StartedAt))
	c.finished = append(c.finished, nullTime(r.FinishedAt))
	c.wall = append(c.wall, r.WallMS)
	c.deliveries = append(c.deliveries, int32(r.Deliveries))
	c.run = append(c.run, int32(max(r.Run, 1)))
	c.cacheWrite = append(c.cacheWrite, r.TokensCacheWrite)
}

// attemptRows is a pgx.CopyFromSource over the attempts of the winning
// results, one row at a time: nothing is converted ahead of the stream. An
// attempt number a result repeats is skipped (the first one stays, as ON
// CONFLICT DO NOTHING would have it): COPY would otherwise fail the whole
// batch on the primary key.
type attemptRows struct {
	results []Result
	winners []int
	w, a    int // current: winners[w]'s attempt a
	row     []any
	cur     *Attempt
	curJob  string
	curNo   int32
	curRun  int32
	seen    map[int32]bool // attempt numbers of the current result
}

func newAttemptRows(results []Result, winners []int) *attemptRows {
	return &attemptRows{results: results, winners: winners, a: -1, row: make([]any, len(attemptColumns)), seen: map[int32]bool{}}
}

func (s *attemptRows) Next() bool {
	for s.w < len(s.winners) {
		r := &s.results[s.winners[s.w]]
		s.a++
		if s.a >= len(r.AttemptRows) {
			s.w, s.a = s.w+1, -1
			clear(s.seen)
			continue
		}
		a := &r.AttemptRows[s.a]
		no := int32(a.No)
		if no == 0 {
			no = int32(s.a + 1)
		}
		if s.seen[no] || no <= int32(r.Recorded) {
			continue // a repeat, or recorded already (an earlier wave)
		}
		s.seen[no] = true
		s.cur, s.curJob, s.curNo, s.curRun = a, r.JobID, no, int32(max(r.Run, 1))
		return true
	}
	return false
}

func (s *attemptRows) Values() ([]any, error) {
	a := s.cur
	v := s.row
	v[0], v[1], v[2], v[3] = s.curJob, s.curNo, nullRaw(pgJSON(a.Request)), txt(a.RequestHash)
	v[4], v[5], v[6], v[7] = txt(a.Raw), txt(a.Source), nullRaw(pgJSON(a.Repairs)), rawOrEmpty(pgJSON(a.Errors))
	v[8], v[9], v[10], v[11] = txt(a.Class), a.Valid, a.RepairedLocally, txt(a.FinishReason)
	v[12], v[13], v[14], v[15] = a.LatencyMS, a.TokensIn, a.TokensOut, a.TokensCached
	v[16], v[17], v[18], v[19] = int32(a.TransportRetries), nullRaw(pgJSON(a.RetryClasses)), int32(a.ProviderStatus), txt(a.ProviderError)
	v[20], v[21], v[22] = txt(a.Model), txt(a.RequestID), nullTime(a.StartedAt)
	v[23] = nil
	if a.System != nil {
		v[23] = a.System.sha
	}
	v[24] = s.curRun
	v[25], v[26], v[27], v[28] = txt(a.Feedback), txt(a.ProviderClass), basisOr(a.PriceBasis), a.TokensCacheWrite
	v[29], v[30] = a.CostUSD, nullID(a.WaveID)
	v[31], v[32], v[33], v[34] = int32(a.Coerced), txt(a.PatchOutcome), a.Unpriced, txt(a.ProviderCode)
	v[35], v[36], v[37] = nullRaw(pgJSON(a.Evidence)), nullRaw(pgJSON(a.Warnings)), nullText(a.SchemaHash)
	copy(v[38:], a.stepValues())
	v[len(v)-1] = nullText(a.ServiceTier)
	return v, nil
}

func (s *attemptRows) Err() error { return nil }

// basisOr is the stored price basis: realtime when unset.
func basisOr(b string) string {
	if b == "" {
		return "realtime"
	}
	return b
}

// nullID is id, or NULL for 0.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// emptyArray is what an attempt with no errors stores.
var emptyArray = json.RawMessage(`[]`)

// rawOrEmpty is r, or [] when r is empty.
func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return emptyArray
	}
	return r
}

// nullText is s, or nil (SQL NULL) when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return txt(s)
}

// nullRaw is r, or nil (SQL NULL) when r is empty.
func nullRaw(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return r
}

// txt makes s storable in a text column: Postgres rejects NUL bytes and
// invalid UTF-8, and a reply may hold either. Both become U+FFFD.
func txt(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}

// pgJSON makes valid JSON storable as jsonb, which rejects the escape
// \u0000 in strings: such strings get U+FFFD instead. Other input is
// returned as is.
func pgJSON(r json.RawMessage) json.RawMessage {
	if !bytes.Contains(r, []byte(`\u0000`)) {
		return r
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return r
	}
	out, err := json.Marshal(scrub(v))
	if err != nil {
		return r
	}
	return out
}

func scrub(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "\x00", "\uFFFD")
	case []any:
		for i := range x {
			x[i] = scrub(x[i])
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[strings.ReplaceAll(k, "\x00", "\uFFFD")] = scrub(e)
		}
		return m
	}
	return v
}
