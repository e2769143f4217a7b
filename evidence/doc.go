// Package evidence checks a value against the text it should come from:
// each string and number of the value is looked up in the source and
// graded exact, normalized, fuzzy or none, with the span of its match.
//
// A value can pass every schema check and still be made up: a vendor, an
// amount, a date the source never states. Grading each leaf says which
// values the source supports, and Require turns the ungrounded ones into
// errors a model can act on.
//
// Index a source once (New, or NewSegments for a row's fields), then
// align values to it (Source.Align). Exempt computes, from a schema, the
// locations whose values are derived rather than quoted (enums, consts,
// "x-fixpoint-evidence": false). Spans are Unicode code point offsets into
// the source text, what a Python str slice takes. In a long source the
// fields of a list item are grounded in one region of the text, near the
// item's best-grounded field (ItemWindow): a percent written only beside
// another item's name is not the item's.
//
// Matching is on characters, not words, so text written without spaces
// (Japanese, Chinese) works; a match may not begin or end inside a word of
// a script that separates words with spaces. The grades, the
// normalisations and the fuzzy rule are described on each declaration and
// in docs/evidence.md.
//
// It is a pure package: values in, values out. It does no I/O and never
// logs.
package evidence
