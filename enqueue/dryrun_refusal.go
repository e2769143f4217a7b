package enqueue

import "fmt"

// Refusal is the error the real run would stop with on the bad rows the
// dry run found, nil when it would go on: more than maxBadRows bad rows
// (-1: any number), or every row of the whole dataset bad. It wraps
// ErrTooManyBadRows, as Run's does.
func (r DryRunReport) Refusal(maxBadRows int) error {
	if maxBadRows >= 0 && len(r.Bad) > maxBadRows {
		return fmt.Errorf("%w: %s: the real run would record and publish nothing", ErrTooManyBadRows, overMaxBadRows(len(r.Bad), maxBadRows))
	}
	if r.Rows > 0 && len(r.Bad) == r.Rows && !r.Limited {
		return fmt.Errorf("%w: %s: the real run would record and publish nothing", ErrTooManyBadRows, everyRowBad(r.Rows))
	}
	return nil
}
