package main

import (
	"bytes"
	"encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// afterSchema is what worker check runs after the schema: the schema's
// rules, and the evidence stage in mode against source (nil: not run).
type afterSchema struct {
	mode   fixpoint.EvidenceMode
	source *evidence.Source
}

func newAfterSchema(mode, sourceFile string) (afterSchema, error) {
	var a afterSchema
	var err error
	if a.mode, err = fixpoint.ParseEvidenceMode(mode); err != nil {
		return a, usagef("--evidence: %v", err)
	}
	if sourceFile != "" && a.mode != fixpoint.EvidenceOff {
		text, err := cli.ReadTextFile(sourceFile)
		if err != nil {
			return a, usagef("read --source: %v", err)
		}
		a.source = evidence.New(string(text))
	}
	return a, nil
}

// checkSchema is a schema as worker check runs it: compiled, with its
// rules and the locations it exempts from the evidence stage. A nil
// checkSchema checks only that a value was extracted.
type checkSchema struct {
	schema *validate.Schema
	rules  *rules.Set
	exempt func(ptr string) bool
}

// readSchema reads and compiles a schema file: a usage error when it
// cannot run (it does not compile, no value satisfies it, a rule does not
// compile).
func (a afterSchema) readSchema(name string) (*checkSchema, []byte, error) {
	_, raw, err := readSchema(name)
	if err != nil {
		return nil, nil, err
	}
	cs, err := a.compile(raw)
	if err != nil {
		return nil, nil, usagef("schema %s: %v", name, err)
	}
	return cs, raw, nil
}

func (a afterSchema) compile(raw []byte) (*checkSchema, error) {
	schema, err := validate.Compile(raw)
	if err != nil {
		return nil, err
	}
	if err := schema.Satisfiable(); err != nil {
		return nil, err
	}
	set, err := rules.Compile(raw)
	if err != nil {
		return nil, err
	}
	cs := &checkSchema{schema: schema, rules: set}
	var doc any
	if json.Unmarshal(raw, &doc) == nil {
		cs.exempt = evidence.Exempt(doc)
	}
	return cs, nil
}

// checkOutput is worker check's verdict: the check's, then the rules'
// warnings and, when the stage ran, the evidence.
type checkOutput struct {
	validate.CheckResult
	Warnings []fixpoint.ValidationError
	Evidence []fixpoint.Grounding
	graded   bool
}

// check checks text against cs and runs the stages after the schema on a
// value it takes, the evidence stage as after says.
func (cs *checkSchema) check(text string, opt validate.CheckOptions, after afterSchema) checkOutput {
	if cs == nil {
		return checkOutput{CheckResult: validate.CheckWith(nil, text, opt)}
	}
	out := checkOutput{CheckResult: validate.CheckWith(cs.schema, text, opt)}
	if !out.Valid {
		return out
	}
	checks := repair.Checks{Rules: cs.rules, Mode: fixpoint.EvidenceOff}
	if after.source != nil {
		checks.Mode, checks.Source, checks.Exempt = after.mode, after.source, cs.exempt
	}
	t := checks.Check(out.Value)
	out.Warnings, out.Evidence, out.graded = t.Warnings, t.Evidence, checks.Source != nil
	if len(t.Errors) > 0 {
		out.Valid = false
		out.Errors = append(out.Errors, t.Errors...)
		out.Class = validate.ClassOf(out.Errors)
	}
	return out
}

// MarshalJSON is the check's JSON with warnings and evidence after it.
func (o checkOutput) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(o.CheckResult)
	if err != nil || (len(o.Warnings) == 0 && !o.graded) {
		return b, err
	}
	extra := struct {
		Warnings []fixpoint.ValidationError `json:"warnings,omitempty"`
		Evidence []fixpoint.Grounding       `json:"evidence,omitempty"`
	}{Warnings: o.Warnings}
	if o.graded {
		extra.Evidence = o.Evidence
		if extra.Evidence == nil {
			extra.Evidence = []fixpoint.Grounding{}
		}
	}
	e, err := json.Marshal(extra)
	if err != nil || len(e) <= 2 {
		return b, err
	}
	return append(bytes.TrimSuffix(b, []byte("}")), append([]byte{','}, e[1:]...)...), nil
}
