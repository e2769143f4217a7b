package satisfy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint/internal/render"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// ErrUnsatisfiablePart is matched (errors.Is) by the errors
// [Solution.Parts] returns.
var ErrUnsatisfiablePart = errors.New("no value satisfies this part of the schema")

// Parts returns, for a schema that some value satisfies, the declared
// properties and the items no value can satisfy, by the same check as
// Check (and within the budget of the Solve that found sol). The property
// is optional (the array may be empty), so the schema as a whole is
// accepted; but a reply that gives it (and models fill in the properties a
// schema declares) always fails, and every repair attempt is paid for. A
// part whose schema is false forbids it on purpose and is not listed. Each
// is an *Error matching ErrUnsatisfiablePart whose Location is the part's
// schema and whose message says why. It returns nil for an unsatisfiable
// schema, which Check refuses whole, and for a Solution Solve did not
// finish.
func (sol *Solution) Parts() []*Error {
	g := sol.g
	if !sol.done || g.t[0] == 0 {
		return nil
	}
	var out []*Error
	seen := map[int]bool{0: true}
	queue := []int{0}
	live := func(j int) {
		if j >= 0 && !seen[j] && g.t[j] != 0 {
			seen[j] = true
			queue = append(queue, j)
		}
	}
	reported := map[int]bool{}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		n := &g.nodes[i]
		var parts []int
		if g.t[i]&subschema.TypeObject != 0 {
			parts = append(parts, n.optProps...)
		}
		if g.t[i]&subschema.TypeArray != 0 {
			parts = append(parts, n.optItems...)
		}
		for _, p := range parts {
			if p >= 0 && g.t[p] == 0 && !g.isFalse(p) && !reported[p] {
				reported[p] = true
				out = append(out, &Error{Location: g.nodes[p].loc,
					Err: fmt.Errorf("%w (%s), so a reply that gives it always fails", ErrUnsatisfiablePart, unsatReason(g.explainFrom(p)))})
			}
			live(p)
		}
		for _, j := range g.deps(i) {
			live(j)
		}
	}
	return out
}

// unsatReason is an explanation of explainFrom without the words of
// ErrUnsatisfiable: the keyword, where it is, and why.
func unsatReason(err error) string {
	var se *Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	why := strings.TrimPrefix(se.Err.Error(), ErrUnsatisfiable.Error()+": ")
	if se.Keyword == "" {
		return fmt.Sprintf("at %s: %s", render.Path(se.Location), why)
	}
	return fmt.Sprintf("keyword %q at %s: %s", se.Keyword, render.Path(se.Location), why)
}
