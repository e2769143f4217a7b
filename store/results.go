package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Attempt is one provider call of a job and what came of it.
type Attempt struct {
	// No is the attempt number from 1; 0 means its position in the slice + 1.
	No int
	// Request is the request as sent (messages) as JSON; nil when only
	// RequestHash is kept.
	Request json.RawMessage
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
}

// Result is a job's final outcome, as the pipeline saves it.
type Result struct {
	// JobID identifies the job; required.
	JobID string
	// Status is the final status: valid, invalid or failed (rejected and dead
	// are accepted too, but Reject is the usual path for them).
	Status string
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
	// AttemptRows are the attempts, written only if this result wins.
	AttemptRows []Attempt
	// Job, when set, is inserted first if the job has no row (a job published
	// without a ledger row). Without it a missing job gets a bare row holding
	// only its id and the result.
	Job *NewJob
}

func validJSON(name, id string, r json.RawMessage) error {
	if len(r) > 0 && !json.Valid(r) {
		return fmt.Errorf("%w: job %s: %s is not valid JSON", ErrInvalid, id, name)
	}
	return nil
}

func (r Result) check() error {
	if r.JobID == "" {
		return fmt.Errorf("%w: result with empty job id", ErrInvalid)
	}
	if !IsFinal(r.Status) {
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
		}{{"request", a.Request}, {"repairs", a.Repairs}, {"errors", a.Errors}, {"retry_classes", a.RetryClasses}} {
			if err := validJSON(fmt.Sprintf("attempt %d %s", a.No, f.name), r.JobID, f.raw); err != nil {
				return err
			}
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
// has a row to update.
const saveJobsSQL = `
INSERT INTO jobs (id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata)
SELECT r.id, nullif(r.batch, ''), r.row_no, (SELECT hash FROM schemas WHERE hash = r.schema_hash),
       r.prompt, r.provider, r.model, r.mode, r.strategy, r.metadata::jsonb
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
     AS r(id, batch, row_no, schema_hash, prompt, provider, model, mode, strategy, metadata)
ON CONFLICT (id) DO NOTHING`

// saveResultsSQL locks the still-queued jobs in id order (so concurrent
// savers cannot deadlock), sets their final state, inserts the attempts of
// exactly those jobs and returns their ids: the results that won.
const saveResultsSQL = `
WITH r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[],
                         $8::bool[], $9::bool[], $10::int8[], $11::int8[], $12::int8[], $13::float8[],
                         $14::timestamptz[], $15::timestamptz[], $16::int8[], $17::int[])
    AS r(id, status, value, error, final_class, attempts, calls, first_attempt_valid, repaired_locally,
         tokens_in, tokens_out, tokens_cached, cost_usd, started_at, finished_at, wall_ms, deliveries)
), locked AS (
    SELECT j.id FROM jobs j WHERE j.id = ANY($1::text[]) AND j.status = 'queued' ORDER BY j.id FOR UPDATE
), upd AS (
    UPDATE jobs j
    SET status = r.status, value = r.value::jsonb, error = r.error, final_class = r.final_class,
        attempts = r.attempts, calls = r.calls, first_attempt_valid = r.first_attempt_valid,
        repaired_locally = r.repaired_locally, tokens_in = r.tokens_in, tokens_out = r.tokens_out,
        tokens_cached = r.tokens_cached, cost_usd = r.cost_usd, started_at = r.started_at,
        finished_at = coalesce(r.finished_at, now()), wall_ms = r.wall_ms, deliveries = r.deliveries
    FROM r
    WHERE j.id = r.id AND j.id IN (SELECT id FROM locked) AND j.status = 'queued'
    RETURNING j.id
), ins AS (
    INSERT INTO attempts (job_id, attempt_no, request, request_hash, raw, source, repairs, errors, class,
                          valid, repaired_locally, finish_reason, latency_ms, tokens_in, tokens_out,
                          tokens_cached, transport_retries, retry_classes, provider_status, provider_error,
                          model, request_id, started_at)
    SELECT a.job_id, a.attempt_no, a.request::jsonb, a.request_hash, a.raw, a.source, a.repairs::jsonb,
           a.errors::jsonb, a.class, a.valid, a.repaired_locally, a.finish_reason, a.latency_ms, a.tokens_in,
           a.tokens_out, a.tokens_cached, a.transport_retries, a.retry_classes::jsonb, a.provider_status,
           a.provider_error, a.model, a.request_id, a.started_at
    FROM unnest($18::text[], $19::int[], $20::text[], $21::text[], $22::text[], $23::text[], $24::text[],
                $25::text[], $26::text[], $27::bool[], $28::bool[], $29::text[], $30::int8[], $31::int8[],
                $32::int8[], $33::int8[], $34::int[], $35::text[], $36::int[], $37::text[], $38::text[],
                $39::text[], $40::timestamptz[])
    AS a(job_id, attempt_no, request, request_hash, raw, source, repairs, errors, class, valid,
         repaired_locally, finish_reason, latency_ms, tokens_in, tokens_out, tokens_cached,
         transport_retries, retry_classes, provider_status, provider_error, model, request_id, started_at)
    WHERE a.job_id IN (SELECT id FROM upd)
    ON CONFLICT (job_id, attempt_no) DO NOTHING
    RETURNING 1
)
SELECT id FROM upd`

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

	var c columns
	for _, i := range order {
		c.add(results[i])
	}

	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var wonIDs []string
	err := s.retry(ctx, func(ctx context.Context) error {
		wonIDs = wonIDs[:0]
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			if len(c.batches) > 0 {
				b.Queue(`INSERT INTO batches (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, c.batches)
			}
			b.Queue(saveJobsSQL, c.j.id, c.j.batch, c.j.rowNo, c.j.schema, c.j.prompt, c.j.provider, c.j.model,
				c.j.mode, c.j.strategy, c.j.meta)
			b.Queue(saveResultsSQL,
				c.j.id, c.r.status, c.r.value, c.r.error, c.r.class, c.r.attempts, c.r.calls, c.r.first, c.r.repaired,
				c.r.in, c.r.out, c.r.cached, c.r.cost, c.r.started, c.r.finished, c.r.wall, c.r.deliveries,
				c.a.job, c.a.no, c.a.req, c.a.reqHash, c.a.raw, c.a.source, c.a.repairs, c.a.errors, c.a.class,
				c.a.valid, c.a.repaired, c.a.finish, c.a.latency, c.a.in, c.a.out, c.a.cached, c.a.retries,
				c.a.retryClasses, c.a.status, c.a.provErr, c.a.model, c.a.reqID, c.a.started,
			).Query(func(rows pgx.Rows) error {
				ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
				wonIDs = ids
				return err
			})
			return tx.SendBatch(ctx, b).Close()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("save %d results: %w", len(results), err)
	}
	for _, id := range wonIDs {
		won[first[id]] = true
	}
	return won, nil
}

// columns holds a slice of results as one array per SQL column, the shape
// unnest() takes: one statement carries any number of rows.
type columns struct {
	batches []string
	seen    map[string]bool
	j       struct {
		id, batch, schema, prompt, provider, model, mode, strategy, meta []string
		rowNo                                                            []int32
	}
	r struct {
		status, error, class        []string
		value                       []*string
		attempts, calls, deliveries []int32
		first, repaired             []bool
		in, out, cached, wall       []int64
		cost                        []float64
		started, finished           []*time.Time
	}
	a struct {
		job, reqHash, raw, source, errors, class, finish, provErr, model, reqID []string
		req, repairs, retryClasses                                              []*string
		no, retries, status                                                     []int32
		valid, repaired                                                         []bool
		latency, in, out, cached                                                []int64
		started                                                                 []*time.Time
	}
}

func (c *columns) add(r Result) {
	j := r.Job
	if j == nil {
		j = &NewJob{}
	}
	if j.Batch != "" && !c.seen[j.Batch] {
		if c.seen == nil {
			c.seen = map[string]bool{}
		}
		c.seen[j.Batch] = true
		c.batches = append(c.batches, j.Batch)
	}
	c.j.id = append(c.j.id, r.JobID)
	c.j.batch = append(c.j.batch, txt(j.Batch))
	c.j.rowNo = append(c.j.rowNo, int32(j.RowNo))
	c.j.schema = append(c.j.schema, txt(j.SchemaHash))
	c.j.prompt = append(c.j.prompt, txt(j.Prompt))
	c.j.provider = append(c.j.provider, txt(j.Provider))
	c.j.model = append(c.j.model, txt(j.Model))
	c.j.mode = append(c.j.mode, txt(j.Mode))
	c.j.strategy = append(c.j.strategy, txt(j.Strategy))
	c.j.meta = append(c.j.meta, rawOr(pgJSON(j.Metadata), "{}"))

	c.r.status = append(c.r.status, txt(r.Status))
	c.r.value = append(c.r.value, nullJSON(pgJSON(r.Value)))
	c.r.error = append(c.r.error, txt(r.Error))
	c.r.class = append(c.r.class, txt(r.FinalClass))
	c.r.attempts = append(c.r.attempts, int32(r.Attempts))
	c.r.calls = append(c.r.calls, int32(r.Calls))
	c.r.first = append(c.r.first, r.FirstAttemptValid)
	c.r.repaired = append(c.r.repaired, r.RepairedLocally)
	c.r.in = append(c.r.in, r.TokensIn)
	c.r.out = append(c.r.out, r.TokensOut)
	c.r.cached = append(c.r.cached, r.TokensCached)
	c.r.cost = append(c.r.cost, r.CostUSD)
	c.r.started = append(c.r.started, nullTime(r.StartedAt))
	c.r.finished = append(c.r.finished, nullTime(r.FinishedAt))
	c.r.wall = append(c.r.wall, r.WallMS)
	c.r.deliveries = append(c.r.deliveries, int32(r.Deliveries))

	for i, a := range r.AttemptRows {
		no := a.No
		if no == 0 {
			no = i + 1
		}
		c.a.job = append(c.a.job, r.JobID)
		c.a.no = append(c.a.no, int32(no))
		c.a.req = append(c.a.req, nullJSON(pgJSON(a.Request)))
		c.a.reqHash = append(c.a.reqHash, txt(a.RequestHash))
		c.a.raw = append(c.a.raw, txt(a.Raw))
		c.a.source = append(c.a.source, txt(a.Source))
		c.a.repairs = append(c.a.repairs, nullJSON(pgJSON(a.Repairs)))
		c.a.errors = append(c.a.errors, rawOr(pgJSON(a.Errors), "[]"))
		c.a.class = append(c.a.class, txt(a.Class))
		c.a.valid = append(c.a.valid, a.Valid)
		c.a.repaired = append(c.a.repaired, a.RepairedLocally)
		c.a.finish = append(c.a.finish, txt(a.FinishReason))
		c.a.latency = append(c.a.latency, a.LatencyMS)
		c.a.in = append(c.a.in, a.TokensIn)
		c.a.out = append(c.a.out, a.TokensOut)
		c.a.cached = append(c.a.cached, a.TokensCached)
		c.a.retries = append(c.a.retries, int32(a.TransportRetries))
		c.a.retryClasses = append(c.a.retryClasses, nullJSON(pgJSON(a.RetryClasses)))
		c.a.status = append(c.a.status, int32(a.ProviderStatus))
		c.a.provErr = append(c.a.provErr, txt(a.ProviderError))
		c.a.model = append(c.a.model, txt(a.Model))
		c.a.reqID = append(c.a.reqID, txt(a.RequestID))
		c.a.started = append(c.a.started, nullTime(a.StartedAt))
	}
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
