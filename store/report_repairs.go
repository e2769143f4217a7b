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
	err := s.pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE a.valid AND a.coerced > 0),
		       count(*) FILTER (WHERE a.valid AND a.repaired_locally AND a.coerced = 0)
		FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run WHERE j.batch = $1`, batch).Scan(&f.Calls, &f.CallsSaved, &f.TextSaved)
	if err != nil {
		return f, fmt.Errorf("repair figures of %s: %w", batch, err)
	}
	err = s.pool.QueryRow(ctx, `
		SELECT count(DISTINCT a.job_id), coalesce(sum(a.tokens_out), 0)::bigint
		FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
		WHERE j.batch = $1 AND a.attempt_no > 1`, batch).Scan(&f.RepairedJobs, &f.RepairTokensOut)
	if err != nil {
		return f, fmt.Errorf("repair figures of %s: %w", batch, err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT r->>'kind', count(*)
		FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run,
		     jsonb_array_elements(CASE WHEN jsonb_typeof(a.repairs) = 'array' THEN a.repairs ELSE '[]'::jsonb END) r
		WHERE j.batch = $1 AND jsonb_typeof(r) = 'object' AND r ? 'pointer'
		GROUP BY 1 ORDER BY 2 DESC, 1`, batch)
	if err != nil {
		return f, fmt.Errorf("coercions of %s: %w", batch, err)
	}
	var kind string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&kind, &n}, func() error {
		f.Coercions[kind] = n
		f.Kinds = append(f.Kinds, kind)
		return nil
	}); err != nil {
		return f, fmt.Errorf("coercions of %s: %w", batch, err)
	}
	rows, err = s.pool.Query(ctx, `
		SELECT a.patch_outcome, count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
		WHERE j.batch = $1 AND a.patch_outcome <> '' GROUP BY 1`, batch)
	if err != nil {
		return f, fmt.Errorf("patch outcomes of %s: %w", batch, err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&kind, &n}, func() error { f.Patches[kind] = n; return nil }); err != nil {
		return f, fmt.Errorf("patch outcomes of %s: %w", batch, err)
	}
	return f, nil
}
