package enqueue

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// CheckDocumentStrategy reports what keeps a batch's jobs from running
// under limits' strategy when it is a document strategy (parallel,
// sequential, agent): jobs with no document (hasDocument false), or batch
// delivery. The mode is checked with the other limits
// (fixpoint.Limits.ValidateMode). Other strategies pass.
func CheckDocumentStrategy(lim fixpoint.Limits, hasDocument bool, delivery string) error {
	s := lim.Strategy
	if !s.Document() {
		return nil
	}
	if !hasDocument {
		return fmt.Errorf("%w: strategy %s runs over each job's document, and the jobs have none: give --document-field F (a row field holding the text) or --document-file-field F (a row field holding a file's path)", ErrBadConfig, s)
	}
	if delivery == queue.DeliveryBatch {
		// The wave driver sends one request per job per wave; a document
		// job's chunk calls go out together, which waves do not carry yet.
		return fmt.Errorf("%w: strategy %s with --delivery batch is not supported yet: batch waves send one request per job, and a document strategy sends several at once; use --delivery realtime", ErrBadConfig, s)
	}
	return nil
}
