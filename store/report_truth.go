package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RuleFailure is one row of the rule_failures view: how often one rule of
// the schema failed at one path (array indices folded to '*') with one
// severity, in one batch.
type RuleFailure struct {
	// Rule is the rule's CEL text; Path the pointer its error names;
	// Severity "error" or "warn".
	Rule, Path, Severity string
	// Failures counts the failures across every attempt and revalidation
	// of every run; Jobs the distinct jobs with one; FinalJobs the jobs
	// whose final check has one (its latest run's revalidation, else that
	// run's valid attempt, else its last).
	Failures, Jobs, FinalJobs int64
}

// RuleFailures returns the rule failures of batch, most frequent first
// (then by rule, path and severity), at most limit of them (0: all).
func (s *Store) RuleFailures(ctx context.Context, batch string, limit int) ([]RuleFailure, error) {
	out, err := queryRows(ctx, s, func(r pgx.CollectableRow) (RuleFailure, error) {
		var f RuleFailure
		err := r.Scan(&f.Rule, &f.Path, &f.Severity, &f.Failures, &f.Jobs, &f.FinalJobs)
		return f, err
	}, `
		SELECT coalesce(rule, ''), path, severity, failures, jobs, final_jobs FROM rule_failures
		WHERE batch = $1
		ORDER BY failures DESC, rule, path, severity LIMIT $2`, batch, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("rule failures of %s: %w", batch, err)
	}
	return out, nil
}

// FieldGrounding is one row of the evidence_grades view: the grades of one
// field (a JSON pointer, array indices folded to '*') of a batch's final
// values.
type FieldGrounding struct {
	Path string
	// Leaves counts the field's graded strings and numbers (each element
	// of an array field); Exact, Normalized, Fuzzy and None split them by
	// grade.
	Leaves, Exact, Normalized, Fuzzy, None int64
}

// Share is n / Leaves (Leaves is never 0 in a row of the view).
func (g FieldGrounding) Share(n int64) float64 { return ratio(n, g.Leaves) }

// Grounding returns the grades of the fields of batch's final values, the
// field with the largest share of grade none first (then the most
// leaves, then by path), at most limit of them (0: all).
func (s *Store) Grounding(ctx context.Context, batch string, limit int) ([]FieldGrounding, error) {
	out, err := queryRows(ctx, s, func(r pgx.CollectableRow) (FieldGrounding, error) {
		var g FieldGrounding
		err := r.Scan(&g.Path, &g.Leaves, &g.Exact, &g.Normalized, &g.Fuzzy, &g.None)
		return g, err
	}, `
		SELECT path, leaves, exact, normalized, fuzzy, none FROM evidence_grades
		WHERE batch = $1
		ORDER BY none_share DESC, leaves DESC, path LIMIT $2`, batch, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("grounding of %s: %w", batch, err)
	}
	return out, nil
}

// queryRows collects the rows of query under the Store's statement
// timeout. rule_failures and evidence_grades read their rollups
// (migration 010): a batch's rows, as few as its rules and fields.
func queryRows[T any](ctx context.Context, s *Store, scan pgx.RowToFunc[T], query string, args ...any) ([]T, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}
