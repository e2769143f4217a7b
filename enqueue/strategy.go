package enqueue

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
)

// CheckDocumentStrategy reports what keeps a batch's jobs from running
// under limits' strategy when it is a document strategy (parallel,
// sequential, agent): jobs with no document (hasDocument false). The mode
// is checked with the other limits (fixpoint.Limits.ValidateMode). Other
// strategies pass. Batch delivery takes them all: a wave carries every
// request a job's Machine has outstanding (see package wave).
func CheckDocumentStrategy(lim fixpoint.Limits, hasDocument bool) error {
	s := lim.Strategy
	if !s.Document() {
		return nil
	}
	if !hasDocument {
		return fmt.Errorf("%w: strategy %s runs over each job's document, and the jobs have none: give --document-field F (a row field holding the text) or --document-file-field F (a row field holding a file's path)", ErrBadConfig, s)
	}
	return nil
}
