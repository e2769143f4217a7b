package repair

import (
	"context"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Checks are the stages after the schema: the schema's rules, and the
// evidence stage (Mode, against Source, not grading what Exempt names).
// The zero value checks nothing.
type Checks struct {
	Rules  *rules.Set
	Mode   fixpoint.EvidenceMode
	Source *evidence.Source
	Exempt func(ptr string) bool
}

func (c Checks) evidenceOn() bool {
	return c.Mode != "" && c.Mode != fixpoint.EvidenceOff && c.Source != nil
}

// Truth is what the stages after the schema made of a value the schema
// takes: the errors that make it not valid (a rule of severity error that
// fails, class semantic; under EvidenceRequire a leaf its source does not
// ground, class evidence), the failures of its rules of severity warn,
// and each string and number's grade and span.
type Truth struct {
	Errors   []fixpoint.ValidationError
	Warnings []fixpoint.ValidationError
	Evidence []fixpoint.Grounding
}

// Check runs the rules on value (a decoded JSON value, numbers as
// json.Number), then, on a value they take, the evidence stage. The rules'
// cost limits bound it.
func (c Checks) Check(value any) Truth {
	var t Truth
	if c.Rules != nil {
		findings, _ := c.Rules.Check(context.Background(), value)
		for _, f := range findings {
			if f.Severity == rules.SeverityWarn {
				t.Warnings = append(t.Warnings, f.ValidationError())
			}
		}
		if t.Errors = rules.Errors(findings); len(t.Errors) > 0 {
			return t
		}
	}
	if !c.evidenceOn() {
		return t
	}
	res := c.Source.Align(value, c.Exempt)
	t.Evidence = res.Leaves
	if c.Mode == fixpoint.EvidenceRequire {
		t.Errors = evidence.Require(value, res.Leaves)
	}
	return t
}

// checkTruth runs the job's checks after the schema on a value it takes;
// a value that fails them is no longer valid, and their errors are fed
// back like the schema's.
func (s *Step) checkTruth(a *fixpoint.Attempt, c *checked) {
	checks := s.job.Checks()
	if len(a.Value) == 0 || (checks.Rules == nil && !checks.evidenceOn()) {
		return
	}
	value, err := decodeValue(a.Value)
	if err != nil {
		return // a.Value is the checker's own JSON: it decodes
	}
	t := checks.Check(value)
	a.Warnings, a.Evidence = t.Warnings, t.Evidence
	if len(t.Errors) > 0 {
		a.Errors = append(a.Errors, t.Errors...)
		c.valid = false
		c.class = string(validate.ClassOf(a.Errors))
	}
}
