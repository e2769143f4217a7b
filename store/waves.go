package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wave statuses (waves.status).
const (
	WaveRecorded   = "recorded"   // its requests are in the ledger, nothing sent
	WaveUploaded   = "uploaded"   // OpenAI's input file is uploaded
	WaveSubmitted  = "submitted"  // the provider batch exists
	WaveEnded      = "ended"      // the provider says it is over; results being recorded
	WaveDone       = "done"       // every result recorded
	WaveFailed     = "failed"     // not submitted, or failed by the provider; its jobs taken back
	WaveCancelling = "cancelling" // enqueue cancel asked for it
)

// ErrLeaseLost is returned when a wave's lease passed to another worker.
var ErrLeaseLost = errors.New("wave lease held by another worker")

// WaveRequest is one request of a wave: a job's next attempt.
type WaveRequest struct {
	// CustomID names the request in the provider batch; RecordWave sets it.
	CustomID string
	JobID    string
	Run      int
	// AttemptNo is the attempt the request is.
	AttemptNo int
	// Request is the request as JSON (a fixpoint.Request).
	Request json.RawMessage
	// Envelope is the job message the request is of (a queue.Envelope):
	// the reply is checked against it.
	Envelope json.RawMessage
	// Recorded reports that its outcome is recorded as an attempt.
	Recorded bool
	// Delivered is how many times the queue had delivered the job's
	// message when it was collected (RecordWave notes it on the job, whose
	// deliveries read 0 for every job a wave finished); not kept.
	Delivered int
}

// Wave is one provider batch of a batch's requests.
type Wave struct {
	ID              int64
	Batch           string
	Run             int
	Number          int
	Provider, Model string
	// Deadline is the batch's deadline (zero: none).
	Deadline        time.Time
	Status          string
	InputFileID     string
	ProviderBatchID string
	Requests        int
	// Succeeded, Errored, Expired and Cancelled count the results.
	Succeeded, Errored, Expired, Cancelled int
	Error                                  string
	CreatedAt, SubmittedAt, EndedAt        time.Time
	LeaseOwner                             string
	Polls                                  int
	// Home is where the wave can be driven (WaveParams.Home).
	Home string
	// MissingSince is when its provider batch first answered 404 of the
	// 404s since it last answered (zero: it is known).
	MissingSince time.Time
	// NextPollAt is when a worker of its home is next to drive it, and
	// LeaseUntil when the lease of the one driving it ends (zero: none).
	NextPollAt, LeaseUntil time.Time
}

// WaveParams describes a wave to record.
type WaveParams struct {
	Batch           string
	Run             int
	Provider, Model string
	Deadline        time.Time
	Requests        []WaveRequest
	// From is the wave the jobs go on from (a repair wave): a job placed in
	// it may be placed in the new one. 0 for a first wave.
	From int64
	// Owner takes the wave's lease for Lease: the recording worker submits it.
	Owner string
	Lease time.Duration
	// Home names where the wave can be driven: the queue its realtime
	// remainder goes to and the provider endpoint it is submitted to.
	// ClaimWave gives it only to a worker with that home; "" to any.
	Home string
}

// RecordWave records a wave and its requests in one transaction, before
// anything is sent, and gives each job its place in it (jobs.wave_id): from
// then on the ledger owns those jobs. A job may have several requests (a
// document job's chunk calls), each its own attempt: they are taken
// together or not at all. A request whose job is not queued in that run,
// or already has a place in a wave, is left out; the wave's requests are
// those returned (none: no wave is recorded, nil is returned).
// Custom ids are w<wave>-<n>, within every provider's rules.
func (s *Store) RecordWave(ctx context.Context, p WaveParams) (*Wave, []WaveRequest, error) {
	if p.Batch == "" || p.Provider == "" || p.Model == "" || len(p.Requests) == 0 {
		return nil, nil, fmt.Errorf("record wave: %w: batch, provider, model and requests are required", ErrInvalid)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var w *Wave
	var taken []WaveRequest
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, taken = nil, nil
		ids := make([]string, len(p.Requests))
		for i, r := range p.Requests {
			ids[i] = r.JobID
		}
		// Lock the jobs; keep those still queued in their run, with no wave.
		rows, err := tx.Query(ctx, `
			SELECT id, run FROM jobs WHERE id = ANY($1) AND status = 'queued' AND (wave_id IS NULL OR wave_id = $2)
			ORDER BY id FOR UPDATE`, ids, p.From)
		if err != nil {
			return err
		}
		free := map[string]int{}
		var id string
		var run int
		if _, err := pgx.ForEachRow(rows, []any{&id, &run}, func() error { free[id] = run; return nil }); err != nil {
			return err
		}
		// An attempt has one place ever: a job released from a failed wave
		// runs realtime, and a stale delivery of its first message must
		// not place it again (the index would fail the whole wave).
		rows, err = tx.Query(ctx, `SELECT job_id, run, attempt_no FROM wave_requests WHERE job_id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		type place struct {
			job          string
			run, attempt int
		}
		placed := map[place]bool{}
		var attempt int
		if _, err := pgx.ForEachRow(rows, []any{&id, &run, &attempt}, func() error {
			placed[place{id, run, attempt}] = true
			return nil
		}); err != nil {
			return err
		}
		// A job's requests are all taken or none: a document job sends
		// several at once (its chunks), each its own attempt; a job
		// collected twice (a stale delivery) is taken once.
		byJob := map[string][]WaveRequest{}
		var order []string
		for _, r := range p.Requests {
			if _, ok := byJob[r.JobID]; !ok {
				order = append(order, r.JobID)
			}
			byJob[r.JobID] = append(byJob[r.JobID], r)
		}
		for _, id := range order {
			if run, ok := free[id]; ok {
				taken = append(taken, takeJob(byJob[id], run, func(r WaveRequest) bool {
					return placed[place{r.JobID, max(r.Run, 1), r.AttemptNo}]
				})...)
			}
		}
		if len(taken) == 0 {
			return nil
		}
		w = &Wave{Batch: p.Batch, Run: max(p.Run, 1), Provider: p.Provider, Model: p.Model, Deadline: p.Deadline,
			Status: WaveRecorded, Requests: len(taken), LeaseOwner: p.Owner, Home: p.Home}
		// Waves of one batch recorded at once (two collections, two
		// workers) take their numbers in turn: without the lock both read
		// the same max and one fails on the unique number.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('fixpoint wave number'), hashtext($1))`, p.Batch); err != nil {
			return fmt.Errorf("lock the batch's wave numbers: %w", err)
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO waves (batch, run, number, provider, model, deadline, requests, lease_owner, lease_until, next_poll_at, home)
			VALUES ($1, $2, (SELECT coalesce(max(number), 0) + 1 FROM waves WHERE batch = $1), $3, $4, $5, $6,
			        nullif($7, ''), now() + make_interval(secs => $8::float8), now() + make_interval(secs => $8::float8), $9)
			RETURNING id, number, created_at`,
			p.Batch, w.Run, p.Provider, p.Model, nullTime(p.Deadline), w.Requests, p.Owner, p.Lease.Seconds(), p.Home).Scan(&w.ID, &w.Number, &w.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert wave: %w", err)
		}
		b := &pgx.Batch{}
		for i := range taken {
			r := &taken[i]
			r.CustomID = fmt.Sprintf("w%d-%d", w.ID, i)
			b.Queue(`INSERT INTO wave_requests (wave_id, custom_id, job_id, run, attempt_no, request, envelope) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				w.ID, r.CustomID, r.JobID, max(r.Run, 1), r.AttemptNo, string(r.Request), string(r.Envelope))
			b.Queue(`UPDATE jobs SET wave_id = $1, deliveries = greatest(deliveries, $3) WHERE id = $2`, w.ID, r.JobID, r.Delivered)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("record wave of %s: %w", p.Batch, err)
	}
	return w, taken, nil
}

// takeJob is the requests of one job that go into a wave: those of its
// run now (run), each attempt once; none when one of them has a place
// already (placed), as a job's requests go together.
func takeJob(reqs []WaveRequest, run int, placed func(WaveRequest) bool) []WaveRequest {
	var out []WaveRequest
	seen := map[int]bool{}
	for _, r := range reqs {
		if max(r.Run, 1) != run || seen[r.AttemptNo] {
			continue
		}
		if placed(r) {
			return nil
		}
		seen[r.AttemptNo] = true
		out = append(out, r)
	}
	return out
}

// WaveRequests returns the wave's requests in custom id order.
func (s *Store) WaveRequests(ctx context.Context, waveID int64) ([]WaveRequest, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT custom_id, job_id, run, attempt_no, request::text, envelope::text, recorded FROM wave_requests
		WHERE wave_id = $1 ORDER BY length(custom_id), custom_id`, waveID)
	if err != nil {
		return nil, fmt.Errorf("read requests of wave %d: %w", waveID, err)
	}
	out, err := pgx.CollectRows(rows, scanWaveRequest)
	if err != nil {
		return nil, fmt.Errorf("read requests of wave %d: %w", waveID, err)
	}
	return out, nil
}

// scanWaveRequest reads custom_id, job_id, run, attempt_no, request,
// envelope and recorded of a wave request.
func scanWaveRequest(r pgx.CollectableRow) (WaveRequest, error) {
	var w WaveRequest
	var req, env string
	err := r.Scan(&w.CustomID, &w.JobID, &w.Run, &w.AttemptNo, &req, &env, &w.Recorded)
	w.Request, w.Envelope = json.RawMessage(req), json.RawMessage(env)
	return w, err
}

const waveColumns = `id, batch, run, number, provider, model, deadline, status, coalesce(input_file_id, ''), coalesce(provider_batch_id, ''),
	requests, succeeded, errored, expired, cancelled, error, created_at, submitted_at, ended_at, coalesce(lease_owner, ''), polls, home, missing_since, next_poll_at, lease_until`

func scanWave(r pgx.Row) (*Wave, error) {
	var w Wave
	var submitted, ended, deadline, missing, next, lease *time.Time
	err := r.Scan(&w.ID, &w.Batch, &w.Run, &w.Number, &w.Provider, &w.Model, &deadline, &w.Status, &w.InputFileID, &w.ProviderBatchID,
		&w.Requests, &w.Succeeded, &w.Errored, &w.Expired, &w.Cancelled, &w.Error, &w.CreatedAt, &submitted, &ended, &w.LeaseOwner, &w.Polls, &w.Home, &missing, &next, &lease)
	if err != nil {
		return nil, err
	}
	w.SubmittedAt, w.EndedAt, w.Deadline, w.MissingSince, w.NextPollAt, w.LeaseUntil = deref(submitted), deref(ended), deref(deadline), deref(missing), deref(next), deref(lease)
	return &w, nil
}

// ClaimWave takes the lease of one open wave that is due (its lease free
// or expired, its next poll due) and has one of homes (or none, "") for
// owner, and returns it; nil when none is due. A wave its recorder holds is not due until the lease expires:
// even the same owner does not claim it twice. A worker that died holding a lease loses the wave when the lease
// expires.
func (s *Store) ClaimWave(ctx context.Context, owner string, lease time.Duration, homes []string) (*Wave, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	w, err := scanWave(s.pool.QueryRow(ctx, `
		UPDATE waves SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::float8), polls = polls + 1
		WHERE id = (
			SELECT id FROM waves
			WHERE status NOT IN ('done', 'failed') AND (lease_until IS NULL OR lease_until < now())
			  AND (next_poll_at IS NULL OR next_poll_at <= now()) AND (home = '' OR home = ANY($3))
			ORDER BY next_poll_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+waveColumns, owner, lease.Seconds(), homes))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim a wave: %w", err)
	}
	return w, nil
}

// StrayWaves counts the open waves none of homes may drive (their home is
// another queue or provider endpoint), by batch and home.
func (s *Store) StrayWaves(ctx context.Context, homes []string) (map[[2]string]int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT batch, home, count(*)::int FROM waves
		WHERE status NOT IN ('done', 'failed') AND home <> '' AND NOT (home = ANY($1))
		GROUP BY batch, home`, homes)
	if err != nil {
		return nil, fmt.Errorf("count stray waves: %w", err)
	}
	out := map[[2]string]int{}
	var batch, home string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&batch, &home, &n}, func() error { out[[2]string{batch, home}] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count stray waves: %w", err)
	}
	return out, nil
}

// WaveUpdate moves a wave on; zero fields are left as they are.
type WaveUpdate struct {
	Status          string
	InputFileID     string
	ProviderBatchID string
	// Counts, when set, replaces the wave's result counts.
	Counts *[4]int // succeeded, errored, expired, cancelled
	Error  string
	// NextPoll releases the lease and sets when the wave is next due; 0
	// keeps the lease.
	NextPoll time.Duration
	// Lease, with NextPoll 0, renews the lease for that long from now.
	Lease time.Duration
	// Missing, when 1, records that the provider does not know the
	// wave's batch now (MissingSince is set, if it was not); when -1,
	// that it knows it (MissingSince is cleared).
	Missing int
}

// UpdateWave applies u to the wave while owner holds its lease
// (ErrLeaseLost otherwise: another worker took it over).
func (s *Store) UpdateWave(ctx context.Context, id int64, owner string, u WaveUpdate) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var counts []int32
	if u.Counts != nil {
		counts = []int32{int32(u.Counts[0]), int32(u.Counts[1]), int32(u.Counts[2]), int32(u.Counts[3])}
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE waves SET
			-- A wave cancelled (enqueue cancel) while its owner uploaded or
			-- submitted it stays cancelling, due at once: its provider
			-- batch, if one was made, is cancelled at the next drive.
			status = CASE WHEN status = 'cancelling' AND $3 IN ('uploaded', 'submitted') THEN status
			              ELSE coalesce(nullif($3, ''), status) END,
			input_file_id = coalesce(nullif($4, ''), input_file_id),
			provider_batch_id = coalesce(nullif($5, ''), provider_batch_id),
			submitted_at = CASE WHEN $3 = 'submitted' AND submitted_at IS NULL THEN now() ELSE submitted_at END,
			ended_at = CASE WHEN $3 IN ('ended', 'failed') AND ended_at IS NULL THEN now() ELSE ended_at END,
			done_at = CASE WHEN $3 IN ('done', 'failed') THEN now() ELSE done_at END,
			succeeded = coalesce(($6::int[])[1], succeeded), errored = coalesce(($6::int[])[2], errored),
			expired = coalesce(($6::int[])[3], expired), cancelled = coalesce(($6::int[])[4], cancelled),
			error = CASE WHEN $7 = '' THEN error ELSE $7 END,
			lease_owner = CASE WHEN $8::float8 > 0 THEN NULL ELSE lease_owner END,
			lease_until = CASE WHEN $8::float8 > 0 THEN NULL
			                   WHEN $9::float8 > 0 THEN now() + make_interval(secs => $9::float8) ELSE lease_until END,
			next_poll_at = CASE WHEN $8::float8 > 0 AND status = 'cancelling' AND $3 IN ('uploaded', 'submitted') THEN now()
			                    WHEN $8::float8 > 0 THEN now() + make_interval(secs => $8::float8) ELSE next_poll_at END,
			missing_since = CASE WHEN $10::int = 1 THEN coalesce(missing_since, now()) WHEN $10::int = -1 THEN NULL ELSE missing_since END
		WHERE id = $1 AND lease_owner = $2`,
		id, owner, u.Status, u.InputFileID, u.ProviderBatchID, counts, txt(u.Error), u.NextPoll.Seconds(), u.Lease.Seconds(), u.Missing)
	if err != nil {
		return fmt.Errorf("update wave %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("update wave %d: %w", id, ErrLeaseLost)
	}
	return nil
}

// WaveOutcome is the recorded outcome of one wave request.
type WaveOutcome struct {
	WaveID   int64
	CustomID string
	// Attempt is the attempt the reply (or failure) made.
	Attempt Attempt
	// Result, when set, is the job's final result (its Attempts, Calls and
	// totals cover the run so far): the job row is set final.
	Result *Result
	// Totals, when Result is nil, are the job's running totals of the run
	// (tokens, cost, attempts, calls) so the summary shows a batch's spend
	// while it runs; only the numeric fields are read.
	Totals *Result
	// Also are attempts that made no call, recorded with Attempt (after
	// it, in the same transaction, with no wave: they are no request of
	// it): a document job's merge, made when its last chunk's reply came.
	Also []Attempt
	// Set by RecordWaveOutcomes: Inserted when it wrote Attempt (as an
	// attempt row, or kept apart from a job cancelled or requeued),
	// Finished when it made the job final with Result.
	Inserted, Finished bool
}

// RecordWaveOutcomes records wave requests' outcomes in one transaction:
// each attempt row (once: a results file processed twice records nothing
// twice), the request marked recorded, and a final result applied to its
// job (while it is queued in that run), which ends its place in the wave.
// A job with no final result keeps its place until the driver puts it in
// the next wave (RecordWave with From) or hands it to the queue
// (ReleaseWaveJobs): a crash in between leaves it there, for the next
// holder of the wave's lease to move on (PlacedJobs). It returns how many
// attempts it inserted.
func (s *Store) RecordWaveOutcomes(ctx context.Context, outs []WaveOutcome) (int, error) {
	if len(outs) == 0 {
		return 0, nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	inserted := 0
	err := s.retry(ctx, func(ctx context.Context) error {
		inserted = 0
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for i := range outs {
				n, err := s.recordWaveOutcome(ctx, tx, &outs[i])
				if err != nil {
					return err
				}
				inserted += n
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("record %d wave outcomes: %w", len(outs), err)
	}
	return inserted, nil
}

// recordWaveOutcome records one outcome of RecordWaveOutcomes in tx and
// returns how many attempts it inserted.
func (s *Store) recordWaveOutcome(ctx context.Context, tx pgx.Tx, o *WaveOutcome) (int, error) {
	o.Inserted, o.Finished = false, false
	var jobID string
	var run int
	var recorded bool
	err := tx.QueryRow(ctx, `SELECT job_id, run, recorded FROM wave_requests WHERE wave_id = $1 AND custom_id = $2 FOR UPDATE`,
		o.WaveID, o.CustomID).Scan(&jobID, &run, &recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: wave %d has no request %s", ErrInvalid, o.WaveID, o.CustomID)
	}
	if err != nil {
		return 0, err
	}
	if recorded {
		return 0, nil
	}
	a := o.Attempt
	a.WaveID = o.WaveID
	// A job cancelled, or requeued to a new run, while its
	// wave ran no longer takes the wave's results: its paid
	// replies are kept apart as the cancel's or the requeue's
	// calls, as a realtime delivery's are. They went into its
	// attempts, while its row said 0 attempts and $0.
	var status string
	var nowRun int
	if err := tx.QueryRow(ctx, `SELECT status, run FROM jobs WHERE id = $1 FOR UPDATE`, jobID).Scan(&status, &nowRun); err != nil {
		return 0, fmt.Errorf("read job %s: %w", jobID, err)
	}
	if status != "queued" || nowRun != run {
		reason := InterruptSuperseded
		if status == "cancelled" && nowRun == run {
			reason = InterruptCancelled
		}
		// Delivery 0: a wave is no queue delivery.
		in := []Interruption{{JobID: jobID, Run: run, Reason: reason, Attempts: append([]Attempt{a}, o.Also...)}}
		if _, err := s.insertInterrupted(ctx, tx, in); err != nil {
			return 0, fmt.Errorf("keep wave attempt %d of job %s apart: %w", a.No, jobID, err)
		}
		o.Inserted = true
		if _, err := tx.Exec(ctx, `UPDATE wave_requests SET recorded = true WHERE wave_id = $1 AND custom_id = $2`, o.WaveID, o.CustomID); err != nil {
			return 0, err
		}
		return 0, nil
	}
	inserted := 0
	// The Also attempts keep no wave: they are no call of it.
	for i, row := range append([]Attempt{a}, o.Also...) {
		n, err := insertWaveAttempt(ctx, tx, jobID, run, row)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			o.Inserted = n == 1
		}
		inserted += n
	}
	if _, err := tx.Exec(ctx, `UPDATE wave_requests SET recorded = true WHERE wave_id = $1 AND custom_id = $2`, o.WaveID, o.CustomID); err != nil {
		return 0, err
	}
	if err := applyWaveOutcome(ctx, tx, o, jobID, run); err != nil {
		return 0, err
	}
	return inserted, nil
}

// insertWaveAttempt inserts one attempt row of a wave outcome (once: a
// row that is there already is left as it is) and returns how many it
// inserted.
func insertWaveAttempt(ctx context.Context, tx pgx.Tx, jobID string, run int, a Attempt) (int, error) {
	var sys *string
	if a.System != nil {
		sys = &a.System.sha
		if err := putPrompts(ctx, tx, []string{a.System.sha}, []string{txt(a.System.text)}); err != nil {
			return 0, err
		}
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO attempts (job_id, run, attempt_no, request, request_hash, system_sha256, raw, source, repairs, errors,
			class, valid, repaired_locally, finish_reason, latency_ms, tokens_in, tokens_out, tokens_cached,
			transport_retries, retry_classes, provider_status, provider_error, model, request_id, started_at,
			feedback, provider_class, price_basis, tokens_cache_write, cost_usd, wave_id, coerced, patch_outcome, unpriced,
			provider_code, evidence, warnings, schema_hash, step, chunk_n, chunk_start, chunk_end, fields, tool_calls, conflicts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
			$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38,
			$39, $40, $41, $42, $43, $44, $45)
		ON CONFLICT (job_id, run, attempt_no) DO NOTHING`, append([]any{
		jobID, run, a.No, nullRaw(pgJSON(a.Request)), txt(a.RequestHash), sys, txt(a.Raw), txt(a.Source),
		nullRaw(pgJSON(a.Repairs)), rawOrEmpty(pgJSON(a.Errors)), txt(a.Class), a.Valid, a.RepairedLocally,
		txt(a.FinishReason), a.LatencyMS, a.TokensIn, a.TokensOut, a.TokensCached, int32(a.TransportRetries),
		nullRaw(pgJSON(a.RetryClasses)), int32(a.ProviderStatus), txt(a.ProviderError), txt(a.Model),
		txt(a.RequestID), nullTime(a.StartedAt), txt(a.Feedback), txt(a.ProviderClass), basisOr(a.PriceBasis),
		a.TokensCacheWrite, a.CostUSD, nullID(a.WaveID), int32(a.Coerced), txt(a.PatchOutcome), a.Unpriced, txt(a.ProviderCode),
		nullRaw(pgJSON(a.Evidence)), nullRaw(pgJSON(a.Warnings)), nullText(a.SchemaHash)}, a.stepValues()...)...)
	if err != nil {
		return 0, fmt.Errorf("insert attempt %d of job %s: %w", a.No, jobID, err)
	}
	return int(tag.RowsAffected()), nil
}

// applyWaveOutcome applies an outcome to its job while it is queued in
// that run: its final result, or the totals so far of a job that goes on.
func applyWaveOutcome(ctx context.Context, tx pgx.Tx, o *WaveOutcome, jobID string, run int) error {
	if r := o.Result; r != nil {
		tag, err := tx.Exec(ctx, `
			UPDATE jobs SET status = $3, value = $4::jsonb, error = $5, final_class = $6, attempts = $7, calls = $8,
				first_attempt_valid = $9, repaired_locally = $10, tokens_in = $11, tokens_out = $12, tokens_cached = $13,
				tokens_cache_write = $14, cost_usd = $15, finished_at = now(), wave_id = NULL,
				-- From its first wave: the step's own start is when the results were read.
				started_at = coalesce(started_at, (SELECT created_at FROM waves WHERE id = $18), $16),
				wall_ms = greatest($17, (extract(epoch FROM now() - coalesce(started_at, (SELECT created_at FROM waves WHERE id = $18), $16)) * 1000)::bigint)
			WHERE id = $1 AND run = $2 AND status = 'queued'`,
			jobID, run, txt(string(r.Status)), nullJSON(pgJSON(r.Value)), txt(r.Error), txt(r.FinalClass), r.Attempts, r.Calls,
			r.FirstAttemptValid, r.RepairedLocally, r.TokensIn, r.TokensOut, r.TokensCached, r.TokensCacheWrite,
			r.CostUSD, nullTime(r.StartedAt), r.WallMS, o.WaveID)
		if err != nil {
			return fmt.Errorf("finish job %s: %w", jobID, err)
		}
		o.Finished = tag.RowsAffected() == 1
		return nil
	}
	t := o.Totals
	if t == nil {
		t = &Result{}
	}
	if _, err := tx.Exec(ctx, `
		UPDATE jobs SET attempts = $3, calls = $4, tokens_in = $5, tokens_out = $6,
			tokens_cached = $7, tokens_cache_write = $8, cost_usd = $9,
			started_at = coalesce(started_at, (SELECT created_at FROM waves WHERE id = $11), $10)
		WHERE id = $1 AND run = $2 AND status = 'queued'`,
		jobID, run, t.Attempts, t.Calls, t.TokensIn, t.TokensOut, t.TokensCached, t.TokensCacheWrite, t.CostUSD,
		nullTime(t.StartedAt), o.WaveID); err != nil {
		return err
	}
	return nil
}

// ReleaseWaveJobs ends the place in wave waveID of the jobs ids (those
// still placed there): the queue has them again, or they are final.
func (s *Store) ReleaseWaveJobs(ctx context.Context, waveID int64, ids []string) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE jobs SET wave_id = NULL WHERE wave_id = $1 AND id = ANY($2)`, waveID, ids); err != nil {
		return fmt.Errorf("release %d jobs of wave %d: %w", len(ids), waveID, err)
	}
	return nil
}

// PlacedJobs returns the requests of the wave whose jobs are still placed
// in it and queued: their outcome is recorded (or missing) and they wait
// for their next attempt.
func (s *Store) PlacedJobs(ctx context.Context, waveID int64) ([]WaveRequest, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT r.custom_id, r.job_id, r.run, r.attempt_no, r.request::text, r.envelope::text, r.recorded
		FROM wave_requests r JOIN jobs j ON j.id = r.job_id
		WHERE r.wave_id = $1 AND j.wave_id = $1 AND j.status = 'queued' AND j.run = r.run
		ORDER BY length(r.custom_id), r.custom_id`, waveID)
	if err != nil {
		return nil, fmt.Errorf("read placed jobs of wave %d: %w", waveID, err)
	}
	out, err := pgx.CollectRows(rows, scanWaveRequest)
	if err != nil {
		return nil, fmt.Errorf("read placed jobs of wave %d: %w", waveID, err)
	}
	return out, nil
}

// OpenWaves counts the waves of the providers named that are not yet done
// or failed and that one of homes may drive (their home is one of them, or
// none): a draining worker waits for the waves it can drive, not for those
// of another queue or provider endpoint, which it could wait on for hours.
func (s *Store) OpenWaves(ctx context.Context, providers, homes []string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM waves WHERE status NOT IN ('done', 'failed') AND provider = ANY($1)
		AND (home = '' OR home = ANY($2))`, providers, homes).Scan(&n); err != nil {
		return 0, fmt.Errorf("count open waves: %w", err)
	}
	return n, nil
}

// ledgerAttemptColumns are the attempt columns a driver going on from the
// ledger reads (attempts a), after the job id.
const ledgerAttemptColumns = `a.job_id, a.attempt_no, a.raw, a.source, a.errors::text, a.class, a.valid, a.repaired_locally,
	a.finish_reason, a.latency_ms, a.tokens_in, a.tokens_out, a.tokens_cached, a.tokens_cache_write, a.transport_retries,
	a.provider_status, a.provider_error, a.provider_class, a.model, a.request_id, a.started_at, a.feedback,
	a.price_basis, coalesce(a.cost_usd, 0)::float8, coalesce(a.wave_id, 0), a.request_hash, a.coerced, a.unpriced, a.provider_code,
	` + stepSelect

// ledgerAttempts reads rows of ledgerAttemptColumns into attempts by job
// id, in row order.
func ledgerAttempts(rows pgx.Rows) (map[string][]Attempt, error) {
	out := map[string][]Attempt{}
	var id string
	var a Attempt
	var errs string
	var started *time.Time
	var step stepScan
	_, err := pgx.ForEachRow(rows, append([]any{&id, &a.No, &a.Raw, &a.Source, &errs, &a.Class, &a.Valid, &a.RepairedLocally,
		&a.FinishReason, &a.LatencyMS, &a.TokensIn, &a.TokensOut, &a.TokensCached, &a.TokensCacheWrite, &a.TransportRetries,
		&a.ProviderStatus, &a.ProviderError, &a.ProviderClass, &a.Model, &a.RequestID, &started, &a.Feedback, &a.PriceBasis,
		&a.CostUSD, &a.WaveID, &a.RequestHash, &a.Coerced, &a.Unpriced, &a.ProviderCode}, step.dest()...), func() error {
		a.Errors = json.RawMessage(errs)
		step.set(&a)
		a.StartedAt = deref(started)
		out[id] = append(out[id], a)
		return nil
	})
	return out, err
}

// WaveAttempts returns the attempts, in order, of the runs of the jobs
// that have requests in the wave, by job id, with what the driver needs to
// go on from them (feedback, classes, usage).
func (s *Store) WaveAttempts(ctx context.Context, waveID int64) (map[string][]Attempt, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT `+ledgerAttemptColumns+`
		FROM attempts a
		-- A document job has several requests in a wave: its attempts once.
		WHERE (a.job_id, a.run) IN (SELECT job_id, run FROM wave_requests WHERE wave_id = $1)
		ORDER BY a.job_id, a.attempt_no`, waveID)
	if err != nil {
		return nil, fmt.Errorf("read attempts of wave %d: %w", waveID, err)
	}
	out, err := ledgerAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("read attempts of wave %d: %w", waveID, err)
	}
	return out, nil
}

// JobAttempts returns the attempts of a job's run in order (see
// WaveAttempts).
func (s *Store) JobAttempts(ctx context.Context, jobID string, run int) ([]Attempt, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT `+ledgerAttemptColumns+`
		FROM attempts a WHERE a.job_id = $1 AND a.run = $2 ORDER BY a.attempt_no`, jobID, max(run, 1))
	if err != nil {
		return nil, fmt.Errorf("read attempts of job %s: %w", jobID, err)
	}
	out, err := ledgerAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("read attempts of job %s: %w", jobID, err)
	}
	return out[jobID], nil
}

// Waves returns the waves of a batch in order.
func (s *Store) Waves(ctx context.Context, batch string) ([]Wave, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+waveColumns+` FROM waves WHERE batch = $1 ORDER BY number`, batch)
	if err != nil {
		return nil, fmt.Errorf("read waves of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Wave, error) {
		w, err := scanWave(r)
		if err != nil {
			return Wave{}, err
		}
		return *w, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read waves of %s: %w", batch, err)
	}
	return out, nil
}

// CancelWaves asks for the open waves of a batch to be cancelled at their
// provider (a worker does it) and returns how many.
func (s *Store) CancelWaves(ctx context.Context, batch string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
		UPDATE waves SET status = 'cancelling', next_poll_at = now()
		WHERE batch = $1 AND status IN ('recorded', 'uploaded', 'submitted')`, batch)
	if err != nil {
		return 0, fmt.Errorf("cancel the waves of %s: %w", batch, err)
	}
	return int(tag.RowsAffected()), nil
}

// ProviderBatchRecorded reports whether a wave has recorded the provider
// batch id: one that none has was created and not recorded.
func (s *Store) ProviderBatchRecorded(ctx context.Context, provider, id string) (bool, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM waves WHERE provider = $1 AND provider_batch_id = $2)`, provider, id).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up provider batch %s: %w", id, err)
	}
	return ok, nil
}
