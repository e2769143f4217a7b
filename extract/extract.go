// Package extract finds the JSON values in a language model's reply and repairs
// the syntax damage models produce, recording every repair it makes.
//
// It is a pure package: values in, values out. It does no I/O, reads no
// environment and never logs, so it can be tested with tables and fuzzing.
package extract

import (
	"encoding/json"
	"slices"
)

// Source says where in a reply a candidate was found. The names are stable: they
// are stored in the ledger and printed by `worker check`.
type Source string

const (
	SourceRaw    Source = "raw"    // the whole reply (after trimming) is the value
	SourceFence  Source = "fence"  // a fenced block: ```json, ```, ~~~
	SourceTag    Source = "tag"    // a wrapper tag: <json>, <output>, <answer>
	SourceInline Source = "inline" // inline `code`
	SourceScan   Source = "scan"   // an object or array found inside prose
	SourceString Source = "string" // JSON encoded a second time inside a string
)

// Repair is one change made to a reply's value. extract makes syntax repairs:
// changes to the text that turn it into strict JSON. Package validate adds
// schema-guided repairs (a string "42" where the schema wants an integer
// becomes 42, ...): those change the decoded value at Pointer, and record the
// value before and after, so one list carries both kinds of repair.
type Repair struct {
	// Kind is a stable snake_case name, e.g. "trailing_comma", "comment",
	// "single_quotes", "unquoted_key", "python_literal", "missing_comma",
	// "truncated" for syntax repairs; "coerce_number", "coerce_boolean",
	// "enum_case", "const_case", "wrap_array", "drop_null",
	// "drop_additional", "rename_key" for schema-guided ones (see
	// validate.Schema.Coerce).
	Kind string `json:"kind"`
	// Offset is the byte offset in the reply where the repair applies. For a
	// schema-guided repair it is the offset of the candidate the value came
	// from (0 when there was no reply); Pointer locates the value inside it.
	Offset int `json:"offset"`
	// Pointer is the JSON pointer (RFC 6901) of the value a schema-guided
	// repair changed or dropped, in the value as it was when the repair was
	// made (repairs apply in order); for rename_key, the property's new
	// location. Empty, and absent from the JSON, for syntax repairs and for
	// a repair of the root value.
	Pointer string `json:"pointer,omitempty"`
	// Before is the value at Pointer before a schema-guided repair, as JSON;
	// for rename_key, the property's old name as a JSON string. Absent for
	// syntax repairs.
	Before json.RawMessage `json:"before,omitempty"`
	// After is the value at Pointer after a schema-guided repair, as JSON;
	// for rename_key, the property's new name. Absent for syntax repairs
	// and for a repair that dropped the value.
	After json.RawMessage `json:"after,omitempty"`
	// Count, when over 1, says the entry stands for that many repairs of
	// its Kind past the first MaxListedRepairs (see CompactRepairs), the
	// first of them at Offset and Pointer.
	Count int `json:"count,omitempty"`
}

// MaxListedRepairs is how many repairs CompactRepairs lists one by one.
const MaxListedRepairs = 1000

// CompactRepairs returns reps with at most MaxListedRepairs listed one by
// one and the rest as one entry of each kind with its Count, in order of
// first appearance: a 4 MB reply of numbers without commas made two
// million missing_comma repairs, 87 MB of them, where what a reader needs
// is which fixes were made and how often.
func CompactRepairs(reps []Repair) []Repair {
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
		out = append(out, Repair{Kind: r.Kind, Offset: r.Offset, Pointer: r.Pointer, Count: 1})
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
	Source Source
	// Start and End are the byte range in the reply the value came from.
	Start, End int
	// Repairs lists every repair applied, in order of offset.
	Repairs []Repair
	// Truncated reports the text was cut off mid-value and was closed by the
	// repairer. A truncated candidate is never accepted as a final answer.
	Truncated bool
}
