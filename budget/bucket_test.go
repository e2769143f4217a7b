package budget

import (
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// leaseEvery has each lessee lease want every period for d, lessee i at
// offsets[i] into each period, and returns what each was granted and
// the most granted in any minute.
func leaseEvery(b llm.Budget, want []int, offsets []time.Duration, period, d time.Duration) (got []int, busiest int) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newState(b, t0)
	got = make([]int, len(want))
	var all []grantAt
	for p := time.Duration(0); p < d; p += period {
		for i, off := range offsets {
			now := t0.Add(p + off)
			g := s.lease(string(rune('a'+i)), b, llm.Grant{Requests: want[i]}, now)
			got[i] += g.Requests
			all = append(all, grantAt{at: now, n: g.Requests})
		}
	}
	return got, maxInWindow(all, time.Minute)
}

func TestLeaseSharesFairlyWhateverTheOrder(t *testing.T) {
	t.Parallel()
	var sixteen []time.Duration
	for i := range 16 {
		sixteen = append(sixteen, time.Duration(i)*time.Millisecond)
	}
	b := llm.Budget{RPM: 600}
	_, rate := bucketOf(b.RPM)
	for _, tc := range []struct {
		name    string
		offsets []time.Duration
		// fairPct is the least a lessee gets, in percent of a fair share.
		// With shares under one request, parts are filled whole in turn,
		// and of sixteen leases bunched in 15 ms the last ones wait a
		// period more for a part left half filled: within a quarter of
		// fair, never starved (the rate before was all to the first).
		fairPct int
	}{
		{"b always 10ms after a", []time.Duration{0, 10 * time.Millisecond}, 90},
		{"b always 1ms after a", []time.Duration{0, time.Millisecond}, 90},
		{"four, one just after another", []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 250 * time.Millisecond}, 90},
		{"sixteen, a millisecond apart: shares under one request", sixteen, 75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := make([]int, len(tc.offsets))
			for i := range want {
				want[i] = 50
			}
			got, busiest := leaseEvery(b, want, tc.offsets, llm.GrantRenewEvery, 3*time.Minute)
			all := 0
			for _, n := range got {
				all += n
			}
			if busiest > b.RPM {
				t.Errorf("the busiest minute was granted %d requests, over the budget of %d", busiest, b.RPM)
			}
			if min := int(rate * 180 * 0.98); all < min {
				t.Errorf("granted %d requests in 3 minutes, want at least %d (the refill rate)", all, min)
			}
			fair := all / len(got)
			for i, n := range got {
				if n < fair*tc.fairPct/100 {
					t.Errorf("lessee %d got %d of %d requests (grants %v), want at least %d%% of a fair %d", i, n, all, got, tc.fairPct, fair)
				}
			}
		})
	}
}

func TestLeaseShareNobodyAsksForGoesToWhoAsks(t *testing.T) {
	t.Parallel()
	b := llm.Budget{RPM: 600}
	_, rate := bucketOf(b.RPM)
	// b renews as often as a but needs one request a renewal: a gets the
	// rest of the rate.
	got, busiest := leaseEvery(b, []int{50, 1}, []time.Duration{0, 10 * time.Millisecond}, llm.GrantRenewEvery, 3*time.Minute)
	if want := int(rate*180*0.98) - got[1]; got[0] < want {
		t.Errorf("a got %d requests in 3 minutes beside b's %d, want at least %d (the rate less b's)", got[0], got[1], want)
	}
	if got[1] < 350 {
		t.Errorf("b got %d requests in 3 minutes, want its one a renewal (360)", got[1])
	}
	if busiest > b.RPM {
		t.Errorf("the busiest minute was granted %d requests, over the budget of %d", busiest, b.RPM)
	}
}

func TestLeaseCapShrinksEveryShare(t *testing.T) {
	t.Parallel()
	b := llm.Budget{RPM: 600}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newState(b, t0)
	// Both lessees join with nothing to take, then the buckets fill their
	// shares.
	s.Req = 0
	s.lease("a", b, llm.Grant{}, t0)
	s.lease("b", b, llm.Grant{}, t0)
	s.refill(b, t0.Add(time.Second))
	s.shrink(b, llm.Shrink{Factor: 1, Left: &llm.Grant{Requests: 2, Tokens: -1}}, t0.Add(time.Second))
	n := 0
	for _, id := range []string{"a", "b"} {
		n += s.lease(id, b, llm.Grant{Requests: 50}, t0.Add(time.Second)).Requests
	}
	if n != 2 {
		t.Errorf("after the provider said 2 requests are left the lessees were granted %d, want 2", n)
	}
}
