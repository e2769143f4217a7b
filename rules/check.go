package rules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// Check runs the rules of s on v, a JSON value as decoded by
// encoding/json with UseNumber (float64 and Go integers are read too).
// Each rule runs on every place of v its object's schema applies to
// (see docs/rules.md), except where the value there is null. It returns
// the rules that failed there, sorted by Path (array indexes
// numerically), then SchemaPath, then At; nil when every rule held.
//
// The error is ctx's, when ctx ended before the rules did: then the
// findings are incomplete and none is returned. A rule that goes over
// CostLimit is a finding whose Err matches ErrCostLimit. So is the
// evaluation that takes all the rules of v over CheckCostLimit or
// MaxEvaluations, with severity error whatever its rule's; after it no
// rule runs.
func (s *Set) Check(ctx context.Context, v any) ([]Finding, error) {
	if s.Len() == 0 {
		return nil, nil
	}
	c := &checker{ctx: ctx}
	c.visit([]*node{s.g.root}, v, "")
	if c.err != nil {
		return nil, c.err
	}
	slices.SortStableFunc(c.findings, func(a, b Finding) int {
		if n := comparePointers(a.Path, b.Path); n != 0 {
			return n
		}
		if n := comparePointers(a.SchemaPath, b.SchemaPath); n != 0 {
			return n
		}
		return comparePointers(a.At, b.At)
	})
	return c.findings, nil
}

// checker is the state of one Check.
type checker struct {
	ctx      context.Context
	findings []Finding
	cost     uint64
	runs     int
	stop     bool
	err      error
}

// visit runs the rules of the live nodes at, and those of the subschemas
// they apply with, on v, found at ptr; then visits v's members and items.
func (c *checker) visit(at []*node, v any, ptr string) {
	if c.stop {
		return
	}
	vk := valueKind(v)
	set := applying(at, vk)
	if v != nil {
		var conv []converted
		for _, n := range set {
			for _, r := range n.rules {
				if c.stop {
					return
				}
				c.eval(r, selfOf(&conv, r.self, v), ptr)
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		if !slices.ContainsFunc(set, (*node).liveMembers) {
			return
		}
		for _, k := range sortedKeys(x) {
			if kids := members(set, k); len(kids) > 0 {
				c.visit(kids, x[k], ptr+"/"+extract.PointerToken(k))
			}
		}
	case []any:
		if !slices.ContainsFunc(set, (*node).liveItems) {
			return
		}
		for i, item := range x {
			if kids := items(set, i); len(kids) > 0 {
				c.visit(kids, item, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
}

// converted is a value converted for a type, kept for the other rules of
// the place.
type converted struct {
	t *ctype
	v any
}

// selfOf returns v converted for type t, converting it once per place.
func selfOf(conv *[]converted, t *ctype, v any) any {
	for _, c := range *conv {
		if c.t == t {
			return c.v
		}
	}
	out := convert(v, t)
	*conv = append(*conv, converted{t, out})
	return out
}

// applying returns the live nodes of at and those they apply with to a
// value of kind vk (their refs, allOf, and the anyOf/oneOf branches of
// that kind), each once.
func applying(at []*node, vk kinds) []*node {
	var out []*node
	var add func(n *node)
	add = func(n *node) {
		if n == nil || !n.live || slices.Contains(out, n) {
			return
		}
		out = append(out, n)
		for _, r := range n.refs {
			add(r)
		}
		for _, b := range n.branches {
			if b.kinds&vk != 0 {
				add(b.n)
			}
		}
	}
	for _, n := range at {
		add(n)
	}
	return out
}

// liveMembers reports whether a rule is reached from n through an
// object's members.
func (n *node) liveMembers() bool {
	for _, p := range n.props {
		if p != nil && p.live {
			return true
		}
	}
	for _, p := range n.patterns {
		if p.n != nil && p.n.live {
			return true
		}
	}
	return n.additional != nil && n.additional.live
}

// liveItems reports whether a rule is reached from n through an array's
// items.
func (n *node) liveItems() bool {
	return slices.ContainsFunc(n.prefix, func(p *node) bool { return p != nil && p.live }) ||
		n.rest != nil && n.rest.live
}

// members returns the live subschemas the nodes of set apply to their
// object's member k: properties[k], each patternProperties matching k,
// else additionalProperties, as JSON Schema says for each node alone.
func members(set []*node, k string) []*node {
	var out []*node
	for _, n := range set {
		p, matched := n.props[k]
		if p != nil && p.live {
			out = append(out, p)
		}
		for _, pat := range n.patterns {
			if pat.re != nil && pat.re.MatchString(k) {
				matched = true
				if pat.n != nil && pat.n.live {
					out = append(out, pat.n)
				}
			}
		}
		if !matched && n.additional != nil && n.additional.live {
			out = append(out, n.additional)
		}
	}
	return out
}

// items returns the live subschemas the nodes of set apply to their
// array's item i.
func items(set []*node, i int) []*node {
	var out []*node
	for _, n := range set {
		t := n.rest
		if i < len(n.prefix) {
			t = n.prefix[i]
		}
		if t != nil && t.live {
			out = append(out, t)
		}
	}
	return out
}

// valueKind returns the kind of a JSON value.
func valueKind(v any) kinds {
	switch v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case map[string]any:
		return kObject
	case []any:
		return kArray
	case string:
		return kString
	}
	if _, _, isInt, ok := number(v); ok {
		if isInt {
			return kInteger
		}
		return kFraction
	}
	return 0
}

// activation binds self, and nothing else.
type activation struct{ self any }

func (a activation) ResolveName(name string) (any, bool) {
	if name == "self" {
		return a.self, true
	}
	return nil, false
}

func (activation) Parent() interpreter.Activation { return nil }

// eval runs r on self, found at ptr, and records what failed.
func (c *checker) eval(r *rule, self any, ptr string) {
	if err := c.ctx.Err(); err != nil {
		c.err, c.stop = err, true
		return
	}
	f := Finding{Path: ptr + r.path, At: ptr, SchemaPath: r.location(), Rule: r.text, Message: r.message, Severity: r.severity}
	if c.runs == MaxEvaluations {
		f.Severity, f.Err = SeverityError,
			fmt.Errorf("%w: the rules of this value ran %d times; this one and the rest were not run", ErrCostLimit, MaxEvaluations)
		c.findings = append(c.findings, f)
		c.stop = true
		return
	}
	c.runs++
	out, det, err := r.prg.ContextEval(c.ctx, activation{self})
	if cost := det.ActualCost(); cost != nil {
		c.cost += *cost
	}
	var cancelled interpreter.EvalCancelledError
	switch {
	case err != nil && c.ctx.Err() != nil:
		c.err, c.stop = c.ctx.Err(), true
		return
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		f.Err = fmt.Errorf("%w: the rule costs more than %d", ErrCostLimit, CostLimit)
		c.findings = append(c.findings, f)
	case err != nil:
		f.Err = err
		c.findings = append(c.findings, f)
	case out == types.False:
		c.findings = append(c.findings, f)
	case out != types.True:
		f.Err = fmt.Errorf("the rule gave %s, not true or false", out.Type().TypeName())
		c.findings = append(c.findings, f)
	}
	if c.cost > CheckCostLimit {
		f.Severity, f.Err = SeverityError,
			fmt.Errorf("%w: the rules of this value cost more than %d together; the rest were not run", ErrCostLimit, CheckCostLimit)
		c.findings = append(c.findings, f)
		c.stop = true
	}
}

// comparePointers orders JSON pointers token by token, tokens that are
// both array indexes by number.
func comparePointers(a, b string) int {
	ta, tb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		if x == y {
			continue
		}
		if isIndex(x) && isIndex(y) {
			if len(x) != len(y) {
				return len(x) - len(y)
			}
		}
		return strings.Compare(x, y)
	}
	return len(ta) - len(tb)
}

// isIndex reports whether tok is an array index.
func isIndex(tok string) bool {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}
