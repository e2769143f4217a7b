// Package validate compiles JSON Schemas and validates values against them,
// returning every error at once as a flat list with a JSON pointer, the failing
// keyword, a failure class and a message a model can act on.
//
// It is a pure package: no network, no file system, no logging.
package validate

// Class is a failure class. The names are fixed: they go all the way to SQL.
type Class string

const (
	ClassNone     Class = ""
	ClassSyntax   Class = "syntax"   // no JSON value could be extracted, or only by closing a truncated reply
	ClassShape    Class = "shape"    // structure: types, required, additionalProperties, size bounds
	ClassSemantic Class = "semantic" // values: enum, const, ranges, pattern, format, ...
)

// Error is one validation error.
type Error struct {
	// Path is the JSON pointer of the failing value, "" for the root.
	Path string `json:"path"`
	// Keyword is the schema keyword that failed, e.g. "required", "enum".
	Keyword string `json:"keyword"`
	// Class is the failure class of Keyword.
	Class Class `json:"class"`
	// Message is written for a model to act on, and starts with the path.
	Message string `json:"message"`
}
