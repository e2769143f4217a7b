package validate

import (
	"errors"

	"github.com/fixpoint-dev/fixpoint/satisfy"
)

// Satisfiable reports whether some finite JSON value could satisfy the
// schema, as far as a cheap static check can tell (package satisfy says
// what it detects). It returns nil when the schema may be satisfiable,
// and otherwise a *SchemaError matching both ErrSchema and
// satisfy.ErrUnsatisfiable whose Location is the JSON pointer of the
// keyword at fault and whose message says why, with the chain of keywords
// that leads there from the root. A nil *Schema is satisfiable. It is
// pure, safe for concurrent use, and bounded in time and memory: when a
// schema is too large to check within its budget (satisfy.Budget), it
// returns nil.
//
// The check is conservative: it never refuses a schema that some value
// satisfies (it is tested against every schema of the official test suite
// with a valid case). It is not complete: a schema it accepts may still
// have no valid value.
func (s *Schema) Satisfiable() error {
	if s == nil || s.sch == nil {
		return nil
	}
	defer s.guard()()
	var e *satisfy.Error
	if err := satisfy.Check(s.graph, satisfy.Budget); !errors.As(err, &e) {
		return err
	}
	return &SchemaError{Keyword: e.Keyword, Location: e.Location, Err: e.Err}
}

// UnsatisfiableParts returns, for a schema that some value satisfies, the
// declared properties and the items no value can satisfy, by the same
// check as [Schema.Satisfiable] (and within its budget). The property is
// optional (the array may be empty), so the schema as a whole is accepted;
// but a reply that gives it (and models fill in the properties a schema
// declares) always fails, and every repair attempt is paid for. A part
// whose schema is false forbids it on purpose and is not listed. Each
// error is a *SchemaError matching ErrSchema and
// satisfy.ErrUnsatisfiablePart whose Location is the part's schema and
// whose message says why. It returns nil for an unsatisfiable schema,
// which Satisfiable refuses whole.
func (s *Schema) UnsatisfiableParts() []error {
	if s == nil || s.sch == nil {
		return nil
	}
	defer s.guard()()
	sol, ok := satisfy.Solve(s.graph, satisfy.Budget)
	if !ok {
		return nil
	}
	var out []error
	for _, e := range sol.Parts() {
		out = append(out, &SchemaError{Keyword: e.Keyword, Location: e.Location, Err: e.Err})
	}
	return out
}
