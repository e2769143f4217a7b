// Package ledgerrow converts between the job's own types (a result, an
// attempt) and the ledger's rows of them: the realtime worker and the wave
// driver record the same rows, and go on from them alike.
package ledgerrow

import (
	"encoding/json"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Result is the ledger's row of a job's result, with its attempts' rows,
// from the delivery-th delivery of env. The value of a job that is not
// valid is its last candidate (LastValue).
func Result(res *fixpoint.Result, env *queue.Envelope, delivered int) store.Result {
	r := store.Result{
		JobID: res.JobID, Status: res.Status, Value: LastValue(res), Error: res.Error, FinalClass: res.Class,
		Attempts: len(res.Attempts), Calls: res.Calls, FirstAttemptValid: res.FirstAttemptValid,
		RepairedLocally: res.RepairedLocally, TokensIn: int64(res.TokensIn), TokensOut: int64(res.TokensOut),
		TokensCached: int64(res.TokensCached), TokensCacheWrite: int64(res.TokensCacheWrite), CostUSD: res.CostUSD, StartedAt: res.StartedAt,
		FinishedAt: res.StartedAt.Add(res.Wall), WallMS: res.Wall.Milliseconds(), Deliveries: delivered,
	}
	if env != nil {
		r.Run = env.RunOrFirst()
		r.Job = &store.NewJob{ID: env.JobID, Batch: env.Batch, RowNo: env.RowNo, SchemaHash: env.SchemaHash,
			Prompt: env.Prompt, Provider: env.Provider, Model: env.Model, Mode: string(env.Mode),
			Strategy: string(env.Limits.WithDefaults().Strategy)}
	}
	for i := range res.Attempts {
		r.AttemptRows = append(r.AttemptRows, Attempt(&res.Attempts[i]))
	}
	return r
}

// LastValue is the value the ledger keeps for res: a valid job's value;
// for a job that is not valid, the value its last attempt found in the
// reply (as far as local repairs took it), nil when that attempt found
// none (no reply, or none that parsed). The ledger keeps no value per
// attempt, so this is the one the export can give to salvage a
// near-valid row. An earlier attempt's value is not looked for: the
// attempts a job was continued from (ResultFrom, a later wave) have none,
// so the realtime and the wave driver could not keep the same one.
func LastValue(res *fixpoint.Result) json.RawMessage {
	if res.Status == fixpoint.StatusValid || len(res.Value) > 0 || len(res.Attempts) == 0 {
		return res.Value
	}
	return res.Attempts[len(res.Attempts)-1].Value
}

// Attempt is the ledger's row of an attempt.
func Attempt(a *fixpoint.Attempt) store.Attempt {
	repairs, _ := json.Marshal(nonNil(a.Repairs))
	errs, _ := json.Marshal(nonNil(a.Errors))
	classes := make([]fixpoint.ErrorClass, 0, len(a.Retries))
	for _, r := range a.Retries {
		classes = append(classes, r.Class)
	}
	rc, _ := json.Marshal(classes)
	var sys *store.Prompt
	if a.System != nil && a.System.SHA256() != "" {
		sys = store.PromptWithHash(a.System.Text(), a.System.SHA256())
	}
	return store.Attempt{
		No: a.No, Request: a.Request, System: sys, RequestHash: a.RequestHash, Raw: a.Raw, Source: string(a.Source),
		Repairs: repairs, Errors: errs, Class: a.Class, Valid: a.Valid, RepairedLocally: a.RepairedLocally,
		FinishReason: string(a.FinishReason), LatencyMS: a.Latency.Milliseconds(),
		TokensIn: int64(a.TokensIn), TokensOut: int64(a.TokensOut), TokensCached: int64(a.TokensCached),
		TransportRetries: len(a.Retries), RetryClasses: rc, ProviderStatus: a.ProviderStatus,
		ProviderError: a.ProviderError, Model: a.Model, RequestID: a.RequestID, StartedAt: a.StartedAt,
		Feedback: a.Feedback, ProviderClass: string(a.ProviderClass), ProviderCode: a.ProviderCode, PriceBasis: string(a.PriceBasis),
		ServiceTier:      a.ServiceTier,
		TokensCacheWrite: int64(a.TokensCacheWrite), CostUSD: a.CostUSD, PatchOutcome: string(a.PatchOutcome),
		Coerced: a.Coerced, Unpriced: a.Unpriced, Evidence: jsonOrNil(a.Evidence), Warnings: jsonOrNil(a.Warnings),
		Step: string(a.Step), Chunk: a.Chunk, ToolCalls: jsonOrNil(a.ToolCalls), Conflicts: jsonOrNil(a.Conflicts),
		Fields: stepFields(a),
	}
}

// stepFields is what the ledger keeps of a step's value, which it does
// not store: how many fields it held (CountFields). Nil for an attempt of
// no step (the ordinary job keeps its NULL) and for one with no value.
func stepFields(a *fixpoint.Attempt) *int {
	if a.Step == "" {
		return nil
	}
	n, ok := CountFields(a.Value)
	if !ok {
		return nil
	}
	return &n
}

// CountFields counts the non-null strings, numbers and booleans of v,
// each array item's (the grain of evidence grades): how much a chunk
// found. ok is false when v is empty or not JSON.
func CountFields(v json.RawMessage) (n int, ok bool) {
	if len(v) == 0 {
		return 0, false
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return 0, false
	}
	return countLeaves(x), true
}

func countLeaves(x any) int {
	switch t := x.(type) {
	case nil:
		return 0
	case map[string]any:
		n := 0
		for _, e := range t {
			n += countLeaves(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range t {
			n += countLeaves(e)
		}
		return n
	}
	return 1
}

// jsonOrNil is s as JSON, nil when it is empty (the ledger then stores
// NULL: the stage did not run, or found nothing).
func jsonOrNil[T any](s []T) json.RawMessage {
	if len(s) == 0 {
		return nil
	}
	b, _ := json.Marshal(s)
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ResultFrom is a job's result so far as the ledger recorded its
// attempts: what repair.Start takes to go on from them.
func ResultFrom(jobID string, rows []store.Attempt) *fixpoint.Result {
	if len(rows) == 0 {
		return nil
	}
	res := &fixpoint.Result{JobID: jobID, Status: fixpoint.StatusInvalid}
	for _, r := range rows {
		a := fixpoint.Attempt{No: r.No, RequestHash: r.RequestHash, Raw: r.Raw, Class: r.Class, Valid: r.Valid,
			RepairedLocally: r.RepairedLocally, FinishReason: fixpoint.FinishReason(r.FinishReason),
			Latency: time.Duration(r.LatencyMS) * time.Millisecond, TokensIn: int(r.TokensIn), TokensOut: int(r.TokensOut),
			TokensCached: int(r.TokensCached), TokensCacheWrite: int(r.TokensCacheWrite),
			PriceBasis: fixpoint.PriceBasis(r.PriceBasis), ServiceTier: r.ServiceTier, CostUSD: r.CostUSD, ProviderStatus: r.ProviderStatus,
			ProviderError: r.ProviderError, ProviderClass: fixpoint.ErrorClass(r.ProviderClass), ProviderCode: r.ProviderCode, Model: r.Model,
			RequestID: r.RequestID, StartedAt: r.StartedAt, Feedback: r.Feedback, Coerced: r.Coerced, Unpriced: r.Unpriced,
			Step: fixpoint.StepKind(r.Step), Chunk: r.Chunk}
		a.Source = fixpoint.Source(r.Source)
		if len(r.Errors) > 0 {
			_ = json.Unmarshal(r.Errors, &a.Errors)
		}
		// An agent goes on from its turns' tool calls; a merge's conflicts
		// are the job's record of it.
		if len(r.ToolCalls) > 0 {
			_ = json.Unmarshal(r.ToolCalls, &a.ToolCalls)
		}
		if len(r.Conflicts) > 0 {
			_ = json.Unmarshal(r.Conflicts, &a.Conflicts)
		}
		res.Attempts = append(res.Attempts, a)
		res.Calls++
		res.TokensIn += a.TokensIn
		res.TokensOut += a.TokensOut
		res.TokensCached += a.TokensCached
		res.TokensCacheWrite += a.TokensCacheWrite
		res.TransportRetries += r.TransportRetries
		res.CostUSD += a.CostUSD
		if res.StartedAt.IsZero() || (!a.StartedAt.IsZero() && a.StartedAt.Before(res.StartedAt)) {
			res.StartedAt = a.StartedAt
		}
		res.Class = a.Class
		if a.Class == fixpoint.OutcomeProvider {
			res.Status, res.Error = fixpoint.StatusFailed, a.ProviderError
		}
	}
	return res
}
