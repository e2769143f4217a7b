package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RepairFigures are what a batch's local repairs and re-asks cost and saved,
// over the attempts of its jobs' current runs.
type RepairFigures struct {
	// Calls counts the attempts (provider calls, realtime or in a wave).
	Calls int64
	// CallsSaved counts the attempts made valid by schema-guided repairs:
	// each would otherwise have needed another call.
	CallsSaved int64
	// TextSaved counts the attempts made valid by text repairs alone
	// (trailing commas, quotes, comments...): another call saved each.
	TextSaved int64
	// Coercions counts the schema-guided repairs by kind, most frequent
	// first (Kinds keeps that order).
	Coercions map[string]int64
	Kinds     []string
	// RepairedJobs counts the jobs that needed more than one attempt, and
	// RepairTokensOut the output tokens of their attempts after the first:
	// what the re-asks cost.
	RepairedJobs, RepairTokensOut int64
	// Patches counts replies to patch requests by outcome (applied,
	// parse_error, apply_error, out_of_scope).
	Patches map[string]int64
}

// Repairs returns the batch's repair figures.
func (s *Store) Repairs(ctx context.Context, batch string) (RepairFigures, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	f := RepairFigures{Coercions: map[string]int64{}, Patches: map[string]int64{}}
	// batch_rollup_current and batch_rollup_current_kinds (migration 010)
	// keep these counts over the attempts of the jobs' current runs.
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(realtime_attempts + batch_attempts), 0)::int8, coalesce(sum(calls_saved), 0)::int8,
		       coalesce(sum(text_saved), 0)::int8, coalesce(sum(retried_jobs), 0)::int8,
		       coalesce(sum(retry_tokens_out), 0)::int8
		FROM batch_rollup_current WHERE batch = $1`, batch).Scan(&f.Calls, &f.CallsSaved, &f.TextSaved,
		&f.RepairedJobs, &f.RepairTokensOut)
	if err != nil {
		return f, fmt.Errorf("repair figures of %s: %w", batch, err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT kind, name, n FROM batch_rollup_current_kinds
		WHERE batch = $1 AND n > 0 ORDER BY kind, n DESC, name`, batch)
	if err != nil {
		return f, fmt.Errorf("coercions and patches of %s: %w", batch, err)
	}
	var kind, name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&kind, &name, &n}, func() error {
		if kind == "patch" {
			f.Patches[name] = n
			return nil
		}
		f.Coercions[name] = n
		f.Kinds = append(f.Kinds, name)
		return nil
	}); err != nil {
		return f, fmt.Errorf("coercions and patches of %s: %w", batch, err)
	}
	return f, nil
}
