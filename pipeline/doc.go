// Package pipeline turns queued jobs into ledger rows: it owns the job
// message contract, the JetStream consumer, the bounded worker pool, the
// repair loop, and the single place where each message's fate is decided.
//
// # Messages
//
// A job message is an [Envelope]: a small, versioned JSON document with the
// job id (also its Nats-Msg-Id, so the stream drops a job published twice
// inside its duplicates window), the batch, the rendered prompt, the schema's
// content hash (schemas are stored once in Postgres), provider, model, mode
// and the loop's [Limits]. Base URLs and API keys come from the worker's own
// configuration, never from a message.
//
// # Lifecycle
//
// A [Worker] pulls from one durable consumer that every worker process
// shares; its MaxAckPending is the global cap on jobs in flight. A message is
// pulled only when a pool slot is free. For each job:
//
//   - decode the envelope; a bad one is recorded as rejected, then terminated;
//   - if the ledger already holds a final row for the job (a crash after the
//     commit and before the ack), ack it without a provider call;
//   - load and compile the schema (cached by hash);
//   - run the repair [Loop]: generate, extract, validate, and on failure send
//     the model its exact errors, up to the job's attempts; progress is
//     reported to the server every AckWait/3 (one heartbeat loop serves
//     every held message) until the ack;
//   - write the result and every attempt in a batched transaction, and ack
//     only after that transaction commits. The job's slot is free as soon
//     as its result is queued; results waiting for a commit are bounded in
//     bytes (WorkerConfig.WriteBuffer), so a slow ledger slows pulling
//     instead of growing memory.
//
// # Retries and termination
//
// Transport retries of provider calls happen inside package llm and are
// counted on each attempt, never as repair attempts. Once a job's call still
// fails transiently (provider down, Postgres down), the message is
// negatively acknowledged with a delay that doubles per delivery. On its last
// delivery it is recorded dead with its last error instead. A provider quota
// exhausted pauses pulling and delays the job. Jobs the server gives up on
// while no worker holds them are recorded dead from the MAX_DELIVERIES
// advisories, which a small stream keeps until a worker reads them.
//
// # Shutdown
//
// Cancelling Run's context stops pulling; jobs in flight get the grace
// period to finish, after which their contexts are cancelled and their
// messages negatively acknowledged for immediate redelivery. Pending ledger
// writes are flushed before Run returns.
package pipeline
