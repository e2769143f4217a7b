// Package pipeline is the queue side of fixpoint: the job message, the
// JetStream queue, the worker pool that runs each job through the repair
// step, and the one place where each message's fate is decided.
//
// # Messages
//
// A job message is an [Envelope]: a small, versioned JSON document with the
// job id (its Nats-Msg-Id is [MsgID] of it, so the stream drops a job
// published twice inside its duplicates window), the batch and run, the
// rendered prompt, the schema's content hash (schemas are stored once in
// Postgres), provider, model, mode and the job's [Limits]. It does not carry
// the input row: the ledger has it. Base URLs and API keys come from the
// worker's own configuration, never from a message. Package enqueue makes
// the messages; this package reads them.
//
// # Lifecycle
//
// A [Worker] pulls from one durable consumer that every worker process
// shares; its MaxAckPending is the global cap on jobs in flight. A message is
// pulled only when a pool slot is free. For each job (run_job.go):
//
//   - decode the envelope; a message that is not a job is recorded rejected;
//   - read what the ledger knows of the job: one it never recorded is handed
//     back unrun (a worker on another ledger); a final one, or a message of
//     an earlier run, is acked without a provider call;
//   - load and compile the schema (cached by hash);
//   - run the repair step (package repair) with its synchronous driver,
//     [Loop]: send the request the step asks for, feed back the reply,
//     repeat; a capped batch's budget is held for each call; progress is
//     reported to the server every AckWait/3 until the ack;
//   - write the result and every attempt in a batched transaction, and ack
//     only after that transaction commits. The job's slot is free as soon
//     as its result is queued; results waiting for a commit are bounded in
//     bytes (WorkerConfig.WriteBuffer), so a slow ledger slows pulling
//     instead of growing memory.
//
// # Batch delivery
//
// A job of a batch enqueued with delivery "batch" is the repair step's
// second driver's (waves.go): its first request goes into a wave, a
// provider batch of its batch and model (OpenAI Batch API, Anthropic
// Message Batches), and its message is acked once the wave and the job's
// place in it are committed: the ledger owns it from then on. One worker at
// a time drives each wave under a lease in Postgres: upload and create,
// poll, then every result through the step, recorded as an attempt once;
// jobs that need another attempt go into the next wave, or back to the
// queue (Envelope.FromWave) to finish realtime from the attempts the ledger
// holds, near the deadline or when few remain. A crash at any point leaves
// the ledger able to go on: see the package comment of waves.go.
//
// # Dispositions
//
// What becomes of a message is a [Disposition] value: ack after the commit,
// skip, hand back after a delay (never sooner than the provider asked),
// release at once while stopping, reject with a reason, dead, or foreign.
// decide maps every error to one and dispose carries it out; nothing else
// acks, naks or terminates a job message (disposition.go). A delivery that
// ends without a result has its calls recorded as interrupted before its
// message is handed back. Jobs the server gives up on while no worker holds
// them are recorded dead from the MAX_DELIVERIES advisories (dead.go).
//
// # Shutdown
//
// Cancelling Run's context stops pulling; jobs in flight get the grace
// period to finish, after which their contexts are cancelled and their
// messages released for immediate redelivery. Pending ledger writes are
// flushed and every goroutine Run started has ended before it returns.
package pipeline
