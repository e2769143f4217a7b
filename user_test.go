package fixpoint_test

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// A job's end-user id gives back its id and run, whatever the id holds;
// a first run's id is the job id as it is.
func TestRequestUserRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id   string
		run  int
		want string
	}{
		{"b:r1", 0, "b:r1"},
		{"b:r1", 1, "b:r1"},
		{"b:r1", 2, "b:r1#2"},
		{"b:r1#2", 1, "b:r1#2#1"},
		{"b:#", 3, "b:##3"},
		{"b:r#x", 1, "b:r#x#1"},
		{"", 2, "#2"},
	} {
		got := fixpoint.RequestUser(c.id, c.run)
		if got != c.want {
			t.Errorf("RequestUser(%q, %d) = %q, want %q", c.id, c.run, got, c.want)
		}
		id, run := fixpoint.SplitRequestUser(got)
		if id != c.id || run != max(c.run, 1) {
			t.Errorf("SplitRequestUser(%q) = %q, %d; want %q, %d", got, id, run, c.id, max(c.run, 1))
		}
	}
	// An end-user id RequestUser did not make is a job id of run 1.
	for _, user := range []string{"u1", "a#", "a#0", "a#-2", "a#02", "a#x"} {
		if id, run := fixpoint.SplitRequestUser(user); id != user || run != 1 {
			t.Errorf("SplitRequestUser(%q) = %q, %d; want the id as it is, run 1", user, id, run)
		}
	}
}
