package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Reasons a delivery of a job ended without a final result, as
// interrupted_attempts records them.
const (
	// InterruptHandedBack: the job was handed back to the queue (the
	// provider still failing after its retries, a wait longer than a
	// worker holds a job). With a Hold, the call of a stopped lane's
	// probe: the Hold-th time the held delivery ran (see pipeline's lanes).
	InterruptHandedBack = "handed_back"
	// InterruptShutdown: the worker stopped and the grace period ran out.
	InterruptShutdown = "shutdown"
	// InterruptSuperseded: another delivery had already finished the job.
	InterruptSuperseded = "superseded"
	// InterruptOutage: a call that failed (after its transport retries)
	// while the provider was down; the job waited inside its delivery and
	// went on, so the call is not one of its attempts. Hold says which
	// wait it came before.
	InterruptOutage = "outage"
	// InterruptCancelled: enqueue cancel ended the job's batch while the
	// delivery ran.
	InterruptCancelled = "cancelled"
	// InterruptCrashed: the worker died (kill -9, out of memory) with the
	// reply in memory; its reply journal kept it (see SaveCrashed).
	InterruptCrashed = "crashed"
)

// Interruption is one delivery of a job that ended without a final
// result, and the calls it made: they were paid for (or may have been),
// so they are kept, apart from the attempts of the job's final result.
type Interruption struct {
	// JobID identifies the job; it must have a row.
	JobID string
	// Run is the batch run of the delivery; 0 means 1.
	Run int
	// Delivery is the queue's delivery count of the message.
	Delivery int
	// Reason is one of the Interrupt* reasons.
	Reason string
	// Hold is, for InterruptOutage, which wait of the delivery (from 1)
	// the calls came before; 0 otherwise. A job resumed after a wait
	// numbers its next call as the one that failed, and the hold keeps
	// their rows apart.
	Hold int
	// Attempts are the calls the delivery made, numbered from 1.
	Attempts []Attempt
	// Holds are the holds on the batch's budget of those calls (see
	// Hold), dropped by the transaction that writes them.
	Holds []int64
}

// SaveInterrupted records interrupted deliveries' calls in one
// transaction, charging a capped batch's spend counter with them and
// dropping their Holds. It is idempotent: a (job, run, delivery, hold,
// attempt) already recorded is left as it is.
func (s *Store) SaveInterrupted(ctx context.Context, ins []Interruption) error {
	n := 0
	for _, in := range ins {
		switch in.Reason {
		case InterruptHandedBack, InterruptShutdown, InterruptSuperseded, InterruptOutage, InterruptCancelled, InterruptCrashed:
		default:
			return fmt.Errorf("save interrupted attempts of job %s: %w: reason %q", in.JobID, ErrInvalid, in.Reason)
		}
		if in.JobID == "" {
			return fmt.Errorf("save interrupted attempts: %w: empty job id", ErrInvalid)
		}
		// An outage names its wait; a handed-back call may name the probe
		// of a stopped lane it came from (a held delivery runs again).
		if in.Hold < 0 || (in.Reason == InterruptOutage && in.Hold == 0) ||
			(in.Hold > 0 && in.Reason != InterruptOutage && in.Reason != InterruptHandedBack) {
			return fmt.Errorf("save interrupted attempts of job %s: %w: hold %d with reason %q", in.JobID, ErrInvalid, in.Hold, in.Reason)
		}
		n += len(in.Attempts) + len(in.Holds)
	}
	if n == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var holds []int64
	for i := range ins {
		holds = append(holds, ins[i].Holds...)
	}
	var prompts []string
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := dropHolds(ctx, tx, holds); err != nil {
				return err
			}
			var err error
			prompts, err = s.insertInterrupted(ctx, tx, ins)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("save interrupted attempts: %w", err)
	}
	s.prompts.add(prompts)
	return nil
}

// SaveCrashed records, as InterruptCrashed, the calls of deliveries a
// worker died in that the ledger does not have yet: a call is known by its
// job, run, attempt number and start, as an attempt row or an interrupted
// one (the delivery may have committed its result, or handed the job back,
// before the worker died). It returns how many calls it recorded; run
// again, it records none.
func (s *Store) SaveCrashed(ctx context.Context, ins []Interruption) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var recorded int
	var prompts []string
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			recorded, prompts = 0, nil
			var left []Interruption
			for _, in := range ins {
				if in.JobID == "" {
					return fmt.Errorf("%w: empty job id", ErrInvalid)
				}
				kept := in
				kept.Reason, kept.Hold, kept.Attempts = InterruptCrashed, 0, nil
				for _, a := range in.Attempts {
					var known bool
					err := tx.QueryRow(ctx, `
						SELECT EXISTS (SELECT 1 FROM attempts WHERE job_id = $1 AND run = $2 AND attempt_no = $3 AND started_at = $4)
						    OR EXISTS (SELECT 1 FROM interrupted_attempts WHERE job_id = $1 AND run = $2 AND attempt_no = $3 AND started_at = $4)`,
						in.JobID, int32(max(in.Run, 1)), int32(a.No), nullTime(a.StartedAt)).Scan(&known)
					if err != nil {
						return err
					}
					if !known {
						kept.Attempts = append(kept.Attempts, a)
					}
				}
				if len(kept.Attempts) > 0 {
					left = append(left, kept)
					recorded += len(kept.Attempts)
				}
			}
			var err error
			prompts, err = s.insertInterrupted(ctx, tx, left)
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("save the calls of a crashed worker: %w", err)
	}
	s.prompts.add(prompts)
	return recorded, nil
}

// insertInterrupted writes the interruptions' attempts and the system
// prompts they refer to, and returns those prompts' hashes.
func (s *Store) insertInterrupted(ctx context.Context, tx pgx.Tx, ins []Interruption) ([]string, error) {
	var shas, texts []string
	seen := map[string]bool{}
	b := &pgx.Batch{}
	for _, in := range ins {
		for i := range in.Attempts {
			a := &in.Attempts[i]
			no := a.No
			if no == 0 {
				no = i + 1
			}
			var sys *string
			if p := a.System; p != nil {
				sys = &p.sha
				if !seen[p.sha] && !s.prompts.has(p.sha) {
					seen[p.sha] = true
					shas, texts = append(shas, p.sha), append(texts, txt(p.text))
				}
			}
			b.Queue(`
				INSERT INTO interrupted_attempts (job_id, run, delivery, attempt_no, reason, request, request_hash, system_sha256,
					raw, source, repairs, errors, class, valid, repaired_locally, finish_reason, latency_ms,
					tokens_in, tokens_out, tokens_cached, cost_usd, transport_retries, retry_classes,
					provider_status, provider_error, model, request_id, started_at, provider_class, price_basis, tokens_cache_write, hold,
					provider_code, evidence, warnings, step, chunk_n, chunk_start, chunk_end, fields, tool_calls, conflicts)
				VALUES ($1, $28, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
					$21, $22, $23, $24, $25, $26, $27, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42)
				ON CONFLICT DO NOTHING`, append([]any{
				in.JobID, in.Delivery, no, in.Reason, nullRaw(pgJSON(a.Request)), txt(a.RequestHash), sys,
				txt(a.Raw), txt(a.Source), nullRaw(pgJSON(a.Repairs)), rawOrEmpty(pgJSON(a.Errors)), txt(a.Class), a.Valid,
				a.RepairedLocally, txt(a.FinishReason), a.LatencyMS, a.TokensIn, a.TokensOut, a.TokensCached, a.CostUSD,
				int32(a.TransportRetries), nullRaw(pgJSON(a.RetryClasses)), int32(a.ProviderStatus), txt(a.ProviderError),
				txt(a.Model), txt(a.RequestID), nullTime(a.StartedAt), int32(max(in.Run, 1)),
				txt(a.ProviderClass), basisOr(a.PriceBasis), a.TokensCacheWrite, int32(in.Hold), txt(a.ProviderCode),
				nullRaw(pgJSON(a.Evidence)), nullRaw(pgJSON(a.Warnings))}, a.stepValues()...)...)
		}
	}
	if err := putPrompts(ctx, tx, shas, texts); err != nil {
		return nil, fmt.Errorf("save system prompts: %w", err)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return shas, nil
}

// InterruptedCalls summarises the calls of one job kept apart from its
// results: those of one run, delivery, wait and reason.
type InterruptedCalls struct {
	Run, Delivery, Hold int
	Reason              string
	// Calls counts the calls; Paid those with tokens or a cost.
	Calls, Paid int
	CostUSD     float64
	// LastError is the provider's error of the last call, if it had one.
	LastError string
}

// JobInterrupted returns the job's interrupted calls, grouped, in the
// order their first calls were made within each run and delivery.
func (s *Store) JobInterrupted(ctx context.Context, id string) ([]InterruptedCalls, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT run, delivery, hold, reason, count(*)::int,
		       (count(*) FILTER (WHERE tokens_in + tokens_out + tokens_cached + tokens_cache_write > 0 OR cost_usd > 0))::int,
		       coalesce(sum(cost_usd), 0)::float8,
		       (array_agg(provider_error ORDER BY attempt_no DESC))[1]
		FROM interrupted_attempts WHERE job_id = $1
		GROUP BY run, delivery, hold, reason
		ORDER BY run, delivery, min(started_at) NULLS LAST, hold`, id)
	if err != nil {
		return nil, fmt.Errorf("read interrupted calls of job %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InterruptedCalls, error) {
		var c InterruptedCalls
		err := r.Scan(&c.Run, &c.Delivery, &c.Hold, &c.Reason, &c.Calls, &c.Paid, &c.CostUSD, &c.LastError)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read interrupted calls of job %s: %w", id, err)
	}
	return out, nil
}
