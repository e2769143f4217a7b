package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StepCalls is one row of the step_calls view: a batch's calls of one
// step kind (chunk, merge, repair, agent) that ended with one class ("" for
// a valid one), every run's.
type StepCalls struct {
	Step, Class string
	// Attempts counts the calls (a deterministic merge is an attempt with
	// no call: no tokens, no cost); Valid those whose value the step took.
	Attempts, Valid                   int64
	TokensIn, TokensOut, TokensCached int64
	CostUSD                           float64
	// Unpriced counts the attempts the worker had no price for.
	Unpriced int64
	// ToolCalls counts the replies' tool calls (agent turns).
	ToolCalls int64
	// Conflicts counts merge conflicts; Conflicted the merges with one.
	Conflicts, Conflicted int64
	// Graded counts the attempts whose value the evidence stage graded,
	// Leaves their strings and numbers, split by grade.
	Graded, Leaves, Exact, Normalized, Fuzzy, None int64
}

// ChunkFields is one row of the chunk_fields view: a batch's chunk steps
// of one chunk number (0 the first), and the fields their values held.
type ChunkFields struct {
	Chunk int
	// Attempts counts the chunk calls, Valid those the smart validation
	// took, WithValue those with a value; Fields sums the non-null
	// strings, numbers and booleans of those values, Empty counts the
	// values with none.
	Attempts, Valid, WithValue, Fields, Empty int64
}

// MeanFields is Fields / WithValue, 0 when no call had a value.
func (c ChunkFields) MeanFields() float64 { return ratio(c.Fields, c.WithValue) }

// ConflictPath is one row of the merge_conflicts view: where a batch's
// merges found its chunks disagreeing (array indices folded to '*').
type ConflictPath struct {
	Path string
	// Conflicts counts the conflicts there; Merges the merges with one.
	Conflicts, Merges int64
}

// StepReport is what a batch's document jobs did, step by step.
type StepReport struct {
	// Strategies are the strategies the batch's runs were enqueued with
	// (run 1's first, then each requeue's, repeats left out); "" when a
	// run's settings name none (a batch a worker made).
	Strategies []string
	// Steps are the calls by step kind and class, in the order of
	// fixpoint.StepKinds, the valid class first, then by class.
	Steps []StepCalls
	// Chunks are the chunk steps by chunk number.
	Chunks []ChunkFields
	// Conflicts are the merge conflicts' paths, the most frequent first.
	Conflicts []ConflictPath
}

// StepsLimitMax bounds the conflict paths Steps returns.
const StepsLimitMax = 1000

// Steps returns batch's step report, with at most limit conflict paths
// (0 or more than StepsLimitMax: StepsLimitMax), or ErrNotFound. It reads
// the rollups of migration 015 and the batch's settings: a handful of
// rows, whatever the batch's size.
func (s *Store) Steps(ctx context.Context, batch string, limit int) (StepReport, error) {
	if limit <= 0 || limit > StepsLimitMax {
		limit = StepsLimitMax
	}
	var r StepReport
	var err error
	if r.Strategies, err = s.batchStrategies(ctx, batch); err != nil {
		return r, err
	}
	r.Steps, err = queryRows(ctx, s, func(row pgx.CollectableRow) (StepCalls, error) {
		var c StepCalls
		err := row.Scan(&c.Step, &c.Class, &c.Attempts, &c.Valid, &c.TokensIn, &c.TokensOut, &c.TokensCached, &c.CostUSD,
			&c.Unpriced, &c.ToolCalls, &c.Conflicts, &c.Conflicted, &c.Graded, &c.Leaves, &c.Exact, &c.Normalized, &c.Fuzzy, &c.None)
		return c, err
	}, `
		SELECT step, class, attempts, valid, tokens_in, tokens_out, tokens_cached, cost_usd::float8, unpriced,
		       tool_calls, conflicts, conflicted, graded, leaves, exact, normalized, fuzzy, none
		FROM step_calls WHERE batch = $1
		ORDER BY array_position(ARRAY['chunk', 'merge', 'repair', 'agent'], step), step, class`, batch)
	if err != nil {
		return r, fmt.Errorf("steps of %s: %w", batch, err)
	}
	r.Chunks, err = queryRows(ctx, s, func(row pgx.CollectableRow) (ChunkFields, error) {
		var c ChunkFields
		err := row.Scan(&c.Chunk, &c.Attempts, &c.Valid, &c.WithValue, &c.Fields, &c.Empty)
		return c, err
	}, `SELECT chunk, attempts, valid, with_value, fields, empty FROM chunk_fields WHERE batch = $1 ORDER BY chunk`, batch)
	if err != nil {
		return r, fmt.Errorf("chunk fields of %s: %w", batch, err)
	}
	r.Conflicts, err = queryRows(ctx, s, func(row pgx.CollectableRow) (ConflictPath, error) {
		var c ConflictPath
		err := row.Scan(&c.Path, &c.Conflicts, &c.Merges)
		return c, err
	}, `SELECT path, conflicts, merges FROM merge_conflicts WHERE batch = $1 ORDER BY conflicts DESC, path LIMIT $2`, batch, limit)
	if err != nil {
		return r, fmt.Errorf("merge conflicts of %s: %w", batch, err)
	}
	return r, nil
}

// batchStrategies are the strategies of batch's runs in run order, or
// ErrNotFound.
func (s *Store) batchStrategies(ctx context.Context, batch string) ([]string, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var out []string
	err := s.pool.QueryRow(ctx, `
		SELECT array_agg(strategy ORDER BY first) FROM (
		    SELECT strategy, min(run) AS first FROM (
		        SELECT 1 AS run, settings FROM batches WHERE name = $1
		        UNION ALL
		        SELECT run, settings FROM batch_runs WHERE batch = $1
		    ) r
		    CROSS JOIN LATERAL (SELECT coalesce(r.settings->'limits'->>'strategy',
		        CASE WHEN r.settings ? 'limits' THEN 'conversation' ELSE '' END) AS strategy) s
		    GROUP BY strategy
		) u`, batch).Scan(&out)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && out == nil) {
		return nil, fmt.Errorf("strategies of %s: %w", batch, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("strategies of %s: %w", batch, err)
	}
	return out, nil
}
