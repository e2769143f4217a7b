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
	// worker holds a job).
	InterruptHandedBack = "handed_back"
	// InterruptShutdown: the worker stopped and the grace period ran out.
	InterruptShutdown = "shutdown"
	// InterruptSuperseded: another delivery had already finished the job.
	InterruptSuperseded = "superseded"
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
	// Reason is InterruptHandedBack, InterruptShutdown or InterruptSuperseded.
	Reason string
	// Attempts are the calls the delivery made, numbered from 1.
	Attempts []Attempt
}

// SaveInterrupted records interrupted deliveries' calls in one
// transaction. It is idempotent: a (job, delivery, attempt) already
// recorded is left as it is.
func (s *Store) SaveInterrupted(ctx context.Context, ins []Interruption) error {
	n := 0
	for _, in := range ins {
		switch in.Reason {
		case InterruptHandedBack, InterruptShutdown, InterruptSuperseded:
		default:
			return fmt.Errorf("save interrupted attempts of job %s: %w: reason %q", in.JobID, ErrInvalid, in.Reason)
		}
		if in.JobID == "" {
			return fmt.Errorf("save interrupted attempts: %w: empty job id", ErrInvalid)
		}
		n += len(in.Attempts)
	}
	if n == 0 {
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var prompts []string
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
					provider_status, provider_error, model, request_id, started_at, provider_class, price_basis, tokens_cache_write)
				VALUES ($1, $28, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
					$21, $22, $23, $24, $25, $26, $27, $29, $30, $31)
				ON CONFLICT DO NOTHING`,
				in.JobID, in.Delivery, no, in.Reason, nullRaw(pgJSON(a.Request)), txt(a.RequestHash), sys,
				txt(a.Raw), txt(a.Source), nullRaw(pgJSON(a.Repairs)), rawOrEmpty(pgJSON(a.Errors)), txt(a.Class), a.Valid,
				a.RepairedLocally, txt(a.FinishReason), a.LatencyMS, a.TokensIn, a.TokensOut, a.TokensCached, a.CostUSD,
				int32(a.TransportRetries), nullRaw(pgJSON(a.RetryClasses)), int32(a.ProviderStatus), txt(a.ProviderError),
				txt(a.Model), txt(a.RequestID), nullTime(a.StartedAt), int32(max(in.Run, 1)),
				txt(a.ProviderClass), basisOr(a.PriceBasis), a.TokensCacheWrite)
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
