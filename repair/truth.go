package repair

import (
	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// checkTruth runs the stages after the schema on a value it takes: the
// evidence stage grades each string and number against the job's source
// and, under EvidenceRequire, makes an ungrounded one an error of class
// evidence. A value that fails them is no longer valid; its errors are
// fed back like the schema's.
func (s *Step) checkTruth(a *fixpoint.Attempt, c *checked) {
	if s.job.Evidence == "" || s.job.Evidence == fixpoint.EvidenceOff || s.job.Source == nil || len(a.Value) == 0 {
		return
	}
	value, err := decodeValue(a.Value)
	if err != nil {
		return // a.Value is the checker's own JSON: it decodes
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
