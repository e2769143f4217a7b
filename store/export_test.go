package store

import "context"

// ApplyResultsSQL is the statement SaveResults sets job rows with, and
// ApplyResultsArgs its arguments for results, so that a test can ask
// Postgres how it plans it.
var ApplyResultsSQL = applyResultsSQL

func ApplyResultsArgs(results []Result) []any {
	var c jobColumns
	for _, r := range results {
		c.add(r)
	}
	return c.args()
}

// QueryRowForTest scans one row of query into dest.
func (s *Store) QueryRowForTest(ctx context.Context, query string, dest ...any) error {
	return s.pool.QueryRow(ctx, query).Scan(dest...)
}

// SetTimelineJobs sets how many jobs BatchTimeline reads before it samples.
func (s *Store) SetTimelineJobs(n int64) { s.timelineJobs = n }

// SetSearchWindow sets how many jobs a step of SearchJobs reads.
func (s *Store) SetSearchWindow(n int) { s.searchWindow = n }

// URLForTest is the URL the Store was opened with.
func (s *Store) URLForTest() string { return s.pool.Config().ConnString() }

// RollupRelationsForTest are the tables the rollup triggers keep.
func RollupRelationsForTest() []string { return append([]string(nil), rollupRelations...) }

// ExecForTest runs sql, for a test or benchmark that changes the schema
// of its own database.
func (s *Store) ExecForTest(ctx context.Context, sql string) error {
	_, err := s.pool.Exec(ctx, sql)
	return err
}
