package repair

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
)

// startAgent starts the agent strategy.
func startAgent(job *Job, prev *fixpoint.Result, cfg Config) (Machine, error) {
	return nil, fmt.Errorf("%w: strategy %s is not built yet", fixpoint.ErrBadJob, job.Limits.Strategy)
}
