package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

	n := len(order)
	var (
		// jobs
		jID, jBatch, jSchema, jPrompt, jProvider, jModel, jMode, jStrategy, jMeta = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		jRow                                                                       = make([]int32, n)
		batches                                                                    []string
		// results
		rStatus, rError, rClass        = make([]string, n), make([]string, n), make([]string, n)
		rValue                         = make([]*string, n)
		rAttempts, rCalls, rDeliveries = make([]int32, n), make([]int32, n), make([]int32, n)
		rFirst, rRepaired              = make([]bool, n), make([]bool, n)
		rIn, rOut, rCached, rWall      = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		rCost                          = make([]float64, n)
		rStarted, rFinished            = make([]*time.Time, n), make([]*time.Time, n)
		// attempts
		aJob, aReqHash, aRaw, aSource, aErrors, aClass, aFinish, aProvErr, aModel, aReqID []string
		aReq, aRepairs, aRetryClasses                                                      []*string
		aNo, aRetries, aStatus                                                             []int32
		aValid, aRepaired                                                                  []bool
		aLatency, aIn, aOut, aCached                                                       []int64
		aStarted                                                                           []*time.Time
	)
	seenBatch := map[string]bool{}
	for k, i := range order {
		r := results[i]
		jID[k] = r.JobID
		jMeta[k] = "{}"
		if j := r.Job; j != nil {
			jBatch[k], jRow[k], jSchema[k], jPrompt[k] = j.Batch, int32(j.RowNo), j.SchemaHash, j.Prompt
			jProvider[k], jModel[k], jMode[k], jStrategy[k] = j.Provider, j.Model, j.Mode, j.Strategy
			jMeta[k] = rawOr(j.Metadata, "{}")
			if j.Batch != "" && !seenBatch[j.Batch] {
				seenBatch[j.Batch] = true
				batches = append(batches, j.Batch)
			}
		}
		rStatus[k], rError[k], rClass[k], rValue[k] = r.Status, r.Error, r.FinalClass, nullJSON(r.Value)
		rAttempts[k], rCalls[k], rDeliveries[k] = int32(r.Attempts), int32(r.Calls), int32(r.Deliveries)
		rFirst[k], rRepaired[k] = r.FirstAttemptValid, r.RepairedLocally
		rIn[k], rOut[k], rCached[k], rWall[k] = r.TokensIn, r.TokensOut, r.TokensCached, r.WallMS
		rCost[k], rStarted[k], rFinished[k] = r.CostUSD, nullTime(r.StartedAt), nullTime(r.FinishedAt)
		for ai, a := range r.AttemptRows {
			no := a.No
			if no == 0 {
				no = ai + 1
			}
			aJob = append(aJob, r.JobID)
			aNo = append(aNo, int32(no))
			aReq = append(aReq, nullJSON(a.Request))
			aReqHash = append(aReqHash, a.RequestHash)
			aRaw = append(aRaw, a.Raw)
			aSource = append(aSource, a.Source)
			aRepairs = append(aRepairs, nullJSON(a.Repairs))
			aErrors = append(aErrors, rawOr(a.Errors, "[]"))
			aClass = append(aClass, a.Class)
			aValid = append(aValid, a.Valid)
			aRepaired = append(aRepaired, a.RepairedLocally)
			aFinish = append(aFinish, a.FinishReason)
			aLatency = append(aLatency, a.LatencyMS)
			aIn = append(aIn, a.TokensIn)
			aOut = append(aOut, a.TokensOut)
			aCached = append(aCached, a.TokensCached)
			aRetries = append(aRetries, int32(a.TransportRetries))
			aRetryClasses = append(aRetryClasses, nullJSON(a.RetryClasses))
			aStatus = append(aStatus, int32(a.ProviderStatus))
			aProvErr = append(aProvErr, a.ProviderError)
			aModel = append(aModel, a.Model)
			aReqID = append(aReqID, a.RequestID)
			aStarted = append(aStarted, nullTime(a.StartedAt))
		}
	}

	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var wonIDs []string
	err := s.retry(ctx, func(ctx context.Context) error {
		wonIDs = wonIDs[:0]
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			if len(batches) > 0 {
				b.Queue(`INSERT INTO batches (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, batches)
			}
			b.Queue(saveJobsSQL, jID, jBatch, jRow, jSchema, jPrompt, jProvider, jModel, jMode, jStrategy, jMeta)
			b.Queue(saveResultsSQL,
				jID, rStatus, rValue, rError, rClass, rAttempts, rCalls, rFirst, rRepaired, rIn, rOut, rCached,
				rCost, rStarted, rFinished, rWall, rDeliveries,
				aJob, aNo, aReq, aReqHash, aRaw, aSource, aRepairs, aErrors, aClass, aValid, aRepaired, aFinish,
				aLatency, aIn, aOut, aCached, aRetries, aRetryClasses, aStatus, aProvErr, aModel, aReqID, aStarted,
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
