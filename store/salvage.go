package store

import (
	"math"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
)

// MaxCostUSD is about the largest cost the ledger's numeric(18, 8)
// columns hold (a float64 next to 10^10 rounds to it, which they refuse).
const MaxCostUSD = 9_999_999_999.99

// Salvage returns r as the ledger can still take it after refusing it for
// its data (IsRefused(refusal)): every provider call is paid for, and its
// row must be kept whatever its numbers or text, or a redelivery would
// pay for the same call again. The job ends failed, its error naming the
// refusal, its value dropped; numbers are clamped to what their columns
// hold and a class outside the ledger's set becomes "provider". With bare,
// each attempt keeps only its counts, cost, model, classes and times: its
// request, reply, errors and feedback are dropped too, and its
// provider_error says so.
func (r Result) Salvage(refusal error, bare bool) Result {
	s := r
	kept := "its calls kept without its value"
	if bare {
		kept = "its calls kept with their counts only"
	}
	s.Status = fixpoint.StatusFailed
	s.Value = nil
	s.Error = textclip.Bytes("the ledger refused the result ("+refusal.Error()+"): "+kept, 2000)
	if s.FinalClass != "" && !attemptClass(s.FinalClass) {
		s.FinalClass = string(fixpoint.OutcomeProvider)
	}
	s.Attempts, s.Calls, s.Deliveries = clampInt(s.Attempts), clampInt(s.Calls), clampInt(s.Deliveries)
	s.Run = max(1, clampInt(s.Run))
	s.TokensIn, s.TokensOut, s.TokensCached, s.TokensCacheWrite = nonNeg(s.TokensIn), nonNeg(s.TokensOut), nonNeg(s.TokensCached), nonNeg(s.TokensCacheWrite)
	s.WallMS = nonNeg(s.WallMS)
	s.CostUSD = clampCost(s.CostUSD)
	if s.Job != nil {
		j := *s.Job
		j.Metadata = nil
		s.Job = &j
	}
	s.AttemptRows = make([]Attempt, len(r.AttemptRows))
	for i, a := range r.AttemptRows {
		s.AttemptRows[i] = a.Salvage(bare)
	}
	return s
}

// Salvage returns a as the ledger can still take it after refusing a row
// of it: numbers clamped to what their columns hold, a class outside the
// ledger's set made "provider"; with bare, only its counts, cost, model,
// classes and times are kept, and its provider_error says so.
func (a Attempt) Salvage(bare bool) Attempt {
	a.No = max(0, clampInt(a.No))
	a.TokensIn, a.TokensOut, a.TokensCached, a.TokensCacheWrite = nonNeg(a.TokensIn), nonNeg(a.TokensOut), nonNeg(a.TokensCached), nonNeg(a.TokensCacheWrite)
	a.LatencyMS = nonNeg(a.LatencyMS)
	a.CostUSD = clampCost(a.CostUSD)
	a.TransportRetries, a.Coerced = max(0, clampInt(a.TransportRetries)), max(0, clampInt(a.Coerced))
	if a.ProviderStatus < 0 || a.ProviderStatus > 999 {
		a.ProviderStatus = 0
	}
	if !attemptClass(a.Class) {
		a.Class = string(fixpoint.OutcomeProvider)
	}
	if a.PriceBasis != "" && a.PriceBasis != string(fixpoint.PriceBasisRealtime) && a.PriceBasis != string(fixpoint.PriceBasisBatch) &&
		a.PriceBasis != string(fixpoint.PriceBasisFlex) {
		a.PriceBasis = ""
	}
	if a.checkStep() != nil {
		// What the step columns' checks refuse is dropped, not the call.
		a.Step, a.Chunk, a.Fields, a.ToolCalls, a.Conflicts = "", nil, nil, nil, nil
	}
	if bare {
		a.Request, a.System, a.Raw, a.Repairs, a.Errors, a.RetryClasses, a.Feedback = nil, nil, "", nil, nil, nil, ""
		// Tool calls and conflicts hold the model's text; the step and
		// chunk are counts and stay.
		a.ToolCalls, a.Conflicts = nil, nil
		a.Source, a.PatchOutcome = "", ""
		a.ProviderError = "the ledger refused this attempt's row; kept with its counts only"
		a.Model, a.RequestID = textclip.Bytes(a.Model, 200), textclip.Bytes(a.RequestID, 200)
		a.FinishReason, a.ProviderClass, a.ProviderCode = textclip.Bytes(a.FinishReason, 50), textclip.Bytes(a.ProviderClass, 50), textclip.Bytes(a.ProviderCode, 200)
	}
	return a
}

// Salvage returns in as the ledger can still take its calls after
// refusing them (Attempt.Salvage each); in itself is not changed.
func (in Interruption) Salvage(bare bool) Interruption {
	as := make([]Attempt, len(in.Attempts))
	for i, a := range in.Attempts {
		as[i] = a.Salvage(bare)
	}
	in.Attempts = as
	return in
}

// Salvage returns o as the ledger can still take it after refusing it for
// its data: its attempt as Attempt.Salvage keeps it, and its job final,
// failed, naming the refusal (Result.Salvage of its result, or else of its
// totals so far). A job that went on would pay for further calls the
// ledger is likely to refuse as well (a price table's typo prices them
// all), as a realtime job's result refused ends the job.
func (o WaveOutcome) Salvage(refusal error, bare bool) WaveOutcome {
	o.Attempt = o.Attempt.Salvage(bare)
	var r Result
	switch {
	case o.Result != nil:
		r = *o.Result
	case o.Totals != nil:
		r = *o.Totals
	}
	s := r.Salvage(refusal, bare)
	o.Result, o.Totals = &s, nil
	o.Inserted, o.Finished = false, false
	return o
}

// attemptClass reports whether c is in the set the attempts table takes.
func attemptClass(c string) bool {
	switch c {
	case "", "syntax", "shape", "semantic", "truncated", "refusal", "provider":
		return true
	}
	return false
}

// clampCost is usd within what numeric(18, 8) holds: not a number is 0,
// and a cost beyond the column's range (a price table's typo) its maximum,
// so a spend report overstates it rather than losing it.
func clampCost(usd float64) float64 {
	switch {
	case math.IsNaN(usd) || usd < 0:
		return 0
	case usd > MaxCostUSD:
		return MaxCostUSD
	}
	return usd
}

func clampInt(n int) int { return min(max(n, math.MinInt32), math.MaxInt32) }

func nonNeg(n int64) int64 { return max(n, 0) }
