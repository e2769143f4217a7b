package store

import "context"

// QueryArgsForTest scans one row of query, run with args, into dest.
func (s *Store) QueryArgsForTest(ctx context.Context, query string, args []any, dest ...any) error {
	return s.pool.QueryRow(ctx, query, args...).Scan(dest...)
}
