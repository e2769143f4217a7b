package fixpoint

import "fmt"

// EvidenceMode says what the evidence stage does with a valid value: each
// leaf string and number is aligned to the job's source text and graded
// (see package evidence).
type EvidenceMode string

const (
	// EvidenceOff aligns nothing.
	EvidenceOff EvidenceMode = "off"
	// EvidenceCheck records each leaf's grade and span; the value's
	// validity does not depend on them.
	EvidenceCheck EvidenceMode = "check"
	// EvidenceRequire makes a leaf the source does not ground an error of
	// class ClassEvidence, fed back to the model like any other.
	EvidenceRequire EvidenceMode = "require"
	// EvidenceDefault is the mode of a batch that names none.
	EvidenceDefault = EvidenceCheck
)

// ParseEvidenceMode parses "off", "check" or "require"; "" is
// EvidenceDefault. Anything else is an error naming the modes.
func ParseEvidenceMode(s string) (EvidenceMode, error) {
	switch m := EvidenceMode(s); m {
	case "":
		return EvidenceDefault, nil
	case EvidenceOff, EvidenceCheck, EvidenceRequire:
		return m, nil
	}
	return "", fmt.Errorf("unknown evidence mode %q: want off, check or require", s)
}

// Grade says how a leaf of a value (a string or a number) was found in
// its source. The names are stable: they are stored and reported.
type Grade string

const (
	// GradeExact: the leaf's text is in the source as is (a number: as the
	// same JSON text, "1249.99" for 1249.99).
	GradeExact Grade = "exact"
	// GradeNormalized: the leaf is in the source up to case, white space,
	// Unicode compatibility forms and diacritics, or is a number or date
	// the source writes another way ("1.249,99 €" for 1249.99, "15 January
	// 2027" for "2027-01-15").
	GradeNormalized Grade = "normalized"
	// GradeFuzzy: the leaf is in the source up to punctuation, or one
	// letter in a long string.
	GradeFuzzy Grade = "fuzzy"
	// GradeNone: the leaf is not in the source.
	GradeNone Grade = "none"
)

// Grounding is the grade of one leaf of a value and the span of its match
// in the source.
type Grounding struct {
	// Path is the leaf's JSON pointer in the value, "" for the root.
	Path  string `json:"path"`
	Grade Grade  `json:"grade"`
	// Start and End are the span of the match: code point offsets into
	// the source's text, what a Python str slice takes; 0 for GradeNone.
	Start int `json:"start"`
	End   int `json:"end"`
	// Reason says why a leaf found in the source is graded none anyway:
	// a list item's field written only far from the item (package
	// evidence, "Items"). Empty otherwise.
	Reason string `json:"reason,omitempty"`
}

// The sources a row job's values are checked against (EvidenceSource).
const (
	// EvidenceSourceRow is the row's own values as the template rendered
	// them into the prompt; text the template adds (instructions,
	// examples) never grounds a value.
	EvidenceSourceRow = "row"
	// EvidenceSourcePrompt is the whole rendered prompt.
	EvidenceSourcePrompt = "prompt"
	// EvidenceSourceFieldPrefix begins "field:NAME": the row's field NAME
	// alone.
	EvidenceSourceFieldPrefix = "field:"
	// EvidenceSourceDocument is the job's document (enqueue
	// --document-field, --document-file-field) as stored: the workers load
	// it from the ledger, and no message carries it.
	EvidenceSourceDocument = "document"
)
