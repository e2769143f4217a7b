package budget

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// testClock is a clock the test moves; every lessee reads it.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time            { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration)   { c.ns.Add(int64(d)) }
func (c *testClock) Since(t time.Time) float64 { return c.Now().Sub(t).Seconds() }

// serverJS starts an embedded JetStream server for the test and returns a
// client of it.
func serverJS(t *testing.T) jetstream.JetStream {
	js, _ := serverAndJS(t)
	return js
}

func serverAndJS(t *testing.T) (jetstream.JetStream, *server.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a NATS server (embedded): not with -short")
	}
	ns, err := server.NewServer(&server.Options{ServerName: "fixpoint-budget-test", JetStream: true, StoreDir: t.TempDir(),
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		t.Fatal(errors.New("test NATS server not ready after 15s"))
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, ns
}

var testLane = llm.LaneKey{Provider: "openai", BaseURL: "https://user:secret@api.example.com/v1", Model: "m", KeyHash: llm.KeyHash("sk-test-key-123")}

// lessee is one worker's view: its own coordinator on the shared bucket.
func lessee(t *testing.T, js jetstream.JetStream, clock *testClock, ops *atomic.Int64) *KV {
	t.Helper()
	k, err := Open(t.Context(), js, Config{Now: clock.Now, OnOp: func(string, error) {
		if ops != nil {
			ops.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// grantAt is a grant and when it was made.
type grantAt struct {
	at time.Time
	n  int
}

// maxInWindow is the most granted in any half-open window of w.
func maxInWindow(gs []grantAt, w time.Duration) int {
	best := 0
	for i := range gs {
		sum := 0
		for j := i; j < len(gs) && gs[j].at.Sub(gs[i].at) < w; j++ {
			sum += gs[j].n
		}
		best = max(best, sum)
	}
	return best
}

// run has each live lessee lease every step for steps steps, all at once
// (their compare-and-swaps contend), asking for want requests, and
// returns what each was granted, in time order.
func run(t *testing.T, clock *testClock, ks []*KV, live []bool, b llm.Budget, want, steps int, step time.Duration) [][]grantAt {
	t.Helper()
	out := make([][]grantAt, len(ks))
	for range steps {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, k := range ks {
			if !live[i] {
				continue
			}
			wg.Go(func() {
				g, err := k.Lease(t.Context(), testLane, b, llm.Grant{Requests: want})
				if err != nil {
					t.Errorf("lease: %v", err)
					return
				}
				mu.Lock()
				out[i] = append(out[i], grantAt{at: clock.Now(), n: g.Requests})
				mu.Unlock()
			})
		}
		wg.Wait()
		clock.Advance(step)
	}
	return out
}

func merged(per [][]grantAt) []grantAt {
	var all []grantAt
	for _, gs := range per {
		all = append(all, gs...)
	}
	// Steps are in order and each lessee's grants too; a stable merge by
	// time keeps the window sums exact.
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].at.Before(all[j-1].at); j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	return all
}

func total(gs []grantAt) int {
	n := 0
	for _, g := range gs {
		n += g.n
	}
	return n
}

func TestLesseesNeverExceedTheBudget(t *testing.T) {
	t.Parallel()
	js := serverJS(t)
	clock := newTestClock()
	b := llm.Budget{RPM: 600}
	var ops atomic.Int64
	ks := []*KV{lessee(t, js, clock, &ops), lessee(t, js, clock, &ops), lessee(t, js, clock, &ops), lessee(t, js, clock, &ops)}
	live := []bool{true, true, true, true}
	// Every lessee wants more than the whole budget: 3 minutes of leases
	// every half second.
	per := run(t, clock, ks, live, b, 50, 360, 500*time.Millisecond)
	all := merged(per)
	if got := maxInWindow(all, time.Minute); got > b.RPM {
		t.Errorf("the busiest minute was granted %d requests, over the budget of %d", got, b.RPM)
	}
	// The budget is used, not just respected: 3 minutes at the refill rate.
	_, rate := bucketOf(b.RPM)
	if got, want := total(all), int(rate*180*0.98); got < want {
		t.Errorf("granted %d requests in 3 minutes, want at least %d (the refill rate)", got, want)
	}
	// Each lessee gets its share whatever order its compare-and-swaps land
	// in: the one whose goroutine runs last every step too.
	for i, gs := range per {
		if n, fair := total(gs), total(all)/len(per); n < fair*9/10 {
			t.Errorf("lessee %d got %d of %d requests, want at least 90%% of a fair %d", i, n, total(all), fair)
		}
	}
	if ops.Load() == 0 {
		t.Error("no KV operation counted")
	}
}

func TestDeadLesseeShareReturnsWithinOneLease(t *testing.T) {
	t.Parallel()
	js := serverJS(t)
	clock := newTestClock()
	b := llm.Budget{RPM: 600}
	ks := []*KV{lessee(t, js, clock, nil), lessee(t, js, clock, nil)}
	step := 500 * time.Millisecond
	run(t, clock, ks, []bool{true, true}, b, 50, 40, step)
	// The first lessee dies, its grants unspent. Within one lease the
	// survivor is granted the whole refill.
	per := run(t, clock, ks, []bool{false, true}, b, 50, int(LeaseDefault/step), step)
	_, rate := bucketOf(b.RPM)
	got, want := total(per[1]), int(rate*LeaseDefault.Seconds()*0.9)
	if got < want {
		t.Errorf("within one lease (%s) of the death the survivor got %d requests, want at least %d (90%% of the whole rate)", LeaseDefault, got, want)
	}
}

func TestShrinkPropagates(t *testing.T) {
	t.Parallel()
	js := serverJS(t)
	clock := newTestClock()
	b := llm.Budget{RPM: 600}
	a, other := lessee(t, js, clock, nil), lessee(t, js, clock, nil)
	step := 500 * time.Millisecond
	before := total(run(t, clock, []*KV{other}, []bool{true}, b, 50, 20, step)[0][4:])
	// a is answered 429: the whole lane halves for ShrinkFor429.
	if err := a.Shrink(t.Context(), testLane, b, llm.Shrink{Factor: llm.Shrink429, Until: clock.Now().Add(llm.ShrinkFor429), Left: &llm.Grant{}}); err != nil {
		t.Fatal(err)
	}
	g, err := other.Lease(t.Context(), testLane, b, llm.Grant{Requests: 50})
	if err != nil {
		t.Fatal(err)
	}
	if g.Requests != 0 {
		t.Errorf("right after the shrink another lessee was granted %d requests, want 0 (the buckets emptied)", g.Requests)
	}
	during := total(run(t, clock, []*KV{other}, []bool{true}, b, 50, 16, step)[0])
	if ratio := float64(during) / float64(before); ratio < 0.4 || ratio > 0.6 {
		t.Errorf("during the shrink another lessee got %d requests in 8s against %d before: ratio %.2f, want about 0.5", during, before, ratio)
	}
	clock.Advance(llm.ShrinkFor429)
	after := total(run(t, clock, []*KV{other}, []bool{true}, b, 50, 16, step)[0][1:])
	if after < before*9/10 {
		t.Errorf("after the shrink ended another lessee got %d requests in 8s, want the %d of before", after, before)
	}
}

func TestKeyHoldsNoSecret(t *testing.T) {
	t.Parallel()
	k := Key(testLane)
	for _, bad := range []string{"secret", "sk-test", "example.com", testLane.KeyHash} {
		if strings.Contains(strings.ToLower(k), strings.ToLower(bad)) {
			t.Errorf("KV key %q holds %q", k, bad)
		}
	}
	other := testLane
	other.Model = "m2"
	if Key(other) == k {
		t.Error("two lanes share a KV key")
	}
}

func TestCoordinatorOutageGrantsNothingAndLogsOnceAMinute(t *testing.T) {
	t.Parallel()
	js, ns := serverAndJS(t)
	var logs bytes.Buffer
	k, err := Open(t.Context(), js, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		g, err := k.Lease(ctx, testLane, llm.Budget{RPM: 600}, llm.Grant{Requests: 5})
		cancel()
		if err == nil || g.Requests != 0 {
			t.Errorf("lease with the server down: %+v, %v; want nothing and an error", g, err)
		}
	}
	if n := strings.Count(logs.String(), "coordinator cannot be reached"); n != 1 {
		t.Errorf("three failed leases logged %d outage lines, want 1 (at most one a minute):\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "secret") || strings.Contains(logs.String(), "sk-test") {
		t.Errorf("the log holds a secret:\n%s", logs.String())
	}
}

func TestBucketLostIsCreatedAgain(t *testing.T) {
	t.Parallel()
	js := serverJS(t)
	clock := newTestClock()
	var ops atomic.Int64
	k := lessee(t, js, clock, &ops)
	if err := js.DeleteKeyValue(t.Context(), BucketDefault); err != nil {
		t.Fatal(err)
	}
	g, err := k.Lease(t.Context(), testLane, llm.Budget{RPM: 600}, llm.Grant{Requests: 5})
	if err != nil || g.Requests != 5 {
		t.Errorf("lease after the bucket was deleted: %+v, %v; want 5 requests from a bucket created again", g, err)
	}
}
