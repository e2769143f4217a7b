package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/internal/render"
)

// truncatedMessage is the message of the error every truncated candidate gets.
const truncatedMessage = render.Root + ": the JSON was cut off before its end and had to be closed; reply with the complete value"

// lossyWhat says, for each lossy repair kind (extract.Lossy), what the
// reply held that the repair would have had to drop or guess.
var lossyWhat = map[string]string{
	extract.KindExtraText:        "text after a value that is not part of the JSON",
	extract.KindEllipsis:         "an ellipsis (...) in place of items",
	extract.KindMissingValue:     "a key with no value",
	extract.KindNumberIncomplete: "a number without its digits",
	extract.KindNumberSplit:      "digits after a number with no comma between them (one number with a space in it, or two?)",
	extract.KindNonFinite:        "NaN or Infinity, which JSON has no number for",
	extract.KindEmptyElement:     "an empty array element (a comma with no value before it)",
	extract.KindFunctionResult:   "a function call in place of a value (its result is not written)",
	extract.KindQuoteUnbalanced:  "a string whose last unescaped quote opens a quoted word (does the string end after it, or after the word's end quote?)",
}

// ExtractionErrors are the errors a candidate gets for how it was
// extracted and whether it can be stored as it is: a truncated one is
// never valid, nor is one whose value a lossy repair (extract.Lossy) may
// have changed ("1 500" read as 1, "Bob" Smith as "Bob", [1, 2, ...] as
// [1, 2]; each named with where in the reply), nor one holding a NUL
// (StorableErrors), nor one with a key written twice in an object (a
// decoder keeps one of the two values unseen; which was meant is not for
// it to guess), nor one holding half a surrogate pair. reply is the text
// c was extracted from. Package repair checks a patch reply's array with
// it too.
func ExtractionErrors(reply string, c *extract.Candidate) []fixpoint.ValidationError {
	var errs []fixpoint.ValidationError
	if c.Truncated {
		errs = append(errs, fixpoint.ValidationError{Path: "", Keyword: "truncated", Class: fixpoint.ClassSyntax, Message: truncatedMessage})
	}
	errs = append(errs, StorableErrors(c.Value)...)
	at, inKey, lone := extract.LoneSurrogate(c.JSON)
	if lone {
		what := "a string"
		if inKey {
			what = "a property name"
		}
		errs = append(errs, fixpoint.ValidationError{Path: at, Keyword: "lone_surrogate", Class: fixpoint.ClassSyntax,
			Message: render.Path(at) + ": " + what + " holds half of a UTF-16 surrogate pair (a \\uD800-\\uDFFF escape without its other half), which is no character: readers replace it with U+FFFD; write the character itself"})
	}
	// (Two keys with lone halves read alike as U+FFFD: the surrogate error
	// says what is wrong, not a key written twice.)
	if at, key, dup := extract.DuplicateKey(c.JSON); dup && !lone {
		errs = append(errs, fixpoint.ValidationError{Path: at, Keyword: "duplicate_key", Class: fixpoint.ClassSyntax,
			Message: fmt.Sprintf("%s: the key %s is written twice in one object; write it once, with the value meant", render.Path(at), strconv.Quote(key))})
	}
	lossy, more := 0, 0
	for _, r := range c.Repairs {
		if !extract.Lossy(r.Kind) {
			continue
		}
		if lossy == maxLossyErrors {
			more += max(r.Count, 1)
			continue
		}
		lossy++
		errs = append(errs, fixpoint.ValidationError{Path: "", Keyword: "lossy_repair", Class: fixpoint.ClassSyntax,
			Message: fmt.Sprintf("%s: the reply has %s; reply with the complete value as strict JSON", render.Root, DescribeLossy(reply, r))})
	}
	if more > 0 {
		// 200,000 of them made 56 MB of errors for one reply.
		errs = append(errs, fixpoint.ValidationError{Path: "", Keyword: "lossy_repair", Class: fixpoint.ClassSyntax,
			Message: fmt.Sprintf("%s: and %d more such places; reply with the complete value as strict JSON", render.Root, more)})
	}
	return errs
}

// maxLossyErrors bounds the lossy_repair errors listed one by one for a
// candidate; the rest are counted in one more.
const maxLossyErrors = 20

// maxNULErrors bounds the NUL errors one value gets.
const maxNULErrors = 8

// StorableErrors are the errors of the strings and keys in v that hold a NUL
// character (\u0000): JSON allows it, Postgres's text and jsonb do not,
// and the ledger would have to store another value than the one validated
// (a pattern ^[a-z]*$ checked "a\u0000b" in a value stored as "a\ufffdb",
// and two keys could become one). A value must be storable as it is.
func StorableErrors(v any) []fixpoint.ValidationError {
	var errs []fixpoint.ValidationError
	var walk func(v any, toks []string)
	walk = func(v any, toks []string) {
		if len(errs) >= maxNULErrors {
			return
		}
		switch x := v.(type) {
		case string:
			if strings.IndexByte(x, 0) >= 0 {
				errs = append(errs, fixpoint.ValidationError{Path: pointer(toks), Keyword: "nul_character", Class: fixpoint.ClassSemantic,
					Message: render.Path(pointer(toks)) + ": the string holds a NUL character (\\u0000), which the ledger cannot store; write the value without it"})
			}
		case []any:
			for i, e := range x {
				walk(e, append(toks, strconv.Itoa(i)))
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys) // errors in a stable order
			for _, k := range keys {
				if strings.IndexByte(k, 0) >= 0 && len(errs) < maxNULErrors {
					errs = append(errs, fixpoint.ValidationError{Path: pointer(toks), Keyword: "nul_character", Class: fixpoint.ClassSemantic,
						Message: fmt.Sprintf("%s: the property name %s holds a NUL character (\\u0000), which the ledger cannot store; write it without", render.Path(pointer(toks)), strconv.Quote(k))})
				}
				walk(x[k], append(toks, k))
			}
		}
	}
	walk(v, nil)
	return errs
}

// DescribeLossy says what a lossy repair (extract.Lossy) of reply would
// have dropped or guessed, and where: `text after a value that is not part
// of the JSON at offset 12 ("USD}")`.
func DescribeLossy(reply string, r fixpoint.Repair) string {
	return fmt.Sprintf("%s at offset %d (%s)", lossyWhat[r.Kind], r.Offset, snippetAt(reply, r.Offset))
}

// snippetAt quotes the reply's text from offset up to 24 bytes, cut at a
// line end and at a rune boundary.
func snippetAt(reply string, offset int) string {
	if offset < 0 || offset > len(reply) {
		return `""`
	}
	s := reply[offset:]
	if len(s) > 64 {
		s = s[:64] // the snippet is 24 bytes: no need to look further (a scan to the end made 200,000 snippets quadratic)
	}
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 24 {
		cut := 24
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// CheckResult is the outcome of Check: the chosen candidate and its errors.
type CheckResult struct {
	// Valid reports the chosen value validates (or, without a schema, that a
	// value was extracted) and was not truncated.
	Valid bool
	// Value is the chosen candidate's value, nil if none was extracted.
	Value any
	// Class is ClassOf(Errors): ClassNone when Valid.
	Class fixpoint.Class
	// Errors are the chosen candidate's errors, or the one syntax error when
	// nothing was extracted. Empty when Valid. Past MaxErrors, those kept
	// and one of keyword KeywordMoreErrors that counts the rest (see
	// Schema.Validate; ErrorCount counts them all).
	Errors []fixpoint.ValidationError
	// Repairs are the repairs extract applied to the chosen candidate
	// (past extract.MaxListedRepairs, one entry of each kind with its
	// Count), followed by the schema-guided repairs CheckWith made to its
	// value.
	Repairs []fixpoint.Repair
	// Source is where the chosen candidate was found, "" if none.
	Source fixpoint.Source
	// Truncated reports the chosen candidate was closed after a cut-off.
	Truncated bool
	// Candidate is the chosen candidate, nil if none.
	Candidate *extract.Candidate
	// Candidates is the number of candidates extract found.
	Candidates int
	// Coerced is the number of schema-guided repairs CheckWith made: the
	// last Coerced entries of Repairs. When it is not 0, Value is the
	// repaired value and Candidate still holds the value as extracted.
	Coerced int
}

// CheckOptions are the options of CheckWith. The zero value is Check's
// behaviour.
type CheckOptions struct {
	// Coerce makes the schema-guided repairs of a candidate that does not
	// validate (package repair's Coercer of a fixpoint.CoerceMode); nil
	// makes none.
	Coerce Coercer
}

// Check extracts the JSON candidates in reply and chooses one: the first that
// validates against s; if none does, the one with the fewest errors (the
// earliest on ties; counted by ErrorCount). s may be nil: then any extracted value is valid. A
// truncated candidate is never valid: it carries an extra error with keyword
// "truncated" and class syntax. When nothing is extracted the result has
// class syntax and one error with keyword "syntax" whose message is the
// extraction error's text.
func Check(s *Schema, reply string) CheckResult {
	return CheckWith(s, reply, CheckOptions{})
}

// CheckWith is Check with options. With a coercer opt.Coerce and a schema,
// when no candidate validates as extracted, each candidate's value is
// repaired by opt.Coerce before choosing: the first that validates
// after its repairs is chosen, else the one with the fewest errors after
// them (the earliest on ties). A candidate valid as extracted is always
// chosen over one that needs schema-guided repairs, so those repairs never
// change which valid candidate is chosen. The chosen candidate's repairs are
// appended to Repairs, with Offset the candidate's Start, and counted in
// Coerced; Value, Errors, Class and Valid are those of the repaired value.
// A truncated candidate may be repaired too but is still never valid.
// With a schema, a chosen valid candidate is not valid after all when
// another, not overlapping it, fits the schema too (as extracted, or after
// local fixes in a coerce mode) with another value, or when one after it
// set out as an answer (fenced, tagged or labelled "Answer:") and of its
// shape does not fit or is cut off: its one error, keyword "ambiguous"
// (class syntax), names both.
func CheckWith(s *Schema, reply string, opt CheckOptions) CheckResult {
	cands, err := extract.Extract(reply)
	c, release := s.Begin()
	defer release()
	if s == nil || len(cands) == 0 || opt.Coerce == nil {
		return choose(c, reply, cands, err)
	}
	return chooseCoerced(c, reply, cands, opt.Coerce)
}

// chooseCoerced applies CheckWith's choosing rule to the candidates extract
// returned (at least one).
func chooseCoerced(c *Session, reply string, cands []extract.Candidate, coerce Coercer) CheckResult {
	// A candidate valid as extracted wins: choose's rule, validating each
	// candidate once.
	errsOf := make([][]fixpoint.ValidationError, len(cands))
	for i := range cands {
		errsOf[i] = c.Validate(cands[i].Value)
		if len(errsOf[i]) == 0 && len(ExtractionErrors(reply, &cands[i])) == 0 {
			if amb := ambiguous(c, reply, cands, i, cands[i].Value, coerce); amb != nil {
				return result(cands, i, cands[i].Value, amb, nil)
			}
			return result(cands, i, cands[i].Value, nil, nil)
		}
	}
	best, bestErrs, bestValue, bestFixes := -1, []fixpoint.ValidationError(nil), any(nil), []fixpoint.Repair(nil)
	for i := range cands {
		cand := &cands[i]
		v, fixes, errs := cand.Value, []fixpoint.Repair(nil), errsOf[i]
		if len(errs) > 0 {
			v, fixes, errs = coerce(c, v, errs)
		}
		if pre := ExtractionErrors(reply, cand); len(pre) > 0 {
			errs = append(pre, errs...)
		}
		if best < 0 || ErrorCount(errs) < ErrorCount(bestErrs) {
			best, bestErrs, bestValue, bestFixes = i, errs, v, fixes
		}
		if len(errs) == 0 {
			if amb := ambiguous(c, reply, cands, i, v, coerce); amb != nil {
				bestErrs = amb
			}
			break
		}
	}
	return result(cands, best, bestValue, bestErrs, bestFixes)
}

// result is the result of choosing cands[i], whose value after the
// schema-guided repairs fixes is v, with errors errs.
func result(cands []extract.Candidate, i int, v any, errs []fixpoint.ValidationError, fixes []fixpoint.Repair) CheckResult {
	c := &cands[i]
	for j := range fixes {
		fixes[j].Offset = c.Start
	}
	// The extraction's repairs are listed up to a limit; the schema-guided
	// ones stay the last Coerced entries.
	repairs := extract.CompactRepairs(c.Repairs)
	if len(fixes) > 0 {
		repairs = slices.Concat(repairs, fixes)
	}
	return CheckResult{
		Valid:      len(errs) == 0,
		Value:      v,
		Class:      ClassOf(errs),
		Errors:     errs,
		Repairs:    repairs,
		Source:     c.Source,
		Truncated:  c.Truncated,
		Candidate:  c,
		Candidates: len(cands),
		Coerced:    len(fixes),
	}
}

// choose applies Check's choosing rule to the candidates extract returned.
func choose(c *Session, reply string, cands []extract.Candidate, err error) CheckResult {
	if len(cands) == 0 {
		msg := extract.ErrNoJSON.Error()
		if err != nil {
			msg = err.Error()
		}
		errs := []fixpoint.ValidationError{{Path: "", Keyword: "syntax", Class: fixpoint.ClassSyntax, Message: msg}}
		return CheckResult{Class: fixpoint.ClassSyntax, Errors: errs}
	}
	best, bestErrs := -1, []fixpoint.ValidationError(nil)
	for i := range cands {
		errs := candidateErrors(c, reply, &cands[i])
		if len(errs) == 0 {
			best, bestErrs = i, ambiguous(c, reply, cands, i, cands[i].Value, nil)
			break
		}
		if best < 0 || ErrorCount(errs) < ErrorCount(bestErrs) {
			best, bestErrs = i, errs
		}
	}
	cand := &cands[best]
	return CheckResult{
		Valid:      len(bestErrs) == 0,
		Value:      cand.Value,
		Class:      ClassOf(bestErrs),
		Errors:     bestErrs,
		Repairs:    extract.CompactRepairs(cand.Repairs),
		Source:     cand.Source,
		Truncated:  cand.Truncated,
		Candidate:  cand,
		Candidates: len(cands),
	}
}

// ambiguous returns the error of a reply in which, besides cands[chosen]
// (whose value, after its local fixes, is value), another candidate that
// does not overlap it fits the schema too, as extracted or after local
// fixes by coerce (nil: none), and holds another value: "Example: {...}
// Answer: {...}", "1 500" (1 and 500), "1, 2, 3" for an array (each
// wrapped alone), a draft and its correction. Which one the model meant is not for the
// checker to guess (it took the first); the model is asked for one. Values
// are compared as JSON values: 1.0 and 1 are one number. With no schema
// every value is acceptable, and nothing is ambiguous. At most
// ambiguityCoerceMax other candidates are tried with local fixes, so a
// reply of many fragments stays cheap.
func ambiguous(sc *Session, reply string, cands []extract.Candidate, chosen int, value any, coerce Coercer) []fixpoint.ValidationError {
	if sc.s == nil {
		return nil
	}
	c := &cands[chosen]
	coerced := 0
	for j := range cands {
		o := &cands[j]
		if j == chosen || (o.Start < c.End && c.Start < o.End) || extract.SameValue(o.Value, value) {
			continue
		}
		if len(ExtractionErrors(reply, o)) > 0 || o.Start >= c.End && extract.Citation(reply, o) {
			continue
		}
		errs := sc.Validate(o.Value)
		if len(errs) > 0 {
			if coerce == nil || coerced >= ambiguityCoerceMax {
				continue
			}
			coerced++
			v, _, left := coerce(sc, o.Value, errs)
			if len(left) > 0 || extract.SameValue(v, value) {
				continue
			}
		}
		first, second := c, o
		if second.Start < first.Start {
			first, second = second, first
		}
		return []fixpoint.ValidationError{{Path: "", Keyword: "ambiguous", Class: fixpoint.ClassSyntax, Message: fmt.Sprintf(
			"%s: the reply holds more than one JSON value that fits the schema, at offset %d (%s) and at offset %d (%s); reply with only the value meant",
			render.Root, first.Start, snippetAt(reply, first.Start), second.Start, snippetAt(reply, second.Start))}}
	}
	// A value after the chosen one that does not fit, or was cut off, but
	// is set out as another answer (fenced, tagged, or after a label such
	// as "Answer:" or "Corrected:") and has its shape (an object sharing a
	// key with it and saying something else, an array of the same items):
	// "Example: {...} Answer: {<wrong or cut off>}", a correction that is
	// itself wrong. Taking the example would store what the model did not
	// mean. A fragment in the explanation ("I set {"age": 31} because"),
	// a citation [1] or a value before the chosen one (a draft it
	// corrected, the input it quoted) is not.
	// So is one before it, labelled as the answer, when the chosen value
	// is not: "Answer: {<wrong>}. Example of the format: {...}".
	cLabelled := extract.Labelled(reply, c)
	for j := range cands {
		o := &cands[j]
		after := o.Start >= c.End && extract.SetOut(reply, o)
		before := o.End <= c.Start && !cLabelled && extract.Labelled(reply, o)
		if !after && !before || !extract.SameAnswer(value, o.Value) || extract.SameValue(o.Value, value) {
			continue
		}
		if !o.Truncated && coerce != nil && coerced < ambiguityCoerceMax {
			// The same answer once its safe fixes are made ("0.9" for 0.9,
			// "Positive" for "positive"): a repeat, not another answer.
			coerced++
			if errs := sc.Validate(o.Value); len(errs) > 0 {
				if v, _, left := coerce(sc, o.Value, errs); len(left) == 0 && extract.SameValue(v, value) {
					continue
				}
			}
		}
		why := "does not fit the schema"
		if o.Truncated {
			why = "is cut off"
		}
		if before {
			return []fixpoint.ValidationError{{Path: "", Keyword: "ambiguous", Class: fixpoint.ClassSyntax, Message: fmt.Sprintf(
				"%s: the reply holds an answer at offset %d (%s) that %s, then a JSON value that fits the schema at offset %d (%s); reply with only the value meant",
				render.Root, o.Start, snippetAt(reply, o.Start), why, c.Start, snippetAt(reply, c.Start))}}
		}
		return []fixpoint.ValidationError{{Path: "", Keyword: "ambiguous", Class: fixpoint.ClassSyntax, Message: fmt.Sprintf(
			"%s: the reply holds a JSON value that fits the schema at offset %d (%s), then another answer at offset %d (%s) that %s; reply with only the value meant",
			render.Root, c.Start, snippetAt(reply, c.Start), o.Start, snippetAt(reply, o.Start), why)}}
	}
	// An answer set out that could not be read at all ("Answer: {"age":
	// 1 500}", dropped as a fragment), after the chosen value or, when it
	// is not labelled itself, before it: the example is not what the
	// model meant either.
	if at := extract.UnreadAnswer(reply, cands, c, value, !cLabelled); at >= 0 {
		order := "then another answer at offset %[3]d (%[4]s) that could not be read"
		if at < c.Start {
			order = "after an answer at offset %[3]d (%[4]s) that could not be read"
		}
		return []fixpoint.ValidationError{{Path: "", Keyword: "ambiguous", Class: fixpoint.ClassSyntax, Message: fmt.Sprintf(
			"%[5]s: the reply holds a JSON value that fits the schema at offset %[1]d (%[2]s), "+order+"; reply with only the value meant",
			c.Start, snippetAt(reply, c.Start), at, snippetAt(reply, at), render.Root)}}
	}
	return nil
}

// ambiguityCoerceMax bounds the other candidates ambiguous tries with local
// fixes.
const ambiguityCoerceMax = 64

// candidateErrors returns every error of one candidate.
func candidateErrors(sc *Session, reply string, c *extract.Candidate) []fixpoint.ValidationError {
	errs := sc.Validate(c.Value)
	if pre := ExtractionErrors(reply, c); len(pre) > 0 {
		errs = append(pre, errs...)
	}
	return errs
}

// checkJSON is the `worker check` object.
type checkJSON struct {
	Valid     bool                       `json:"valid"`
	Value     json.RawMessage            `json:"value"`
	Class     fixpoint.Class             `json:"class"`
	Errors    []fixpoint.ValidationError `json:"errors"`
	Repairs   []fixpoint.Repair          `json:"repairs"`
	Source    fixpoint.Source            `json:"source"`
	Truncated bool                       `json:"truncated"`
}

// MarshalJSON renders the `worker check` object: {"valid", "value", "class",
// "errors", "repairs", "source", "truncated"}. "errors" and "repairs" are
// arrays, never null; "value" is null when nothing was extracted. The value
// keeps the key order of the reply when the candidate's JSON text is
// available and no schema-guided repair changed it (Coerced is 0); a
// repaired value is rendered with its object keys sorted. MarshalJSON does
// not escape <, > and &; json.Marshal re-escapes them, so use a json.Encoder
// with SetEscapeHTML(false) to print them as is.
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
		out.Errors = []fixpoint.ValidationError{}
	}
	if out.Repairs == nil {
		out.Repairs = []fixpoint.Repair{}
	}
	switch {
	case r.Coerced == 0 && r.Candidate != nil && len(r.Candidate.JSON) > 0 && json.Valid(r.Candidate.JSON) && utf8.Valid(r.Candidate.JSON):
		// (Bytes that are not UTF-8 would make the output invalid JSON:
		// the value is encoded instead, each bad byte as U+FFFD.)
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
