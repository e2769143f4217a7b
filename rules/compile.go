package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// interruptEvery is how many comprehension iterations pass between two
// looks at the check's context.
const interruptEvery = 100

// compileRules types the places of the schema the rules see, then
// compiles and type-checks every rule against the type of its self.
func (s *Set) compileRules() []error {
	base, err := baseEnv()
	if err != nil {
		return []error{&CompileError{Err: fmt.Errorf("the rule environment: %v", err)}}
	}
	ty := &typer{byKey: map[string]*ctype{}, structs: map[string]*ctype{}, names: map[string]int{}}
	for _, site := range s.g.sites {
		self := ty.typeOf(closure([]entry{{site, kAll}}))
		if self.nullable {
			// A rule never runs on null (see check).
			t := *self
			t.nullable = false
			self = &t
		}
		for _, r := range site.rules {
			r.self = self
			s.rules = append(s.rules, r)
		}
	}
	if ty.err != nil {
		return []error{&CompileError{Err: ty.err}}
	}
	env, err := base.Extend(cel.CustomTypeProvider(&provider{Provider: base.CELTypeProvider(), structs: ty.structs}))
	if err != nil {
		return []error{&CompileError{Err: fmt.Errorf("the rule environment: %v", err)}}
	}
	opt, err := cel.NewStaticOptimizer(promote{})
	if err != nil {
		return []error{&CompileError{Err: fmt.Errorf("the rule environment: %v", err)}}
	}
	envs := map[*ctype]*cel.Env{}
	var errs []error
	for _, r := range s.rules {
		e, ok := envs[r.self]
		if !ok {
			if e, err = env.Extend(cel.Variable("self", r.self.cel())); err != nil {
				errs = append(errs, r.fail(err))
				continue
			}
			envs[r.self] = e
		}
		if err := r.compile(e, opt); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// fail returns a CompileError of r.
func (r *rule) fail(err error) error {
	return &CompileError{Location: r.location(), Rule: r.text, Err: err}
}

// compile parses, type-checks and plans r in env.
func (r *rule) compile(env *cel.Env, opt *cel.StaticOptimizer) error {
	ast, iss := env.Compile(r.text)
	if iss.Err() != nil {
		return r.fail(issues(iss))
	}
	switch out := ast.OutputType(); {
	case out.IsExactType(types.BoolType):
		r.bool = true
	case out.Kind() == types.DynKind:
	default:
		return r.fail(fmt.Errorf("a rule must be true or false, this one gives %s", out))
	}
	ast, iss = opt.Optimize(env, ast)
	if iss.Err() != nil {
		return r.fail(issues(iss))
	}
	prg, err := env.Program(ast,
		cel.CostLimit(CostLimit),
		cel.CostTracking(callCost{}),
		cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return r.fail(err)
	}
	r.prg = prg
	if err := checkPath(r.path, r.self); err != nil {
		return r.fail(err)
	}
	return nil
}

// issues returns the errors of iss on one line each: the message and its
// position in the rule (line:column, from 1).
func issues(iss *cel.Issues) error {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("%s (at %d:%d)", e.Message, e.Location.Line(), e.Location.Column()+1))
	}
	if len(parts) == 0 {
		return iss.Err()
	}
	return errors.New(strings.Join(parts, "; "))
}

// checkPath checks the rule's path against the type of its self: each
// step must name a declared property of an object with declared
// properties, an index of an array, and nothing under a string, number
// or boolean.
func checkPath(path string, t *ctype) error {
	if path == "" {
		return nil
	}
	for _, tok := range strings.Split(path[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t.kind {
		case tStruct:
			f, ok := t.fields[tok]
			if !ok {
				return fmt.Errorf("\"path\" %q names %q, which is not a property of the object", path, tok)
			}
			t = f
		case tList:
			if n, err := strconv.Atoi(tok); err != nil || n < 0 || strconv.Itoa(n) != tok {
				return fmt.Errorf("\"path\" %q names %q in an array, which is not an index", path, tok)
			}
			t = t.elem
		case tMap:
			t = t.elem
		case tDyn:
			return nil
		default:
			return fmt.Errorf("\"path\" %q names %q inside a %s", path, tok, t.cel())
		}
	}
	return nil
}
