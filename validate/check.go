package validate

import (
	"bytes"
	"encoding/json"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// truncatedMessage is the message of the error every truncated candidate gets.
const truncatedMessage = rootDisplay + ": the JSON was cut off before its end and had to be closed; reply with the complete value"

// CheckResult is the outcome of Check: the chosen candidate and its errors.
type CheckResult struct {
	// Valid reports the chosen value validates (or, without a schema, that a
	// value was extracted) and was not truncated.
	Valid bool
	// Value is the chosen candidate's value, nil if none was extracted.
	Value any
	// Class is ClassOf(Errors): ClassNone when Valid.
	Class Class
	// Errors are the chosen candidate's errors, or the one syntax error when
	// nothing was extracted. Empty when Valid.
	Errors []Error
	// Repairs are the repairs extract applied to the chosen candidate.
	Repairs []extract.Repair
	// Source is where the chosen candidate was found, "" if none.
	Source extract.Source
	// Truncated reports the chosen candidate was closed after a cut-off.
	Truncated bool
	// Candidate is the chosen candidate, nil if none.
	Candidate *extract.Candidate
	// Candidates is the number of candidates extract found.
	Candidates int
}

// Check extracts the JSON candidates in reply and chooses one: the first that
// validates against s; if none does, the one with the fewest errors (the
// earliest on ties). s may be nil: then any extracted value is valid. A
// truncated candidate is never valid: it carries an extra error with keyword
// "truncated" and class syntax. When nothing is extracted the result has
// class syntax and one error with keyword "syntax" whose message is the
// extraction error's text.
func Check(s *Schema, reply string) CheckResult {
	cands, err := extract.Extract(reply)
	return choose(s, cands, err)
}

// choose applies Check's choosing rule to the candidates extract returned.
func choose(s *Schema, cands []extract.Candidate, err error) CheckResult {
	if len(cands) == 0 {
		msg := extract.ErrNoJSON.Error()
		if err != nil {
			msg = err.Error()
		}
		errs := []Error{{Path: "", Keyword: "syntax", Class: ClassSyntax, Message: msg}}
		return CheckResult{Class: ClassSyntax, Errors: errs}
	}
	best, bestErrs := -1, []Error(nil)
	for i := range cands {
		errs := candidateErrors(s, &cands[i])
		if len(errs) == 0 {
			best, bestErrs = i, nil
			break
		}
		if best < 0 || len(errs) < len(bestErrs) {
			best, bestErrs = i, errs
		}
	}
	c := &cands[best]
	return CheckResult{
		Valid:      len(bestErrs) == 0,
		Value:      c.Value,
		Class:      ClassOf(bestErrs),
		Errors:     bestErrs,
		Repairs:    c.Repairs,
		Source:     c.Source,
		Truncated:  c.Truncated,
		Candidate:  c,
		Candidates: len(cands),
	}
}

// candidateErrors returns every error of one candidate.
func candidateErrors(s *Schema, c *extract.Candidate) []Error {
	errs := s.Validate(c.Value)
	if c.Truncated {
		errs = append([]Error{{Path: "", Keyword: "truncated", Class: ClassSyntax, Message: truncatedMessage}}, errs...)
	}
	return errs
}

// checkJSON is the `worker check` object.
type checkJSON struct {
	Valid     bool             `json:"valid"`
	Value     json.RawMessage  `json:"value"`
	Class     Class            `json:"class"`
	Errors    []Error          `json:"errors"`
	Repairs   []extract.Repair `json:"repairs"`
	Source    extract.Source   `json:"source"`
	Truncated bool             `json:"truncated"`
}

// MarshalJSON renders the `worker check` object: {"valid", "value", "class",
// "errors", "repairs", "source", "truncated"}. "errors" and "repairs" are
// arrays, never null; "value" is null when nothing was extracted. The value
// keeps the key order of the reply when the candidate's JSON text is
// available. MarshalJSON does not escape <, > and &; json.Marshal re-escapes
// them, so use a json.Encoder with SetEscapeHTML(false) to print them as is.
func (r CheckResult) MarshalJSON() ([]byte, error) {
	out := checkJSON{
		Valid:     r.Valid,
		Class:     r.Class,
		Errors:    r.Errors,
		Repairs:   r.Repairs,
		Source:    r.Source,
		Truncated: r.Truncated,
	}
	if out.Errors == nil {
		out.Errors = []Error{}
	}
	if out.Repairs == nil {
		out.Repairs = []extract.Repair{}
	}
	switch {
	case r.Candidate != nil && len(r.Candidate.JSON) > 0 && json.Valid(r.Candidate.JSON):
		out.Value = r.Candidate.JSON
	default:
		v, err := encode(r.Value)
		if err != nil {
			return nil, err
		}
		out.Value = v
	}
	return encode(out)
}

// encode marshals v without HTML escaping and without a trailing newline.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
