package queue

import "time"

// DispositionKind is what becomes of a job's message.
type DispositionKind int

// The dispositions of a message.
const (
	// DispAck acks a message whose result is committed.
	DispAck DispositionKind = iota + 1
	// DispSkip acks a message without running its job: the job is final
	// already, or the message is of an earlier run.
	DispSkip
	// DispRetry hands the job back, to be delivered again after Delay.
	DispRetry
	// DispRelease hands the job back for redelivery as soon as the
	// worker's last pull has ended: the worker is stopping.
	DispRelease
	// DispReject records the job rejected with Cause, then terminates its
	// message: it can never succeed as sent.
	DispReject
	// DispDead records the job dead with Cause, then terminates its
	// message: its last delivery ended without a result.
	DispDead
	// DispForeign hands back, after Delay and unrecorded, a job this
	// worker's ledger never recorded.
	DispForeign
	// DispWave acks a message whose job's place in a recorded wave is
	// committed: the ledger owns the job from then on (batch delivery).
	DispWave
)

// Label is the disposition's metrics label: what is done to the message
// ("ack", "skip", "term" or "nak").
func (k DispositionKind) Label() string {
	switch k {
	case DispAck, DispWave:
		return "ack"
	case DispSkip:
		return "skip"
	case DispReject, DispDead:
		return "term"
	}
	return "nak"
}

// Disposition is what becomes of one message, as a value: the worker
// decides it from why the job stopped (or from the job's own outcome) and
// carries it out in one place, the only code that acks, naks or
// terminates a job message.
type Disposition struct {
	Kind DispositionKind
	// Delay is the wait before redelivery (DispRetry, DispForeign).
	Delay time.Duration
	// Cause says why (DispRetry, DispReject, DispDead).
	Cause error
}
