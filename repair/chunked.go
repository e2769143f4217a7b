package repair

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
)

// startChunked starts the parallel or sequential strategy.
func startChunked(job *Job, prev *fixpoint.Result, cfg Config) (Machine, error) {
	return nil, fmt.Errorf("%w: strategy %s is not built yet", fixpoint.ErrBadJob, job.Limits.Strategy)
}
