// Package extract finds the JSON values in a language model's reply and repairs
// the syntax damage models produce, recording every repair it makes.
//
// It is a pure package: values in, values out. It does no I/O, reads no
// environment and never logs, so it can be tested with tables and fuzzing.
package extract

import (
	"slices"

	"github.com/fixpoint-dev/fixpoint"
)

// MaxListedRepairs is how many repairs CompactRepairs lists one by one.
const MaxListedRepairs = 1000

// CompactRepairs returns reps with at most MaxListedRepairs listed one by
// one and the rest as one entry of each kind with its Count, in order of
// first appearance: a 4 MB reply of numbers without commas made two
// million missing_comma repairs, 87 MB of them, where what a reader needs
// is which fixes were made and how often.
func CompactRepairs(reps []fixpoint.Repair) []fixpoint.Repair {
	if len(reps) <= MaxListedRepairs {
		return reps
	}
	out := slices.Clip(reps[:MaxListedRepairs:MaxListedRepairs])
	at := map[string]int{}
	for _, r := range reps[MaxListedRepairs:] {
		if i, ok := at[r.Kind]; ok {
			out[i].Count++
			continue
		}
		at[r.Kind] = len(out)
		out = append(out, fixpoint.Repair{Kind: r.Kind, Offset: r.Offset, Pointer: r.Pointer, Count: 1})
	}
	return out
}

// Candidate is one JSON value found in a reply.
type Candidate struct {
	// Value is the decoded value: map[string]any, []any, string, json.Number,
	// bool or nil. Numbers are json.Number so no precision is lost.
	Value any
	// JSON is Value as strict, compact JSON text.
	JSON []byte
	// Source is where the value was found.
	Source fixpoint.Source
	// Start and End are the byte range in the reply the value came from.
	Start, End int
	// Repairs lists every repair applied, in order of offset.
	Repairs []fixpoint.Repair
	// Truncated reports the text was cut off mid-value and was closed by the
	// repairer. A truncated candidate is never accepted as a final answer.
	Truncated bool
}
