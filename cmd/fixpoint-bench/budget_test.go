package main

import (
	"testing"
	"time"
)

// samplesOf is samples every sampleEvery for d, with perSample(at)
// successful calls and one KV operation in each.
func samplesOf(d time.Duration, perSample func(at time.Duration) int64) []budgetSample {
	s := []budgetSample{{}}
	for at := sampleEvery; at <= d; at += sampleEvery {
		p := s[len(s)-1]
		n := perSample(at)
		s = append(s, budgetSample{at: at, c: simCounts{calls: p.c.calls + n, ok: p.c.ok + n}, ops: p.ops + 1})
	}
	return s
}

func TestBudgetBusiestMinuteSlides(t *testing.T) {
	t.Parallel()
	// 10 calls a second, and 30 more in the half second from 90.5 s: the
	// busiest minute is any holding the burst, not one aligned on the
	// window's seconds.
	samples := samplesOf(200*time.Second, func(at time.Duration) int64 {
		if at > 90500*time.Millisecond && at <= 91*time.Second {
			return 7
		}
		return 1
	})
	r := budgetRun{budgetCase: budgetCase{warmup: 15 * time.Second, window: 180 * time.Second}}
	measureSamples(&r, samples, -1, 5*time.Second)
	if r.busiest != 630 {
		t.Errorf("busiest minute %d, want 630 (600 and the burst's 30)", r.busiest)
	}
	if r.ok != 1880 {
		t.Errorf("ok over the window %d, want 1880 (the 185 s from the warm-up's end at 10/s, and the burst's 30)", r.ok)
	}
	if r.opsRate < 9.99 || r.opsRate > 10.01 {
		t.Errorf("KV operations %.2f/s, want 10", r.opsRate)
	}
}

func TestBudgetShareBackFromTheKill(t *testing.T) {
	t.Parallel()
	kill := 100 * time.Second
	// 10 calls a second; for 2 s from the kill 5 a second; then 10 again.
	samples := samplesOf(200*time.Second, func(at time.Duration) int64 {
		if at > kill && at <= kill+2*time.Second {
			return int64(at/sampleEvery) % 2
		}
		return 1
	})
	r := budgetRun{budgetCase: budgetCase{kill: true, warmup: 10 * time.Second, window: 190 * time.Second}}
	measureSamples(&r, samples, kill, 5*time.Second)
	// A 3 s window holds 28.5 calls (95%) once it overlaps the slow 2 s by
	// at most 0.3 s: at 4.7 s.
	if r.back < 4600*time.Millisecond || r.back > 4800*time.Millisecond {
		t.Errorf("share back after %s, want about 4.7s from the kill", r.back)
	}
	if r.firstLease < 0.79 || r.firstLease > 0.81 {
		t.Errorf("first lease at %.2f of the rate before, want 0.80 (2 s at half, 3 s at full)", r.firstLease)
	}
	// A run that never recovers says so.
	never := samplesOf(200*time.Second, func(at time.Duration) int64 {
		if at > kill {
			return int64(at/sampleEvery) % 2
		}
		return 1
	})
	measureSamples(&r, never, kill, 5*time.Second)
	if r.back != -1 {
		t.Errorf("share back after %s in a run at half the rate from the kill, want -1 (never)", r.back)
	}
}
