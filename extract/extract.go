// Package extract finds the JSON values in a language model's reply and repairs
// the syntax damage models produce, recording every repair it makes.
//
// It is a pure package: values in, values out. It does no I/O, reads no
// environment and never logs, so it can be tested with tables and fuzzing.
package extract

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

// Repair is one change made to turn the text into strict JSON.
type Repair struct {
	// Kind is a stable snake_case name, e.g. "trailing_comma", "comment",
	// "single_quotes", "unquoted_key", "python_literal", "missing_comma",
	// "truncated".
	Kind string `json:"kind"`
	// Offset is the byte offset in the reply where the repair applies.
	Offset int `json:"offset"`
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
