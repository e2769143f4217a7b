package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/budget"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// Figure 11: one provider budget across worker processes. N `worker run`
// subprocesses with --rpm R share one simulated key of R requests a
// minute ('rate-limited' preset, its RPM set to R). The simulator's
// initial burst (a full bucket of R) is spent before the workers start, so
// every call the cluster sends beyond the budget is answered 429 and no
// overshoot hides in it. The simulator's counters are sampled every
// sampleEvery from the workers' start. Measured over the window, after a
// warm-up: successful calls against the budget, the share of 429s, and
// the KV operations on the budget bucket a second (counted on the NATS
// server's subjects, not by the workers). The busiest 60 seconds of
// successful calls is taken over the whole run, warm-up included, sliding
// by sampleEvery. In runs with several workers one is killed (SIGKILL)
// halfway: the time from the kill until the survivors' rate is back at
// the rate before it is its share's return. The KV operations a second
// of the run at another call rate are compared with those of the same
// number of workers at 600 RPM before the kill. The "before" runs
// too: three workers each with the local limiter (--budget local).

// budgetCase is one run of figure 11.
type budgetCase struct {
	label   string
	workers int
	rpm     int
	mode    string // --budget
	kill    bool
	warmup  time.Duration
	window  time.Duration
}

// budgetRun is what a run of figure 11 measured over its window.
type budgetRun struct {
	budgetCase
	ok, limited, calls int64
	// busiest is the most successful calls in any 60 seconds from the
	// workers' start, busiestCalls the most calls (429s too).
	busiest, busiestCalls int64
	ops                   int64
	// opsRate is the KV operations a second over the window, or before
	// the kill in a run with one.
	opsRate float64
	// firstLease is the survivors' rate over the first lease after the
	// kill, as a share of the rate before it; back how long from the kill
	// until a backRun running rate was back to 95% of it (-1 if never).
	firstLease float64
	back       time.Duration
	err        error
}

// sampleEvery spaces the samples of the simulator's counters: the
// resolution of the busiest minute and of the kill's return.
const sampleEvery = 100 * time.Millisecond

// backRun is the running window of the survivors' rate after a kill.
const backRun = 3 * time.Second

// budgetSizes are figure 11's settings.
type budgetSizes struct {
	workers []int
	seconds int
	warmup  time.Duration
	// compare is the RPM of the run comparing KV operations a second at
	// another call rate (4 workers or the most asked for).
	compare int
}

// figureBudget runs figure 11's cases.
func (e *benchEnv) figureBudget(ctx context.Context, c benchConfig) []budgetRun {
	s := c.budget
	window := time.Duration(s.seconds) * time.Second
	var cases []budgetCase
	for _, n := range s.workers {
		cases = append(cases, budgetCase{label: fmt.Sprintf("%d worker(s), --rpm 600", n), workers: n, rpm: 600, mode: "cluster",
			kill: n > 1, warmup: s.warmup, window: window})
	}
	cw := min(4, s.workers[len(s.workers)-1])
	cases = append(cases,
		budgetCase{label: fmt.Sprintf("%d workers, --rpm %d (the other call rate)", cw, s.compare), workers: cw, rpm: s.compare, mode: "cluster",
			warmup: s.warmup, window: min(window, time.Minute)},
		budgetCase{label: "before: 3 workers, --rpm 600 each, --budget local", workers: 3, rpm: 600, mode: "local",
			warmup: s.warmup, window: min(window, time.Minute)})
	var out []budgetRun
	for i, bc := range cases {
		e.logf("11/11 shared budget, %s: %s warm-up, %s window", bc.label, bc.warmup, bc.window)
		r := budgetRun{budgetCase: bc, back: -1}
		r.err = e.budgetRun(ctx, i, &r)
		if r.err != nil {
			e.logf("  error: %v", r.err)
		} else {
			e.logf("  %d calls: %d ok, %d 429; busiest 60s %d ok, %d calls; %d KV operations (%.1f/s)", r.calls, r.ok, r.limited, r.busiest, r.busiestCalls, r.ops, r.opsRate)
			if r.kill {
				e.logf("  kill: first lease at %s of the rate before; back after %s", pct(r.firstLease), r.back)
			}
		}
		out = append(out, r)
	}
	return out
}

// simCounts is the simulator's cumulative calls, successes and 429s.
type simCounts struct{ calls, ok, limited int64 }

// countsOf counts calls by their answers (a status, or none for a reset),
// as successes and 429s are counted: when the answer goes out, not when
// the call arrives, so that a window's shares add up.
func countsOf(st sim.Stats) simCounts {
	var calls int64
	for _, n := range st.ByStatus {
		calls += n
	}
	return simCounts{calls: calls, ok: st.ByStatus[http.StatusOK], limited: st.ByStatus[http.StatusTooManyRequests]}
}

func (a simCounts) minus(b simCounts) simCounts {
	return simCounts{calls: a.calls - b.calls, ok: a.ok - b.ok, limited: a.limited - b.limited}
}

func (e *benchEnv) budgetRun(ctx context.Context, i int, r *budgetRun) error {
	q := e.queue("budget"+strconv.Itoa(i), 0)
	defer e.dropQueue(q)
	cfg, err := sim.Preset("rate-limited")
	if err != nil {
		return err
	}
	cfg.Seed, cfg.RPM = 1, r.rpm
	cfg.Latency = sim.Latency{Dist: sim.DistFixed, RequestP50: 200 * time.Millisecond, RequestP99: 200 * time.Millisecond}
	srv, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		return fmt.Errorf("start simulator: %w", err)
	}
	defer closeSim()
	// Jobs for the whole run, the kill's redeliveries aside.
	n := int((r.warmup+r.window).Seconds()*float64(r.rpm)/60*1.2) + 200
	if err := e.enqueue(ctx, q, e.batchName(fmt.Sprintf("budget%d", i)), n, fixpoint.Limits{}); err != nil {
		return err
	}
	_ = e.js.DeleteKeyValue(ctx, budget.BucketDefault) // the last run's lane state
	if err := spendBurst(ctx, url, r.rpm); err != nil {
		return err
	}
	ops, stopCount, err := countKVOps(e.conn.NC, budget.BucketDefault)
	if err != nil {
		return err
	}
	defer stopCount()
	procs, err := e.startWorkers(r.budgetCase, q.Stream, q.Subject, q.Consumer, url)
	if err != nil {
		return err
	}
	defer procs.stop()
	return e.measureBudget(ctx, r, srv, ops, procs)
}

// budgetSample is the simulator's counters and the KV operations at a
// time since the workers started.
type budgetSample struct {
	at  time.Duration
	c   simCounts
	ops int64
}

// measureBudget samples the counters every sampleEvery through the
// warm-up and the window, killing a worker halfway through the window
// when the case asks.
func (e *benchEnv) measureBudget(ctx context.Context, r *budgetRun, srv *sim.Server, ops *atomic.Int64, procs *workerProcs) error {
	t0 := time.Now()
	samples := []budgetSample{{c: countsOf(srv.Stats()), ops: ops.Load()}}
	end, killAt := r.warmup+r.window, time.Duration(-1)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for samples[len(samples)-1].at < end {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case err := <-procs.exited:
			return err
		}
		at := time.Since(t0)
		samples = append(samples, budgetSample{at: at, c: countsOf(srv.Stats()), ops: ops.Load()})
		if r.kill && killAt < 0 && at >= r.warmup+r.window/2 {
			procs.kill(0)
			killAt = at
		}
	}
	measureSamples(r, samples, killAt, budget.LeaseDefault)
	return nil
}

// measureSamples fills r from the samples: the window's totals from the
// first sample at the warm-up's end, the busiest minute over them all,
// and with a kill at killAt (>= 0) the survivors' return.
func measureSamples(r *budgetRun, samples []budgetSample, killAt, lease time.Duration) {
	first, last := samples[sampleAt(samples, r.warmup)], samples[len(samples)-1]
	got := last.c.minus(first.c)
	r.calls, r.ok, r.limited, r.ops = got.calls, got.ok, got.limited, last.ops-first.ops
	r.opsRate = rateOf(first, last, func(s budgetSample) int64 { return s.ops })
	r.busiest = busiest(samples, time.Minute, func(s budgetSample) int64 { return s.c.ok })
	r.busiestCalls = busiest(samples, time.Minute, func(s budgetSample) int64 { return s.c.calls })
	r.back = -1
	if killAt >= 0 {
		k := samples[sampleAt(samples, killAt)]
		r.opsRate = rateOf(first, k, func(s budgetSample) int64 { return s.ops })
		r.firstLease, r.back = shareBack(samples, killAt, lease, first.at)
	}
}

// sampleAt is the index of the first sample at or after at (the last
// when none is).
func sampleAt(samples []budgetSample, at time.Duration) int {
	for i, s := range samples {
		if s.at >= at {
			return i
		}
	}
	return len(samples) - 1
}

// rateOf is what count grew by a second from a to b.
func rateOf(a, b budgetSample, count func(budgetSample) int64) float64 {
	if b.at <= a.at {
		return 0
	}
	return float64(count(b)-count(a)) / (b.at - a.at).Seconds()
}

// busiest is the most count grew by between two samples at most w apart.
func busiest(samples []budgetSample, w time.Duration, count func(budgetSample) int64) int64 {
	var best int64
	i := 0
	for j := range samples {
		for samples[j].at-samples[i].at > w {
			i++
		}
		best = max(best, count(samples[j])-count(samples[i]))
	}
	return best
}

// shareBack measures a kill at killAt against the successful calls'
// rate of the 20 seconds before it (from since at the earliest): the
// rate over the first lease after the kill, as a share of it, and how
// long from the kill until the rate over the last backRun was back at
// 95% of it (-1 if never).
func shareBack(samples []budgetSample, killAt, lease, since time.Duration) (firstLease float64, back time.Duration) {
	ok := func(s budgetSample) int64 { return s.c.ok }
	k := sampleAt(samples, killAt)
	rate := rateOf(samples[sampleAt(samples, max(since, killAt-20*time.Second))], samples[k], ok)
	if rate <= 0 {
		return 0, -1
	}
	if samples[len(samples)-1].at >= killAt+lease {
		firstLease = rateOf(samples[k], samples[sampleAt(samples, killAt+lease)], ok) / rate
	}
	for j := k; j < len(samples); j++ {
		if samples[j].at < killAt+backRun {
			continue
		}
		i := sampleAt(samples, samples[j].at-backRun)
		if rateOf(samples[i], samples[j], ok) >= 0.95*rate {
			return firstLease, (samples[j].at - killAt).Round(sampleEvery)
		}
	}
	return firstLease, -1
}

// spendBurst spends the simulator's initial bucket (a minute's worth of
// requests) with calls on the workers' key and model, until one is
// refused.
func spendBurst(ctx context.Context, url string, rpm int) error {
	body := []byte(`{"model":"` + benchModel + `","messages":[{"role":"user","content":"burst"}],"max_tokens":8}`)
	var refused atomic.Bool
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range rpm * 2 {
			if refused.Load() || ctx.Err() != nil {
				return
			}
			next <- struct{}{}
		}
	}()
	for range 64 {
		wg.Go(func() {
			for range next {
				status, err := postSim(ctx, url+"/v1/chat/completions", body)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if status == http.StatusTooManyRequests {
					refused.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("spend the simulator's burst: %w", firstErr)
	}
	if !refused.Load() {
		return errors.New("spend the simulator's burst: no call was refused")
	}
	return nil
}

func postSim(ctx context.Context, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sim-bench")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// countKVOps counts the operations on the budget bucket as the NATS server
// sees them: writes on its $KV subjects, reads on its direct-get API.
func countKVOps(nc *nats.Conn, bucket string) (*atomic.Int64, func(), error) {
	var n atomic.Int64
	count := func(*nats.Msg) { n.Add(1) }
	var subs []*nats.Subscription
	stop := func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	for _, subj := range []string{"$KV." + bucket + ".>", "$JS.API.DIRECT.GET.KV_" + bucket + ".>", "$JS.API.STREAM.MSG.GET.KV_" + bucket} {
		s, err := nc.Subscribe(subj, count)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("count KV operations on %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	if err := nc.Flush(); err != nil {
		stop()
		return nil, nil, err
	}
	return &n, stop, nil
}

// workerProcs are the `worker run` subprocesses of a run of figure 11.
type workerProcs struct {
	cmds   []*exec.Cmd
	killed []*atomic.Bool
	// exited receives an error when a worker not killed exits early.
	exited chan error
	done   []chan struct{}
}

// startWorkers starts bc.workers `worker run` processes sharing the queue
// and the simulated key.
func (e *benchEnv) startWorkers(bc budgetCase, stream, subject, consumer, simURL string) (*workerProcs, error) {
	p := &workerProcs{exited: make(chan error, bc.workers)}
	// A worker's pool opens connections as it needs them: at the rates of
	// this figure two or three each, which keeps 16 workers under
	// Postgres's default 100.
	dsn := e.dsn
	for i := range bc.workers {
		spill := filepath.Join(e.dir, fmt.Sprintf("spill-%s-%d", stream, i))
		cmd := exec.Command(e.workerBin, "run", "--nats-url", e.ns.ClientURL(), "--database-url", dsn,
			"--openai-base-url", simURL+"/v1", "--stream", stream, "--subject", subject, "--consumer", consumer,
			"--metrics-addr", "off", "--log-level", "warn", "--grace", "5s", "--spill-dir", spill,
			"--concurrency", "64", "--rpm", strconv.Itoa(bc.rpm), "--budget", bc.mode)
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sim-bench", "NATS_URL=", "DATABASE_URL=", "FIXPOINT_BUDGET=")
		var stderr tailBuffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		if err := cmd.Start(); err != nil {
			p.stop()
			return nil, fmt.Errorf("start worker %s: %w", e.workerBin, err)
		}
		done := make(chan struct{})
		killed := new(atomic.Bool)
		p.cmds, p.killed, p.done = append(p.cmds, cmd), append(p.killed, killed), append(p.done, done)
		go func() {
			err := cmd.Wait()
			close(done)
			if !killed.Load() {
				p.exited <- fmt.Errorf("worker %d exited early: %v; stderr: %s", i, err, stderr.String())
			}
		}()
	}
	return p, nil
}

// kill ends worker i with SIGKILL, as a crash would.
func (p *workerProcs) kill(i int) {
	p.killed[i].Store(true)
	_ = p.cmds[i].Process.Kill()
}

// stop ends every worker: SIGTERM, then SIGKILL after 30 seconds.
func (p *workerProcs) stop() {
	for i, cmd := range p.cmds {
		p.killed[i].Store(true)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, cmd := range p.cmds {
		select {
		case <-p.done[i]:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done[i]
		}
	}
}

// Figure 11's targets.
const (
	budgetTargetShare   = 0.90  // successful calls, of the budget
	budgetTargetMinute  = 1.02  // busiest 60 seconds, of the budget
	budgetTarget429     = 0.005 // share of calls answered 429
	budgetTargetOpsFlat = 0.25  // KV operations a second: how far apart the two call rates may be
)

// budgetRows turns figure 11's runs into rows of the figures table.
func budgetRows(runs []budgetRun) []benchRow {
	var rows []benchRow
	var base, other *budgetRun
	for i := range runs {
		r := &runs[i]
		if r.err != nil {
			rows = append(rows, benchRow{no: "11", name: "shared budget, " + r.label, measured: "error: " + oneLine(r.err), target: "runs", verdict: "FAIL"})
			continue
		}
		perWindow := float64(r.rpm) * r.window.Seconds() / 60
		share429 := float64(r.limited) / float64(max(r.calls, 1))
		if r.mode == "local" {
			rows = append(rows, benchRow{no: "11", name: r.label + " (the issue's before): successful calls, 429s over " + r.window.String(),
				measured: fmt.Sprintf("%s of the budget; %s of calls answered 429 (%d of %d)", pct(float64(r.ok)/perWindow), pct(share429), r.limited, r.calls),
				target:   "contrast", verdict: "-"})
			continue
		}
		if r.rpm != 600 {
			other = r
		} else if r.workers == other4(runs) {
			base = r
		}
		rows = append(rows,
			benchRow{no: "11", name: fmt.Sprintf("shared budget, %s: successful calls over %s", r.label, r.window),
				measured: fmt.Sprintf("%d = %s of the budget", r.ok, pct(float64(r.ok)/perWindow)), target: ">= 90% of budget",
				verdict: verdict(float64(r.ok) >= budgetTargetShare*perWindow)},
			benchRow{no: "11", name: fmt.Sprintf("busiest 60 s of successful calls (sliding by %s, warm-up included), %s", sampleEvery, r.label),
				measured: fmt.Sprintf("%d = %s of %d (all calls: %d)", r.busiest, pct(float64(r.busiest)/float64(r.rpm)), r.rpm, r.busiestCalls), target: "<= 102% of budget",
				verdict: verdict(float64(r.busiest) <= budgetTargetMinute*float64(r.rpm))},
			benchRow{no: "11", name: "share of calls answered 429, " + r.label,
				measured: fmt.Sprintf("%s (%d of %d)", pct2(share429), r.limited, r.calls), target: "< 0.5%", verdict: verdict(share429 < budgetTarget429)},
			benchRow{no: "11", name: "KV operations on the budget bucket, " + r.label,
				measured: fmt.Sprintf("%.1f/s (%d in %s)", float64(r.ops)/r.window.Seconds(), r.ops, r.window), target: "independent of the call rate", verdict: "-"})
		if r.kill {
			back := "never within the window"
			if r.back >= 0 {
				back = r.back.String()
			}
			rows = append(rows, benchRow{no: "11", name: fmt.Sprintf("a worker killed (SIGKILL) halfway: from the kill until the survivors' successful calls over %s are back at 95%% of the 20 s before; %s", backRun, r.label),
				measured: fmt.Sprintf("%s (the first lease after the kill at %s of the rate before)", back, pct(r.firstLease)),
				target:   "within one lease (" + budget.LeaseDefault.String() + ")", verdict: verdict(r.back >= 0 && r.back <= budget.LeaseDefault)})
		}
	}
	if base != nil && other != nil {
		ratio := other.opsRate / base.opsRate
		rows = append(rows, benchRow{no: "11", name: fmt.Sprintf("KV operations a second, %d workers: at %d RPM over at %d RPM (before the kill)", other.workers, other.rpm, base.rpm),
			measured: fmt.Sprintf("%.1f vs %.1f = %.2fx", other.opsRate, base.opsRate, ratio), target: "1x (within 25%)",
			verdict: verdict(ratio >= 1-budgetTargetOpsFlat && ratio <= 1/(1-budgetTargetOpsFlat))})
	}
	return rows
}

// other4 is the worker count of the run at the other call rate, whose
// 600-RPM twin is the one its KV operations compare with.
func other4(runs []budgetRun) int {
	for _, r := range runs {
		if r.mode == "cluster" && r.rpm != 600 {
			return r.workers
		}
	}
	return 0
}
