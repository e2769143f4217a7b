package repair

import (
	"context"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// checkTruth runs the stages after the schema on a value it takes: the
// schema's rules, then (on a value they take) the evidence stage, which
// grades each string and number against the job's source and, under
// EvidenceRequire, makes an ungrounded one an error of class evidence. A
// value that fails them is no longer valid; its errors are fed back like
// the schema's.
func (s *Step) checkTruth(a *fixpoint.Attempt, c *checked) {
	if len(a.Value) == 0 || (s.job.Rules == nil && !s.evidenceOn()) {
		return
	}
	value, err := decodeValue(a.Value)
	if err != nil {
		return // a.Value is the checker's own JSON: it decodes
	}
	if s.job.Rules != nil {
		// The rules' cost limits bound the check; the step has no context
		// of its own to end it sooner.
		findings, _ := s.job.Rules.Check(context.Background(), value)
		for _, f := range findings {
			if f.Severity == rules.SeverityWarn {
				a.Warnings = append(a.Warnings, f.ValidationError())
			}
		}
		if errs := rules.Errors(findings); len(errs) > 0 {
			a.Errors = append(a.Errors, errs...)
			c.valid = false
			c.class = string(validate.ClassOf(a.Errors))
			return
		}
	}
	if !s.evidenceOn() {
		return
	}
	res := s.job.Source.Align(value, s.job.Exempt)
	a.Evidence = res.Leaves
	if s.job.Evidence != fixpoint.EvidenceRequire {
		return
	}
	if errs := evidence.Require(value, res.Leaves); len(errs) > 0 {
		a.Errors = append(a.Errors, errs...)
		c.valid = false
		c.class = string(validate.ClassOf(a.Errors))
	}
}

func (s *Step) evidenceOn() bool {
	return s.job.Evidence != "" && s.job.Evidence != fixpoint.EvidenceOff && s.job.Source != nil
}
