// Package pipeline is the worker: the pool that pulls job messages from the
// queue (package queue), runs each through the repair step with its
// realtime driver, and writes every result and attempt to the ledger
// through a batched writer, acking each message only after its rows are
// committed. It decides, in one place, what becomes of each message.
// Batch-delivery jobs go to the wave driver (package wave).
//
// # Files
//
//   - worker.go: [Worker], its configuration and Run: the pull loop, free
//     slots, pauses, drain and shutdown;
//   - run_job.go: one delivery of a job, from the message to its result;
//   - loop.go: [Loop], the synchronous driver of the repair step;
//   - docloop.go: the Loop under a document strategy (parallel,
//     sequential, agent): a repair.Machine's calls at once, at most
//     [DocCallsMax] of a job, fed one at a time;
//   - writer.go: the batched ledger writer; reader.go: the batched reads of
//     jobs' states; ledger.go: retries while the ledger is down;
//   - journal.go and spill.go: the replies and results kept on local disk
//     until the ledger has them (a kill -9, a stop with the ledger down);
//   - disposition.go: decide and dispose; dead.go: the jobs the server gave
//     up on; heartbeat.go: progress reports while a job runs;
//   - wavedriver.go: the worker as the wave driver sees it (wave.Worker);
//   - metrics.go: the Prometheus metrics.
//
// # Lifecycle
//
// A [Worker] pulls from one durable consumer that every worker process
// shares; its MaxAckPending is the global cap on jobs in flight. A message is
// pulled only when a pool slot is free. Worker.handle takes each delivery
// through named steps (run_job.go):
//
//   - decode the envelope ([queue.Envelope]); a message that is not a job is
//     recorded rejected;
//   - readState: what the ledger knows of the job: one it never recorded is
//     handed back unrun (a worker on another ledger); a final one, or a
//     message of an earlier run, is acked without a provider call;
//   - prepareJob: load and compile the schema (cached by hash) and build the
//     job; one that cannot run as sent is rejected;
//   - resumeFrom: a batch-delivery job goes into a wave (package wave), or
//     goes on realtime from the attempts its waves recorded;
//   - spendCap and keyMissing: the batch's cap, which gates each call, and
//     a provider without an API key, which stops the worker;
//   - runLoop: the repair step (package repair) with [Loop]: send the
//     request the step asks for, feed back the reply, repeat; a capped
//     batch's budget is held for each call; a provider outage is waited out
//     (waitOutage) with the message kept and pulling paused, so it spends no
//     delivery; progress is reported to the server every AckWait/3 until
//     the ack;
//   - conclude: hand the job back, reject it, or hand the result to the
//     writer, which commits it with every attempt in a batched transaction
//     and acks after the commit. The job's slot is free as soon as its
//     result is queued; results waiting for a commit are bounded in bytes
//     (WorkerConfig.WriteBuffer), so a slow ledger slows pulling instead of
//     growing memory. A write the ledger fails is written again after a
//     pause, the message kept, until it is taken or the worker stops.
//
// # Dispositions
//
// What becomes of a message is a [queue.Disposition] value: ack after the
// commit, skip, hand back after a delay (never sooner than the provider
// asked), release at once while stopping, reject with a reason, dead,
// foreign, or wave. decide maps every error to one and dispose carries it
// out; nothing else acks, naks or terminates a job message
// (disposition.go). A delivery that ends without a result has its calls
// recorded as interrupted before its message is handed back. Jobs the
// server gives up on while no worker holds them are recorded dead from the
// MAX_DELIVERIES advisories (dead.go).
//
// # Shutdown
//
// Cancelling Run's context stops pulling; jobs in flight get the grace
// period to finish, after which their contexts are cancelled and their
// messages released for immediate redelivery. Pending ledger writes are
// flushed and every goroutine Run started has ended before it returns.
package pipeline
