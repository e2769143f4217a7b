package enqueue

import (
	"errors"
	"strings"
	"testing"
)

// A dry run refuses what the real run would: more bad rows than allowed,
// or a whole dataset of bad rows even when any number is allowed (but not
// the first rows of one, read with a limit).
func TestDryRunRefusal(t *testing.T) {
	t.Parallel()
	bad := []BadRow{{Line: 1}, {Line: 2}}
	for _, tc := range []struct {
		name       string
		rep        DryRunReport
		maxBadRows int
		want       string // "" for no refusal
	}{
		{"no bad rows", DryRunReport{Rows: 3}, 0, ""},
		{"within the limit", DryRunReport{Rows: 3, Bad: bad}, 2, ""},
		{"over the limit", DryRunReport{Rows: 3, Bad: bad}, 1, "2 bad rows, over --max-bad-rows 1"},
		{"every row bad", DryRunReport{Rows: 2, Bad: bad}, -1, "every one of the dataset's 2 rows is bad"},
		{"the only row bad", DryRunReport{Rows: 1, Bad: bad[:1]}, -1, "the dataset's only row is bad"},
		{"every row read bad, with a limit", DryRunReport{Rows: 2, Bad: bad, Limited: true}, -1, ""},
	} {
		err := tc.rep.Refusal(tc.maxBadRows)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrTooManyBadRows) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrTooManyBadRows saying %q", tc.name, err, tc.want)
		}
	}
}
