package natsaddr

import "testing"

// The same ledger reached by another name of its host is the same; another
// database or port is not; a side that names none compares only the
// directory.
func TestIdentityMismatch(t *testing.T) {
	t.Parallel()
	base := Identity{Dir: "/srv/a/.fixpoint/nats", Ledger: "127.0.0.1:5432/fixpoint"}
	for _, tc := range []struct {
		other Identity
		same  bool
	}{
		{Identity{Dir: base.Dir, Ledger: "localhost:5432/fixpoint"}, true},
		{Identity{Dir: base.Dir, Ledger: "/var/run/postgresql:5432/fixpoint"}, true},
		{Identity{Dir: base.Dir}, true},
		{Identity{Dir: base.Dir, Ledger: "127.0.0.1:5432/other"}, false},
		{Identity{Dir: base.Dir, Ledger: "127.0.0.1:5433/fixpoint"}, false},
		{Identity{Dir: "/srv/b/.fixpoint/nats", Ledger: base.Ledger}, false},
	} {
		if got := tc.other.Mismatch(base) == ""; got != tc.same {
			t.Errorf("%+v against %+v: same %v, want %v (%q)", tc.other, base, got, tc.same, tc.other.Mismatch(base))
		}
	}
}
