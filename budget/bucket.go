// Package budget shares a lane's provider budget (requests and tokens a
// minute) among every worker of a cluster. It implements llm.Granter on a
// NATS JetStream KV bucket: one key per lane holds the lane's token
// buckets, and a worker leases a few seconds' worth of them at a time with
// a compare-and-swap update. No call asks the coordinator: the lane spends
// its grant locally and renews it ahead of need (see llm.Granter).
package budget

import (
	"math"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// state is a lane's shared budget as the KV bucket holds it: a token
// bucket of requests and one of tokens, and the shrink the provider last
// asked for.
type state struct {
	Req float64 `json:"req"`
	Tok float64 `json:"tok"`
	// At is when the buckets were last refilled (Unix nanoseconds).
	At int64 `json:"at"`
	// Factor scales the refill until Until while below 1; Shrunk is when
	// it was last lowered.
	Factor float64 `json:"factor,omitempty"`
	Until  int64   `json:"until,omitempty"`
	Shrunk int64   `json:"shrunk,omitempty"`
	// Lessees holds when each worker (its coordinator's id) last leased,
	// for a lease's fair share; an entry older than a lease is dropped.
	Lessees map[string]int64 `json:"lessees,omitempty"`
}

// bucketOf returns the capacity and refill rate (a second) of a budget of
// perMinute: a second's worth held at most, refilled at (perMinute -
// capacity)/60, so that what is granted in any minute stays within
// perMinute (capacity + 60 x rate). Below 120 a minute the rate keeps at
// least half the budget.
func bucketOf(perMinute int) (capacity, rate float64) {
	capacity = math.Max(1, float64(perMinute)/60)
	rate = math.Max(float64(perMinute)-capacity, float64(perMinute)/2) / 60
	return capacity, rate
}

// newState is a lane's state when the bucket first sees it: full.
func newState(b llm.Budget, now time.Time) state {
	rc, _ := bucketOf(b.RPM)
	tc, _ := bucketOf(b.TPM)
	return state{Req: rc, Tok: tc, At: now.UnixNano()}
}

// factor is the shrink in force at now, 1 when none.
func (s *state) factor(now time.Time) float64 {
	if s.Factor <= 0 || s.Factor >= 1 || now.UnixNano() >= s.Until {
		return 1
	}
	return s.Factor
}

// refill adds what the budget earned since the last refill. A clock
// behind the last writer's (another machine) earns nothing.
func (s *state) refill(b llm.Budget, now time.Time) {
	el := time.Duration(now.UnixNano() - s.At).Seconds()
	if el <= 0 {
		return
	}
	f := s.factor(now)
	rc, rr := bucketOf(b.RPM)
	tc, tr := bucketOf(b.TPM)
	s.Req = math.Min(rc, s.Req+el*rr*f)
	s.Tok = math.Min(tc, s.Tok+el*tr*f)
	s.At = now.UnixNano()
	if f == 1 {
		s.Factor, s.Until, s.Shrunk = 0, 0, 0
	}
}

// lease refills the buckets and takes up to want from them for lessee
// id: whole requests and tokens, as much as they hold, and no more than a
// fair share of their capacity (divided among the lessees of the last
// lease period), so that the first to ask does not starve the others. An
// unlimited budget (0) grants what is asked.
func (s *state) lease(id string, b llm.Budget, want llm.Grant, now time.Time, lease time.Duration) llm.Grant {
	s.refill(b, now)
	n := s.lessees(id, now, lease)
	take := func(level *float64, perMinute, want int) int {
		if perMinute == 0 {
			return want
		}
		c, _ := bucketOf(perMinute)
		g := min(want, int(math.Floor(*level)), int(math.Ceil(c/float64(n))))
		*level -= float64(g)
		return g
	}
	return llm.Grant{Requests: take(&s.Req, b.RPM, want.Requests), Tokens: take(&s.Tok, b.TPM, want.Tokens)}
}

// lessees records id's lease at now, drops the lessees silent for a
// lease, and returns how many are left.
func (s *state) lessees(id string, now time.Time, lease time.Duration) int {
	if s.Lessees == nil {
		s.Lessees = map[string]int64{}
	}
	s.Lessees[id] = now.UnixNano()
	for k, at := range s.Lessees {
		if now.UnixNano()-at > int64(lease) {
			delete(s.Lessees, k)
		}
	}
	return len(s.Lessees)
}

// shrinkOnce is the shortest time between two cuts of a lane's factor:
// the many 429s of one congestion event, from every worker, cut once.
const shrinkOnce = time.Second

// minFactor bounds how far shrinks compound.
const minFactor = 1.0 / 32

// shrink applies sh: the buckets hold no more than it says is left, and a
// factor under 1 slows the refill until its end (which it extends),
// compounding with the shrink in force once per shrinkOnce.
func (s *state) shrink(b llm.Budget, sh llm.Shrink, now time.Time) {
	s.refill(b, now)
	if l := sh.Left; l != nil {
		if l.Requests >= 0 {
			s.Req = math.Min(s.Req, float64(l.Requests))
		}
		if l.Tokens >= 0 {
			s.Tok = math.Min(s.Tok, float64(l.Tokens))
		}
	}
	if sh.Factor <= 0 || sh.Factor >= 1 {
		return
	}
	if now.UnixNano()-s.Shrunk >= int64(shrinkOnce) {
		s.Factor = math.Max(minFactor, s.factor(now)*sh.Factor)
		s.Shrunk = now.UnixNano()
	}
	s.Until = max(s.Until, sh.Until.UnixNano())
}
