// Package budget shares a lane's provider budget (requests and tokens a
// minute) among every worker of a cluster. It implements llm.Granter on a
// NATS JetStream KV bucket: one key per lane holds the lane's token
// buckets, and a worker leases a few seconds' worth of them at a time with
// a compare-and-swap update. No call asks the coordinator: the lane spends
// its grant locally and renews it ahead of need (see llm.Granter).
package budget

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// state is a lane's shared budget as the KV bucket holds it: a token
// bucket of requests and one of tokens, and the shrink the provider last
// asked for.
//
// What the buckets earn is split among the lane's lessees: each worker
// leasing has its own part of each bucket (up to its share of the
// capacity), and what a part cannot hold stays in the buckets for anyone
// to take. A lease takes from the worker's own part, then from the rest,
// never from another worker's part. So every worker that keeps asking
// gets its share of the rate whatever the order the leases arrive in
// (two workers renewing on the same period, one always just after the
// other, would otherwise split the rate by the gap between them), and a
// share no one asks for goes to those who do.
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
	// Lessees holds each worker (its coordinator's id) that leased in the
	// last activeFor, with its part of the buckets.
	Lessees map[string]*share `json:"lessees,omitempty"`
}

// share is a lessee's: when it last leased, and its part of the request
// and token buckets (included in state.Req and state.Tok).
type share struct {
	At int64 `json:"at"`
	// Took is when it was last granted something.
	Took int64   `json:"took,omitempty"`
	Req  float64 `json:"req,omitempty"`
	Tok  float64 `json:"tok,omitempty"`
}

// activeFor is how long a lessee keeps its share without leasing: a lane
// with waiting callers renews every llm.GrantRenewEvery, so one silent
// for four renewals is not asking (or is dead), and its part returns to
// the buckets for the others.
const activeFor = 4 * llm.GrantRenewEvery

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

// refill adds what the budget earned since the last refill, shared among
// the lessees. A clock behind the last writer's (another machine) earns
// nothing.
func (s *state) refill(b llm.Budget, now time.Time) {
	el := time.Duration(now.UnixNano() - s.At).Seconds()
	if el <= 0 {
		return
	}
	f := s.factor(now)
	rc, rr := bucketOf(b.RPM)
	tc, tr := bucketOf(b.TPM)
	s.setReq(math.Min(rc, s.Req+el*rr*f), rc)
	s.setTok(math.Min(tc, s.Tok+el*tr*f), tc)
	s.At = now.UnixNano()
	if f == 1 {
		s.Factor, s.Until, s.Shrunk = 0, 0, 0
	}
}

// setReq and setTok set a bucket's level: what it gains is split evenly
// among the lessees' parts, each up to its share of capacity; what it
// loses (a cap, a lower budget) is taken from every part alike.
func (s *state) setReq(level, capacity float64) {
	s.Req = s.setLevel(s.Req, level, capacity, func(l *share) *float64 { return &l.Req })
}

func (s *state) setTok(level, capacity float64) {
	s.Tok = s.setLevel(s.Tok, level, capacity, func(l *share) *float64 { return &l.Tok })
}

// A share of capacity under one whole request or token (more lessees than
// the bucket holds) would leave every part full below one, and nothing to
// take: then the gain fills whole parts instead, to the lessees granted
// longest ago first.
func (s *state) setLevel(old, level, capacity float64, part func(*share) *float64) float64 {
	level = math.Max(0, level)
	n := float64(len(s.Lessees))
	switch {
	case n == 0:
	case level >= old && capacity/n < 1:
		add := level - old
		for _, l := range s.byTook() {
			p := part(l)
			d := math.Max(0, math.Min(add, 1-*p))
			*p += d
			if add -= d; add <= 0 {
				break
			}
		}
	case level >= old:
		each, most := (level-old)/n, capacity/n
		for _, l := range s.Lessees {
			if l != nil {
				p := part(l)
				*p = math.Max(*p, math.Min(most, *p+each))
			}
		}
	case old > 0:
		for _, l := range s.Lessees {
			if l != nil {
				*part(l) *= level / old
			}
		}
	}
	return level
}

// byTook returns the lessees, granted longest ago first (by id when
// alike).
func (s *state) byTook() []*share {
	ids := make([]string, 0, len(s.Lessees))
	for id, l := range s.Lessees {
		if l != nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.Lessees[a].Took, s.Lessees[b].Took), strings.Compare(a, b))
	})
	out := make([]*share, len(ids))
	for i, id := range ids {
		out[i] = s.Lessees[id]
	}
	return out
}

// lease refills the buckets and takes up to want from them for lessee
// id: whole requests and tokens, from its own part first, then from what
// no lessee's part holds. An unlimited budget (0) grants what is asked.
func (s *state) lease(id string, b llm.Budget, want llm.Grant, now time.Time) llm.Grant {
	me := s.join(id, now)
	s.refill(b, now)
	take := func(level, own *float64, perMinute, want int, part func(*share) *float64) int {
		if perMinute == 0 {
			return want
		}
		free := *level
		for _, l := range s.Lessees {
			if l != nil {
				free -= *part(l)
			}
		}
		g := max(0, min(want, int(math.Floor(*own+math.Max(0, free)+1e-9))))
		*own = math.Max(0, *own-float64(g))
		*level = math.Max(0, *level-float64(g))
		return g
	}
	g := llm.Grant{
		Requests: take(&s.Req, &me.Req, b.RPM, want.Requests, func(l *share) *float64 { return &l.Req }),
		Tokens:   take(&s.Tok, &me.Tok, b.TPM, want.Tokens, func(l *share) *float64 { return &l.Tok }),
	}
	if g.Requests > 0 || g.Tokens > 0 {
		me.Took = now.UnixNano()
	}
	return g
}

// join records id's lease at now, returns its share (new and empty the
// first time), and drops the lessees silent for activeFor: their parts
// stay in the buckets, free for anyone.
func (s *state) join(id string, now time.Time) *share {
	if s.Lessees == nil {
		s.Lessees = map[string]*share{}
	}
	for k, l := range s.Lessees {
		if l == nil || now.UnixNano()-l.At > int64(activeFor) {
			delete(s.Lessees, k)
		}
	}
	me := s.Lessees[id]
	if me == nil {
		me = &share{}
		s.Lessees[id] = me
	}
	me.At = now.UnixNano()
	return me
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
		rc, _ := bucketOf(b.RPM)
		tc, _ := bucketOf(b.TPM)
		if l.Requests >= 0 {
			s.setReq(math.Min(s.Req, float64(l.Requests)), rc)
		}
		if l.Tokens >= 0 {
			s.setTok(math.Min(s.Tok, float64(l.Tokens)), tc)
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
