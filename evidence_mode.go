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
)
