// Package store is the ledger: it owns every SQL statement of fixpoint and is
// the only package that imports pgx.
//
// # Tables
//
// A [Store] wraps a *pgxpool.Pool. It records batches, schemas (keyed by the
// sha256 of their canonical JSON, see [Canonical]), jobs (one row per job
// from the moment it is enqueued, status 'queued' until a final status:
// valid, invalid, failed, rejected or dead) and attempts (one row per
// provider call: request, raw reply, repairs, errors as a JSONB array of
// {path, keyword, class, message}, class, tokens, latency, retries). The
// system prompt an attempt was sent is kept once per distinct text in
// system_prompts ([Prompt]); the attempt keeps the messages after it, and the
// view attempt_requests joins the two back into the request as sent. The
// model_prices table holds the prices the workers charge, each worker
// writing its table at start ([Store.PutModelPrices], [Store.Prices]).
//
// # Writes are idempotent
//
// JetStream delivers at least once, so every write may be repeated:
//   - [Store.InsertJobs] and [Store.PutSchema] do nothing for rows that exist
//     (InsertJobs copies into a temporary table, then INSERT ... ON CONFLICT
//     DO NOTHING); [Store.InsertJobsPublishing] copies a chunk of new jobs
//     in already marked published, its ids kept in enqueue_publishing until
//     [Store.SettlePublishing] marks unpublished those the queue did not
//     take, or [Store.ReclaimPublishing] those of a run that died first;
//   - [Store.SaveResults] writes a whole slice of results in one transaction:
//     one unnest()-based statement locks the still-queued jobs in id order
//     and sets their final state, inserts the system prompts this Store has
//     not committed before (ON CONFLICT DO NOTHING), then COPY streams the
//     attempt rows of the results that won (the bulk of the bytes, never held
//     encoded in full).
//     The first final result of a job wins; later ones change nothing and
//     report won=false;
//   - [Store.Reject] records a rejected or dead job, inserting its row if
//     needed, and never overwrites a final row.
//
// Transient database errors (connection loss, admin shutdown, serialization
// failure, deadlock) are retried inside SaveResults and Reject with a bounded
// backoff; [IsTransient] classifies what is left, so the caller can
// NakWithDelay while Postgres is down instead of terminating the message.
//
// # Views
//
// The migrations create views for the questions users ask; report runs them
// through [Store.Summary], [Store.FailureClasses],
// [Store.RepairEffectiveness] and [Store.TopErrorPaths], and they are meant
// for psql too:
//
//	-- valid rate, repair rate, tokens and cost per valid job, p50/p95 wall time
//	SELECT batch, jobs, valid_rate, first_attempt_valid_rate, repair_rate,
//	       mean_attempts, tokens_per_valid_job, cost_per_valid_job, p95_wall_ms
//	FROM batch_summary WHERE batch = 'demo';
//
//	-- how attempts fail, by model and attempt number
//	SELECT model, attempt_no, class, attempts, round(share::numeric, 3)
//	FROM failure_classes WHERE batch = 'demo' ORDER BY attempt_no, attempts DESC;
//
//	-- does feedback work? of the jobs failing attempt n, how many pass n+1
//	SELECT attempt_no, class, failed, valid_next, repair_rate
//	FROM repair_effectiveness WHERE batch = 'demo' ORDER BY attempt_no, class;
//
//	-- which schema locations the model gets wrong
//	SELECT path, keyword, errors, jobs FROM error_paths
//	WHERE batch = 'demo' ORDER BY errors DESC LIMIT 10;
//
// # Migrations
//
// [Migrate] applies the embedded migrations (package migrations) with
// github.com/jackc/tern/v2. Tern fits pgx natively (it runs on a *pgx.Conn,
// no database/sql bridge), loads from an fs.FS, runs each migration in a
// transaction and holds a pg_advisory_lock for the whole run, so several
// workers starting at once apply each migration exactly once. Its one-file
// format keeps each migration's down part next to its up part. The first
// migration is the baseline of v0.1.0; a ledger made by an earlier,
// unreleased build (its version in the table fixpoint_schema_version) is
// refused with [ErrUnreleasedLedger], never migrated.
//
// # Testing
//
// Package storetest gives other packages' integration tests a fresh migrated
// database per test (cloned from a template) against the real Postgres.
package store
