package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CostPoint is what one batch's calls cost in one step of time.
type CostPoint struct {
	// At is the step's start (UTC); Batch the batch.
	At    time.Time
	Batch string
	// CostUSD, Calls and Tokens (in plus out) are the step's calls' totals
	// (the attempts, as the batch page's cost table counts them).
	CostUSD       float64
	Calls, Tokens int64
}

// Steps of CostsOverTime.
const (
	CostStepHour = "hour"
	CostStepDay  = "day"
	// CostStepsMax bounds the steps of one CostsOverTime range.
	CostStepsMax = 400
	// costPointsMax bounds the points one CostsOverTime returns.
	costPointsMax = 50_000
)

// CostsOverTime returns what the calls started in [from, to) cost, by step
// (an hour or a day, UTC) and batch, in time order. It reads the hourly
// rollup batch_cost_hours (migration 005) over a range of at most
// CostStepsMax steps: a row per batch and hour with calls, whatever the
// number of calls. Calls with no start time are not counted.
func (s *Store) CostsOverTime(ctx context.Context, from, to time.Time, step string) ([]CostPoint, error) {
	width := map[string]time.Duration{CostStepHour: time.Hour, CostStepDay: 24 * time.Hour}[step]
	switch {
	case width == 0:
		return nil, fmt.Errorf("%w: step %q is not hour or day", ErrInvalid, step)
	case !to.After(from):
		return nil, fmt.Errorf("%w: the range %s to %s is empty", ErrInvalid, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	case to.Sub(from) > CostStepsMax*width:
		return nil, fmt.Errorf("%w: the range is over %d %ss", ErrInvalid, CostStepsMax, step)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT date_trunc($3, hour, 'UTC'), batch, sum(cost_usd)::float8, sum(calls), sum(tokens)
		FROM batch_cost_hours WHERE hour >= $1 AND hour < $2
		GROUP BY 1, 2 ORDER BY 1, 2 LIMIT $4`, from, to, step, costPointsMax)
	if err != nil {
		return nil, fmt.Errorf("costs over time: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CostPoint, error) {
		var p CostPoint
		err := r.Scan(&p.At, &p.Batch, &p.CostUSD, &p.Calls, &p.Tokens)
		p.At = p.At.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("costs over time: %w", err)
	}
	return out, nil
}
