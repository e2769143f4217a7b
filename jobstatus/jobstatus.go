// Package jobstatus names the statuses a job goes through, once, for the
// ledger, the repair step, the workers and the commands alike.
package jobstatus

// Status is a job's status in the ledger. A job is Queued from the moment
// it is enqueued until a worker (or a batch action) sets one of the final
// statuses, exactly once per run.
type Status string

// The statuses.
const (
	// Queued: not final yet.
	Queued Status = "queued"
	// Valid: a value that matches the schema.
	Valid Status = "valid"
	// Invalid: no valid value after the last attempt.
	Invalid Status = "invalid"
	// Failed: a permanent provider error, or a token or retry budget.
	Failed Status = "failed"
	// Rejected: a bad job, never run.
	Rejected Status = "rejected"
	// Dead: delivered the queue's maximum times without a final result.
	Dead Status = "dead"
	// Cancelled: enqueue cancel ended the job before it was done.
	Cancelled Status = "cancelled"
	// OverBudget: the batch's spend cap was reached before the job was
	// done; raising the cap and requeueing runs it again.
	OverBudget Status = "over_budget"
)

// Final reports whether s is a final status.
func (s Status) Final() bool {
	switch s {
	case Valid, Invalid, Failed, Rejected, Dead, Cancelled, OverBudget:
		return true
	}
	return false
}

// All returns every status, Queued first.
func All() []Status {
	return []Status{Queued, Valid, Invalid, Failed, Rejected, Dead, Cancelled, OverBudget}
}
