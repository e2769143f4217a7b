package pipeline

import "github.com/fixpoint-dev/fixpoint/queue"

// SetAfterCommitFunc makes the worker run f after a job's result is
// committed and before its message is acked: tests crash in that window.
func SetAfterCommitFunc(c *WorkerConfig, f func(jobID string)) { c.afterCommit = f }

// SetBeforeJobFunc makes the worker run f at the start of each job's
// repair loop: tests inject panics.
func SetBeforeJobFunc(c *WorkerConfig, f func(env *queue.Envelope)) { c.beforeJob = f }

// SetWaveHook makes the worker run f at each point of a wave's life where
// a crash leaves the ledger in another state: tests kill workers there.
func SetWaveHook(c *WorkerConfig, f func(point string, waveID int64)) { c.waveHook = f }

// OutageHoldsMax is how often a job waits out a provider failure inside
// one delivery.
const OutageHoldsMax = outageHoldsMax

// ReplaySpill writes what the spill files in dir hold to the ledger.
var ReplaySpill = replaySpill
