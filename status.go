package fixpoint

// Status is a job's status in the ledger. A job is StatusQueued from the
// moment it is enqueued until a worker (or a batch action) sets one of the
// final statuses, exactly once per run.
type Status string

// The statuses.
const (
	// StatusQueued: not final yet.
	StatusQueued Status = "queued"
	// StatusValid: a value that matches the schema.
	StatusValid Status = "valid"
	// StatusInvalid: no valid value after the last attempt.
	StatusInvalid Status = "invalid"
	// StatusFailed: a permanent provider error, or a token or retry budget.
	StatusFailed Status = "failed"
	// StatusRejected: a bad job, never run.
	StatusRejected Status = "rejected"
	// StatusDead: delivered the queue's maximum times without a final
	// result.
	StatusDead Status = "dead"
	// StatusCancelled: enqueue cancel ended the job before it was done.
	StatusCancelled Status = "cancelled"
	// StatusOverBudget: the batch's spend cap was reached before the job
	// was done; raising the cap and requeueing runs it again.
	StatusOverBudget Status = "over_budget"
)

// Final reports whether s is a final status.
func (s Status) Final() bool {
	switch s {
	case StatusValid, StatusInvalid, StatusFailed, StatusRejected, StatusDead, StatusCancelled, StatusOverBudget:
		return true
	}
	return false
}

// Statuses returns every status, StatusQueued first.
func Statuses() []Status {
	return []Status{StatusQueued, StatusValid, StatusInvalid, StatusFailed, StatusRejected, StatusDead, StatusCancelled, StatusOverBudget}
}
