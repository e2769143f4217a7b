package pipeline

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// TryStep is one step of a tried document job, as `worker try --json`
// and the playground show it: a provider call (a chunk, a repair, an
// agent turn, a merge by a model) or the deterministic merge, which is no
// call.
type TryStep struct {
	No   int               `json:"no"`
	Step fixpoint.StepKind `json:"step"`
	// Call is false for a step no provider saw (a deterministic merge).
	Call      bool                       `json:"call"`
	Chunk     *fixpoint.ChunkRef         `json:"chunk,omitempty"`
	Valid     bool                       `json:"valid"`
	Class     string                     `json:"class,omitempty"`
	Errors    []fixpoint.ValidationError `json:"errors,omitempty"`
	Value     json.RawMessage            `json:"value,omitempty"`
	ToolCalls []TryToolCall              `json:"tool_calls,omitempty"`
	Conflicts []fixpoint.Conflict        `json:"conflicts,omitempty"`
	TokensIn  int                        `json:"tokens_in"`
	TokensOut int                        `json:"tokens_out"`
	CostUSD   float64                    `json:"cost_usd"`
	LatencyMS int64                      `json:"latency_ms"`
	// ProviderError is the error of a call that got no reply.
	ProviderError string `json:"provider_error,omitempty"`
}

// TryToolCall is a tool call of an agent turn, its arguments cut to
// TryArgumentsMax characters.
type TryToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// TryArgumentsMax is how much of a tool call's arguments a step shows: a
// set_output may carry the whole value, which the step's Value holds.
const TryArgumentsMax = 120

// TrySteps lists res's attempts as steps.
func TrySteps(res *fixpoint.Result) []TryStep {
	steps := make([]TryStep, 0, len(res.Attempts))
	for i := range res.Attempts {
		a := &res.Attempts[i]
		s := TryStep{No: a.No, Step: a.Step, Call: IsCall(a), Chunk: a.Chunk, Valid: a.Valid, Class: a.Class, Errors: a.Errors,
			Value: a.Value, Conflicts: a.Conflicts, TokensIn: a.TokensIn, TokensOut: a.TokensOut, CostUSD: a.CostUSD,
			LatencyMS: a.Latency.Milliseconds(), ProviderError: a.ProviderError}
		for _, c := range a.ToolCalls {
			s.ToolCalls = append(s.ToolCalls, TryToolCall{Name: c.Name, Arguments: clipRunes(c.Arguments, TryArgumentsMax)})
		}
		steps = append(steps, s)
	}
	return steps
}

// IsCall reports whether a was a provider call: every attempt but a merge
// made without a model (no request, no reply); fixpoint.Attempt.Called,
// which the job's totals count.
func IsCall(a *fixpoint.Attempt) bool { return a.Called() }

// clipRunes cuts s to n characters, marking the cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
