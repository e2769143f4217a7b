// Package wave drives batch delivery: the repair step driven in waves of
// provider batches (OpenAI's Batch API, Anthropic's Message Batches) at
// half the realtime price, answered within hours instead of seconds. The
// worker (package pipeline) hands its batch-delivery jobs to a Driver,
// which reaches back to it through the Worker interface.
//
// A worker pulls a batch-delivery job from the queue as any other, starts
// its repair step and, instead of calling the provider, collects the
// step's first request with others of the same batch and model (a
// document job's Machine may ask for several: they go together). When the
// collection is full or has waited Config.Collect, the wave is
// recorded in the ledger with each job's place in it, and only then are
// the messages acked: from that commit on the ledger owns the jobs (a
// queue's ack wait is no use for a wait of hours). The recording worker
// holds the wave's lease and submits it; any worker polls the open waves,
// one at a time each (a lease in Postgres, taken over when its holder dies
// and it expires). When a wave ends its results go through the step one by
// one, each recorded as an attempt exactly as in realtime (plus the wave
// and the price basis; a job's outcomes together, in attempt order), valid
// jobs are final, and the jobs the step says
// need another attempt go into the next wave with their feedback, or,
// near the deadline or when few remain, back to the queue to finish
// realtime, going on from the attempts the ledger holds.
//
// Every step leaves the ledger able to go on after a crash: a wave is
// recorded before anything is sent; its input file and provider batch ids
// are recorded as soon as they exist, and one created but not recorded is
// found again (ListBatches: OpenAI by the metadata naming the wave,
// Anthropic by its size and time); a result is recorded once (its request
// is marked in the same transaction); a job keeps its place in an ended
// wave until the next wave holds it or the queue has it again.
//
// # Files
//
//   - config.go: [Config], its defaults and checks;
//   - worker.go, ledger.go, batch_client.go and clock.go: what the driver
//     reaches, each through an interface of its own ([Worker], [Ledger],
//     [BatchClient] and the clock), so that its tests run on fakes;
//   - driver.go: [Driver], [New], Stop and what the worker asks of it
//     (Drives, Open, JobAttempts);
//   - collect.go: collecting jobs into a wave and recording it;
//   - drive.go: Run, one step of a wave under its lease, the lease's
//     renewal and the wait between polls;
//   - submit.go and reconcile.go: the upload and create, and finding a
//     batch created but not recorded;
//   - poll.go: a submitted wave's poll, cancel and 404s;
//   - results.go: recording an ended wave's results;
//   - next.go: the jobs of an ended wave into the next wave or realtime;
//   - document.go: a document job (parallel, sequential, agent) through
//     its repair.Machine, every request it has outstanding in one wave.
//
// The unit tests (*_test.go here) drive waves step by step on fakes of
// the ledger, the provider's batch API, the worker, the queue and the
// clock; pipeline's waves_test.go runs them end to end on Postgres, NATS
// and the simulator.
package wave
