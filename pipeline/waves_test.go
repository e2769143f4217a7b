package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// waveSim is a messy model whose provider batches finish quickly, with a
// share of expired and errored requests.
func waveSim(delay time.Duration, expired, errored float64) sim.Config {
	cfg, err := sim.Preset("messy")
	if err != nil {
		panic(err)
	}
	cfg.Seed = 7
	cfg.Batch = sim.BatchConfig{CompletionDelay: delay, ExpiredShare: expired, ErroredShare: errored}
	return cfg
}

// batchClient is a client of provider on the harness simulator.
func (h *harness) batchClient(provider string) pipeline.Completer {
	return h.client(func(c *llm.Config) {
		c.Provider = provider
		if provider == llm.ProviderAnthropic {
			c.BaseURL = h.simURL
		}
	})
}

// waveWorker is a quick worker of provider with batch delivery tuned for
// tests.
func (h *harness) waveWorker(provider string, c pipeline.Completer) pipeline.WorkerConfig {
	cfg := h.workerConfig(c)
	cfg.Providers = map[string]pipeline.Completer{provider: c}
	cfg.Wave = wave.Config{Collect: 150 * time.Millisecond, PollMin: 40 * time.Millisecond, PollMax: 200 * time.Millisecond,
		Idle: 40 * time.Millisecond, Lease: 2 * time.Second, RealtimeBelow: -1, DeadlineMargin: time.Second}
	return cfg
}

// longSystem is a system prompt long enough for every provider's prompt
// cache (over 4,096 tokens, the largest minimum).
var longSystem = strings.Repeat("Read the note carefully; copy names exactly as written and never invent a field. ", 220)

// enqueueBatch enqueues n jobs of batch for batch delivery, with a system
// prompt long enough to be cached.
func (h *harness) enqueueBatch(batch, provider string, n int, deadline time.Duration) {
	h.t.Helper()
	cfg := h.enqueueConfig(batch)
	cfg.System = longSystem
	cfg.Provider, cfg.Delivery, cfg.Deadline, cfg.PromptCache = provider, queue.DeliveryBatch, deadline, true
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		h.t.Fatalf("enqueue: %v", err)
	}
}

// sqlInt runs a query returning one integer on the harness database.
func (h *harness) sqlInt(query string, args ...any) int {
	h.t.Helper()
	conn, err := pgx.Connect(context.Background(), h.dsn)
	if err != nil {
		h.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// checkWaveLedger asserts what every batch-delivery run must leave: each
// job final once with its attempts numbered 1..n, every request of every
// provider batch recorded as exactly one attempt, every paid reply
// recorded, no provider batch left unrecorded, and no open wave.
func (h *harness) checkWaveLedger(batch string, n int) {
	h.t.Helper()
	h.checkWaveLedgerBeside(batch, n, 0, 0)
}

// checkWaveLedgerBeside is checkWaveLedger where other clients of the key
// created foreign batches holding foreignReplies replies.
func (h *harness) checkWaveLedgerBeside(batch string, n int, foreign, foreignReplies int64) {
	h.t.Helper()
	p := h.progress(batch)
	if p.Total != n || p.Queued != 0 {
		h.t.Errorf("batch %s: %d jobs, %d queued; want %d final (%+v)", batch, p.Total, p.Queued, n, p)
	}
	if gaps := h.sqlInt(`SELECT count(*) FROM (SELECT job_id, max(attempt_no) m, count(*) c FROM attempts WHERE job_id LIKE $1 || ':%' GROUP BY job_id) x WHERE m <> c`, batch); gaps != 0 {
		h.t.Errorf("%d jobs whose attempts are not numbered 1..n", gaps)
	}
	if bad := h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = $1 AND status <> 'cancelled' AND attempts <> (SELECT count(*) FROM attempts a WHERE a.job_id = jobs.id AND a.run = jobs.run)`, batch); bad != 0 {
		h.t.Errorf("%d final jobs whose attempts column differs from their attempt rows", bad)
	}
	st := h.sim.srv.Stats().Batch
	inWaves := h.sqlInt(`SELECT count(*) FROM attempts WHERE wave_id IS NOT NULL AND job_id LIKE $1 || ':%'`, batch)
	requests := h.sqlInt(`SELECT coalesce(sum(requests), 0)::int FROM waves WHERE batch = $1 AND provider_batch_id IS NOT NULL AND status <> 'failed'`, batch)
	if inWaves != requests {
		h.t.Errorf("%d attempts from waves, the submitted waves had %d requests: each must be recorded once", inWaves, requests)
	}
	replied := h.sqlInt(`SELECT count(*) FROM attempts WHERE wave_id IS NOT NULL AND class <> 'provider' AND job_id LIKE $1 || ':%'`, batch)
	if int64(replied) != st.Succeeded-foreignReplies {
		h.t.Errorf("%d wave attempts with a reply, the provider answered %d batch requests: every paid reply is recorded once", replied, st.Succeeded)
	}
	if batches := h.sqlInt(`SELECT count(*) FROM waves WHERE provider_batch_id IS NOT NULL`); int64(batches) != st.Created-foreign {
		h.t.Errorf("%d waves recorded a provider batch, the provider created %d: a batch was orphaned or created twice", batches, st.Created)
	}
	if open := h.sqlInt(`SELECT count(*) FROM waves WHERE status NOT IN ('done', 'failed')`); open != 0 {
		h.t.Errorf("%d waves still open", open)
	}
	if basis := h.sqlInt(`SELECT count(*) FROM attempts WHERE wave_id IS NOT NULL AND price_basis <> 'batch'`); basis != 0 {
		h.t.Errorf("%d wave attempts not priced at the batch basis", basis)
	}
	if h.t.Failed() {
		h.t.Logf("worker logs:\n%s", h.logs.tail(60))
	}
}

// frozenWorker is a worker frozen at a point of the wave driver, holding
// whatever it holds (its lease included), until released to die there.
type frozenWorker struct {
	rw      *runningWorker
	release chan struct{}
	mu      sync.Mutex
	died    map[string][]int64 // by point, the waves whose goroutine died there
}

// diedAt returns the waves whose goroutine died at point: for
// "upload_done", the waves A uploaded a file for and never recorded it.
func (a *frozenWorker) diedAt(point string) []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.died[point])
}

// startFrozen starts a worker of cfg that freezes the first time it
// reaches point, waits until it has, and stops it pulling.
func (h *harness) startFrozen(cfg pipeline.WorkerConfig, point string) *frozenWorker {
	h.t.Helper()
	return h.startFrozenWaves(cfg, point, 1)
}

// startFrozenWaves is startFrozen where the worker freezes only when the
// waves-th of its waves reaches point: the waves there before it wait,
// alive, for it.
func (h *harness) startFrozenWaves(cfg pipeline.WorkerConfig, point string, waves int) *frozenWorker {
	h.t.Helper()
	hit := make(chan struct{})
	a := &frozenWorker{release: make(chan struct{}), died: map[string][]int64{}}
	arrived, frozen := 0, false
	pipeline.SetWaveHook(&cfg, func(p string, waveID int64) {
		a.mu.Lock()
		fired := false
		switch {
		case frozen:
		case p == point:
			arrived++
			if arrived == waves {
				frozen, fired = true, true
			}
		default:
			a.mu.Unlock()
			return
		}
		a.died[p] = append(a.died[p], waveID)
		a.mu.Unlock()
		if fired {
			close(hit)
		}
		// A process killed at the point stops every goroutine, not only
		// the one at the point: the others stop at the next point they
		// reach, so none of A's waves acts after B has drained, when no
		// worker is left to reconcile what it did.
		<-a.release
		runtime.Goexit() // killed: nothing after this point runs
	})
	a.rw = h.startWorker(cfg, nil, nil)
	select {
	case <-hit:
	case <-time.After(60 * time.Second):
		h.t.Fatalf("worker A never reached %s with %d waves\n%s", point, waves, h.logs.tail(40))
	}
	a.rw.cancel() // A pulls nothing more
	return a
}

// drainThenKill runs a draining worker of cfg to its end, then lets the
// frozen worker die.
func (h *harness) drainThenKill(cfg pipeline.WorkerConfig, a *frozenWorker) {
	h.t.Helper()
	cfg.Drain = true
	if err := h.startWorker(cfg, nil, nil).wait(h.t, 90*time.Second); err != nil {
		h.t.Fatalf("worker B: %v", err)
	}
	close(a.release)
	if err := a.rw.wait(h.t, 30*time.Second); err != nil {
		h.t.Fatalf("worker A: %v", err)
	}
}

// A batch in batch delivery converges on both providers: first wave, repair
// waves with the exact feedback, expired and errored requests retried, every
// attempt recorded once at batch prices, and the worker drains only when
// every wave is done.
func TestBatchDeliveryConverges(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			const n = 60
			h := newHarness(t, harnessConfig{Sim: waveSim(100*time.Millisecond, 0.05, 0.05)})
			h.enqueueBatch("wb", provider, n, time.Hour)
			cfg := h.waveWorker(provider, h.batchClient(provider))
			cfg.Drain = true
			rw := h.startWorker(cfg, nil, nil)
			if err := rw.wait(t, 90*time.Second); err != nil {
				t.Fatalf("worker: %v", err)
			}
			h.checkWaveLedger("wb", n)
			// The worker's counters count what the waves did, as the
			// ledger does (they counted only the last realtime round).
			m := cfg.Metrics
			if got := counted(t, m, "fixpoint_jobs_total", "", ""); got != float64(n) {
				t.Errorf("fixpoint_jobs_total %v, want the %d jobs finished", got, n)
			}
			if got, want := counted(t, m, "fixpoint_attempts_total", "", ""), h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wb:%'`); got != float64(want) {
				t.Errorf("fixpoint_attempts_total %v, the ledger has %d attempts", got, want)
			}
			if got, want := counted(t, m, "fixpoint_attempts_total", "class", "valid"), h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wb:%' AND valid`); got != float64(want) {
				t.Errorf("fixpoint_attempts_total{class=valid} %v, the ledger has %d valid attempts", got, want)
			}
			if got, want := counted(t, m, "fixpoint_tokens_total", "kind", "output"), h.sqlInt(`SELECT coalesce(sum(tokens_out), 0)::int FROM attempts WHERE job_id LIKE 'wb:%'`); got != float64(want) {
				t.Errorf("fixpoint_tokens_total{kind=output} %v, the ledger's attempts have %d", got, want)
			}
			p := h.progress("wb")
			if p.Valid < n*9/10 {
				t.Errorf("%d of %d valid, want at least 90%% (%+v)", p.Valid, n, p)
			}
			waves := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wb'`)
			if waves < 2 {
				t.Errorf("%d waves, want repair waves after the first", waves)
			}
			// Repairs in later waves carried the feedback of the attempt
			// before them.
			if fb := h.sqlInt(`SELECT count(*) FROM attempts a JOIN attempts b ON b.job_id = a.job_id AND b.attempt_no = a.attempt_no + 1
				WHERE a.job_id LIKE 'wb:%' AND a.class NOT IN ('provider') AND a.valid = false AND a.feedback = ''`); fb != 0 {
				t.Errorf("%d failed attempts followed by another without feedback recorded", fb)
			}
			if classes := h.sqlInt(`SELECT count(DISTINCT provider_class) FROM attempts WHERE job_id LIKE 'wb:%' AND provider_class IN ('expired', 'server')`); classes != 2 {
				t.Errorf("expired and errored requests: %d of the two classes recorded", classes)
			}
			st := h.sim.srv.Stats()
			if st.Replies != 0 && h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wb:%' AND price_basis = 'realtime' AND class <> 'provider'`) != int(st.Replies) {
				t.Errorf("realtime replies %d not each recorded at the realtime basis", st.Replies)
			}
			if st.Cache.Hits == 0 {
				t.Errorf("no prompt-cache hit in %d batch requests with a cache key", st.Batch.Succeeded)
			}
		})
	}
}

// A provider refusing the key at a wave's upload stops the worker (exit 1)
// and leaves the wave as it was: not failed, its jobs not moved to realtime
// at full price. A worker with the right key then runs it at batch prices.
func TestBatchDeliveryWrongKey(t *testing.T) {
	t.Parallel()
	const n = 20
	cfg := waveSim(50*time.Millisecond, 0, 0)
	cfg.APIKey = "sk-right"
	h := newHarness(t, harnessConfig{Sim: cfg})
	h.enqueueBatch("wk", llm.ProviderOpenAI, n, time.Hour)
	wrong := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	wrong.Drain = true
	err := h.startWorker(wrong, nil, nil).wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "openai refused the API key") {
		t.Fatalf("worker with a wrong key: %v; want it stopped, naming the refused key", err)
	}
	if failed := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wk' AND status = 'failed'`); failed != 0 {
		t.Errorf("%d waves failed by a refused key; want them left for a good one", failed)
	}
	if p := h.progress("wk"); p.Queued != n {
		t.Fatalf("after the refused key: %+v; want all %d queued", p, n)
	}
	right := h.waveWorker(llm.ProviderOpenAI, h.client(func(c *llm.Config) { c.APIKey = "sk-right" }))
	right.Drain = true
	if err := h.startWorker(right, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker with the right key: %v", err)
	}
	h.checkWaveLedger("wk", n)
	if realtime := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wk:%' AND price_basis = 'realtime'`); realtime != 0 {
		t.Errorf("%d attempts at realtime prices; want every job in the batch's waves", realtime)
	}
	if p := h.progress("wk"); p.Failed != 0 || p.Valid == 0 {
		t.Errorf("%+v; want no job failed by the refused key", p)
	}
}

// Killing the worker at each point of a wave's life and starting another
// finishes the batch with every job final once, every request of every
// provider batch recorded once, and no provider batch orphaned or created
// twice.
func TestBatchDeliveryKillAtEachPoint(t *testing.T) {
	t.Parallel()
	points := []struct {
		provider, point string
		waves           int // A's waves at the point when it dies; 0 means 1
	}{
		{llm.ProviderOpenAI, "recorded", 0},
		{llm.ProviderOpenAI, "upload", 0},
		{llm.ProviderOpenAI, "upload_done", 0},
		// Two waves uploaded and not recorded: each leaves a file unused.
		{llm.ProviderOpenAI, "upload_done", 2},
		{llm.ProviderOpenAI, "uploaded", 0},
		{llm.ProviderOpenAI, "created", 0},
		{llm.ProviderAnthropic, "created", 0},
		{llm.ProviderOpenAI, "ended", 0},
		{llm.ProviderOpenAI, "download", 0},
		{llm.ProviderOpenAI, "outcomes", 0},
		{llm.ProviderAnthropic, "recorded_results", 0},
		{llm.ProviderOpenAI, "repair_recorded", 0},
		{llm.ProviderOpenAI, "published", 0},
	}
	for _, pt := range points {
		name := pt.provider + "/" + pt.point
		if pt.waves > 1 {
			name += fmt.Sprintf("/%d_waves", pt.waves)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const n = 30
			h := newHarness(t, harnessConfig{Sim: waveSim(50*time.Millisecond, 0, 0)})
			h.enqueueBatch("wk", pt.provider, n, time.Hour)
			client := h.batchClient(pt.provider)

			// Worker A freezes at the point (holding whatever it holds,
			// its lease included) and dies there once B is done.
			cfgA := h.waveWorker(pt.provider, client)
			if pt.point == "published" {
				cfgA.Wave.RealtimeBelow = 1000 // every repair goes realtime
			}
			waves := max(pt.waves, 1)
			if waves > 1 {
				cfgA.Wave.MaxRequests = n / waves // A's jobs make at least that many waves
			}
			a := h.startFrozenWaves(cfgA, pt.point, waves)
			cfgB := h.waveWorker(pt.provider, client)
			if pt.point == "published" {
				cfgB.Wave.RealtimeBelow = 1000
			}
			h.drainThenKill(cfgB, a)
			h.checkWaveLedger("wk", n)
			if pt.point == "upload_done" {
				h.checkUnusedFiles(a.diedAt("upload_done"), waves)
			}
		})
	}
}

// checkUnusedFiles asserts what A's death between uploads and their
// records leaves: the unrecorded waves, at least want of them, each
// uploaded again by B with a warning of the unused file, and no other file
// uploaded beyond one per wave. Each of A's waves then between its upload
// and its record left a file: more than one when A was uploading several
// waves at once (a loaded machine slows A's pulls past Collect, and its
// jobs go into more than one wave).
func (h *harness) checkUnusedFiles(unrecorded []int64, want int) {
	h.t.Helper()
	if len(unrecorded) < want {
		h.t.Fatalf("A died after uploading %d waves (%v), want at least %d", len(unrecorded), unrecorded, want)
	}
	logs := h.logs.String()
	for _, id := range unrecorded {
		// The file A uploaded and did not record is not orphaned
		// silently.
		warned := false
		for line := range strings.Lines(logs) {
			if strings.Contains(line, "an earlier upload may have left an unused input file") && strings.Contains(line, fmt.Sprintf(" wave=%d ", id)) {
				warned = true
			}
		}
		if !warned {
			h.t.Errorf("the re-upload of wave %d logged no warning of the unused file", id)
		}
	}
	if files, waves := h.sim.srv.Stats().Batch.FilesUploaded, h.sqlInt(`SELECT count(*) FROM waves WHERE input_file_id IS NOT NULL`); files != int64(waves+len(unrecorded)) {
		h.t.Errorf("%d files uploaded for %d waves, want one more for each wave A uploaded and did not record (%v)", files, waves, unrecorded)
	}
}

// A deadline the provider batch cannot meet: the wave is cancelled near it,
// the replies it had are recorded, and the rest runs realtime.
func TestBatchDeliveryDeadlineFallsBackToRealtime(t *testing.T) {
	t.Parallel()
	t.Run("clean", func(t *testing.T) { t.Parallel(); testDeadlineFallsBack(t, "wd", false) })
	// A transient failure while reading the cancelled wave's results
	// (a loaded machine, a dropped connection) is retried: the wave still
	// says it was cancelled for the deadline, not the retry's error.
	t.Run("results read fails once", func(t *testing.T) { t.Parallel(); testDeadlineFallsBack(t, "wf", true) })
}

// flakyResults is a provider client whose first read of a batch's results
// fails as a dropped connection would.
type flakyResults struct {
	*llm.Client
	failed atomic.Bool
}

func (c *flakyResults) BatchResults(ctx context.Context, st llm.BatchStatus, request func(string) (fixpoint.Request, bool), fn func(llm.BatchResult) error) error {
	if c.failed.CompareAndSwap(false, true) {
		return errors.New("read batch results: connection reset by peer")
	}
	return c.Client.BatchResults(ctx, st, request, fn)
}

func testDeadlineFallsBack(t *testing.T, batch string, flaky bool) {
	const n = 20
	h := newHarness(t, harnessConfig{Sim: waveSim(time.Hour, 0, 0)}) // the batch would take an hour
	// A wave starts only until the margin before the deadline: 10 s for
	// the worker to start and record it (2 s were not enough on a loaded
	// machine, where no wave started and every job ran realtime at once).
	h.enqueueBatch(batch, llm.ProviderOpenAI, n, 15*time.Second)
	client := h.batchClient(llm.ProviderOpenAI)
	if flaky {
		client = &flakyResults{Client: client.(*llm.Client)}
	}
	cfg := h.waveWorker(llm.ProviderOpenAI, client)
	cfg.Drain = true
	cfg.Wave.DeadlineMargin = 5 * time.Second
	rw := h.startWorker(cfg, nil, nil)
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	h.checkWaveLedger(batch, n)
	if f, ok := client.(*flakyResults); ok && !f.failed.Load() {
		t.Fatal("the results were never read")
	}
	// The jobs are in one wave, or two when a slow machine collected them
	// past the first wave's collection window: each is cancelled.
	if cancelled, waves := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = '`+batch+`' AND error = 'cancelled: the deadline is near'`),
		h.sqlInt(`SELECT count(*) FROM waves WHERE batch = '`+batch+`'`); cancelled == 0 || cancelled != waves {
		t.Errorf("%d of %d waves cancelled for the deadline, want every one", cancelled, waves)
	}
	c := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE '` + batch + `:%' AND provider_class = 'cancelled'`)
	if c == 0 {
		t.Errorf("no attempt of class cancelled recorded for the requests the cancel stopped")
	}
	// The waves count them as cancelled (OpenAI's own counts say failed).
	if w := h.sqlInt(`SELECT coalesce(sum(cancelled), 0)::int FROM waves WHERE batch = '` + batch + `'`); w != c {
		t.Errorf("the waves count %d requests cancelled, the ledger has %d attempts the cancel stopped", w, c)
	}
	if rt := h.sqlInt(`SELECT count(DISTINCT job_id) FROM attempts WHERE job_id LIKE '` + batch + `:%' AND price_basis = 'realtime'`); rt != n {
		t.Errorf("%d jobs went on realtime, want all %d", rt, n)
	}
}

// enqueue cancel during a wave cancels the provider batch; the replies it
// had are still recorded, kept apart as the cancel's calls (they went into
// the cancelled jobs' attempts, whose rows said 0 attempts and $0), no job
// runs again, and the worker drains.
func TestBatchDeliveryCancel(t *testing.T) {
	t.Parallel()
	const n = 20
	h := newHarness(t, harnessConfig{Sim: waveSim(time.Hour, 0, 0)})
	h.enqueueBatch("wc", llm.ProviderAnthropic, n, 24*time.Hour)
	cfg := h.waveWorker(llm.ProviderAnthropic, h.batchClient(llm.ProviderAnthropic))
	cfg.Drain = true
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 30*time.Second, "a submitted wave", func() bool {
		return h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wc' AND status = 'submitted'`) >= 1
	})
	if _, err := h.st.Cancel(context.Background(), "wc"); err != nil {
		t.Fatal(err)
	}
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	p := h.progress("wc")
	if p.Total != n || p.Queued != 0 {
		t.Errorf("progress %+v, want every job final", p)
	}
	if c := h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = 'wc' AND status = 'cancelled'`); c != n {
		t.Errorf("%d jobs cancelled, want %d", c, n)
	}
	st := h.sim.srv.Stats().Batch
	if st.Cancelled == 0 {
		t.Errorf("the provider batch was not cancelled: %+v", st)
	}
	if rec := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'wc:%' AND reason = 'cancelled' AND class <> 'provider'`); int64(rec) != st.Succeeded {
		t.Errorf("%d replies kept as the cancel's, the provider answered %d", rec, st.Succeeded)
	}
	if a := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wc:%'`); a != 0 {
		t.Errorf("%d attempts of cancelled jobs, want their calls kept apart", a)
	}
	// One wave, or two on a slow machine (see above): each is done.
	if done, waves := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wc' AND status = 'done'`),
		h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wc'`); done == 0 || done != waves {
		t.Errorf("%d of %d waves done, want every one", done, waves)
	}
	if calls := h.sim.srv.Stats().Replies; calls != 0 {
		t.Errorf("%d realtime calls after cancel, want none", calls)
	}
}

// enqueue cancel of a batch whose provider batch has already ended: the
// provider refuses to cancel it (400, "Cannot cancel a batch with status
// 'completed'"), and the worker reads its results like any ended batch's,
// keeping them as the cancel's calls. It retried the cancel at every poll,
// the wave stayed cancelling and the paid replies were never read.
func TestBatchDeliveryCancelAfterTheBatchEnded(t *testing.T) {
	t.Parallel()
	const n = 10
	h := newHarness(t, harnessConfig{Sim: waveSim(0, 0, 0)})
	h.enqueueBatch("we", llm.ProviderOpenAI, n, 24*time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	// One wave of every job, and the cancel before its first poll.
	cfg.Wave.Collect, cfg.Wave.PollMin, cfg.Wave.PollMax = time.Second, 3*time.Second, 3*time.Second
	cfg.Concurrency = 4 * n
	cfg.Drain = true
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 30*time.Second, "a submitted wave", func() bool {
		return h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'we' AND status = 'submitted'`) == 1
	})
	time.Sleep(2 * time.Second) // its requests run (before the worker's first poll, at 3 s)
	if _, err := h.st.Cancel(context.Background(), "we"); err != nil {
		t.Fatal(err)
	}
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if open := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'we' AND status <> 'done'`); open != 0 {
		t.Errorf("%d waves not done, want every one read", open)
	}
	st := h.sim.srv.Stats().Batch
	if st.Cancelled != 0 || st.Succeeded == 0 {
		t.Fatalf("the provider batch: %+v; want it ended before the cancel, nothing cancelled", st)
	}
	if kept := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'we:%' AND reason = 'cancelled'`); int64(kept) != st.Succeeded+st.Errored+st.Expired {
		t.Errorf("%d replies kept as the cancel's, the provider's batch had %+v", kept, st)
	}
}

// enqueue cancel while a worker uploads a wave, or after the provider
// created its batch but before the worker recorded it: the wave stays
// cancelling (the worker's record of its upload or submission does not
// undo the cancel), the provider batch, if made, is cancelled, and the
// draining worker exits. Before, a wave submitted just after the cancel
// ran on at the provider and kept the worker waiting for it.
func TestBatchDeliveryCancelWhileSubmitting(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"upload", "created"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			const n = 10
			h := newHarness(t, harnessConfig{Sim: waveSim(time.Hour, 0, 0)}) // the batch would take an hour
			h.enqueueBatch("wx", llm.ProviderOpenAI, n, 24*time.Hour)
			cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
			cfg.Drain = true
			var once sync.Once
			pipeline.SetWaveHook(&cfg, func(p string, _ int64) {
				if p == point {
					once.Do(func() {
						if _, err := h.st.Cancel(context.Background(), "wx"); err != nil {
							t.Error(err)
						}
					})
				}
			})
			if err := h.startWorker(cfg, nil, nil).wait(t, 30*time.Second); err != nil {
				t.Fatalf("worker: %v", err)
			}
			if c := h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = 'wx' AND status = 'cancelled'`); c != n {
				t.Errorf("%d jobs cancelled, want %d", c, n)
			}
			if open := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wx' AND status NOT IN ('done', 'failed')`); open != 0 {
				t.Errorf("%d waves still open", open)
			}
			st := h.sim.srv.Stats().Batch
			if point == "created" && st.Cancelled == 0 {
				t.Errorf("the provider batch created before the cancel was not cancelled: %+v", st)
			}
			if calls := h.sim.srv.Stats().Replies; calls != 0 {
				t.Errorf("%d realtime calls after cancel, want none", calls)
			}
		})
	}
}

// A provider batch the provider fails as a whole (OpenAI's enqueued-token
// limit) ran nothing and cost nothing: no attempt is recorded for it, the
// wave is failed with the provider's reason, and its jobs finish realtime.
func TestBatchDeliveryFailedBatchRunsRealtime(t *testing.T) {
	t.Parallel()
	const n = 12
	simCfg := waveSim(50*time.Millisecond, 0, 0)
	var failedOnce sync.Once
	simCfg.Script = func(_ int, r *http.Request) *sim.ScriptedReply {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/batches/")
		if r.Method != http.MethodGet || !ok || strings.Contains(id, "/") {
			return nil
		}
		var reply *sim.ScriptedReply
		failedOnce.Do(func() {
			body := fmt.Sprintf(`{"id":%q,"object":"batch","endpoint":"/v1/chat/completions","errors":{"object":"list","data":[{"code":"token_limit_exceeded","message":"Enqueued token limit reached for sim-model in organization org-x. Limit: 90,000 enqueued tokens."}]},"input_file_id":"file-x","completion_window":"24h","status":"failed","created_at":1733000000,"failed_at":1733000001,"request_counts":{"total":0,"completed":0,"failed":0},"metadata":{}}`, id)
			reply = &sim.ScriptedReply{Status: 200, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
		})
		return reply
	}
	h := newHarness(t, harnessConfig{Sim: simCfg})
	h.enqueueBatch("wf", llm.ProviderOpenAI, n, time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	cfg.Drain = true
	rw := h.startWorker(cfg, nil, nil)
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	h.checkWaveLedger("wf", n)
	if failed := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wf' AND status = 'failed' AND error LIKE '%Enqueued token limit%'`); failed != 1 {
		t.Errorf("%d waves failed with the provider's reason, want 1", failed)
	}
	// (Under load a job's message redelivered before its wave was recorded
	// may arrive after the failed wave released it, and go into a wave of
	// its own: the failed one still ran nothing.)
	if inWaves := h.sqlInt(`SELECT count(*) FROM attempts a JOIN waves w ON w.id = a.wave_id WHERE a.job_id LIKE 'wf:%' AND w.status = 'failed'`); inWaves != 0 {
		t.Errorf("%d attempts recorded for a batch that ran nothing", inWaves)
	}
	if valid := h.progress("wf").Valid; valid < n*3/4 {
		t.Errorf("%d of %d valid after the realtime fallback", valid, n)
	}
}

// A provider batch that answers 404 for good (deleted, or created under
// another key or organization) is given up after the grace: the wave is
// failed saying so and its jobs finish realtime, so a draining worker
// exits. It was polled for ever, through the deadline and enqueue cancel.
func TestBatchDeliveryBatchNotFound(t *testing.T) {
	t.Parallel()
	const n = 8
	simCfg := waveSim(50*time.Millisecond, 0, 0)
	simCfg.Script = func(_ int, r *http.Request) *sim.ScriptedReply {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/batches/")
		if r.Method != http.MethodGet || !ok || strings.Contains(id, "/") {
			return nil
		}
		body := fmt.Sprintf(`{"error":{"message":"No batch found with id '%s'.","type":"invalid_request_error","param":null,"code":null}}`, id)
		return &sim.ScriptedReply{Status: 404, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
	}
	h := newHarness(t, harnessConfig{Sim: simCfg})
	h.enqueueBatch("wnf", llm.ProviderOpenAI, n, time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	cfg.Wave.NotFoundGrace = 500 * time.Millisecond
	cfg.Drain = true
	rw := h.startWorker(cfg, nil, nil)
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	// Every wave is failed saying so (under load a stale redelivery may
	// put a job in a second wave, which the provider answers alike).
	if failed, other := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wnf' AND status = 'failed' AND error LIKE '%404%'`),
		h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wnf' AND NOT (status = 'failed' AND error LIKE '%404%')`); failed < 1 || other != 0 {
		t.Errorf("%d waves failed saying the provider batch is not found, %d others; want every wave failed so", failed, other)
	}
	if open := h.sqlInt(`SELECT count(*) FROM waves WHERE status NOT IN ('done', 'failed')`); open != 0 {
		t.Errorf("%d waves still open", open)
	}
	p := h.progress("wnf")
	if p.Queued != 0 || p.Valid < n*3/4 {
		t.Errorf("after the realtime fallback: %+v, want every job final and most valid", p)
	}
	if realtime := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wnf:%' AND price_basis = 'realtime'`); realtime < n {
		t.Errorf("%d realtime attempts, want every job run realtime", realtime)
	}
}

// The first 404 of a provider batch is kept in the ledger: workers that
// restart more often than the grace (a crash loop, a rolling deploy, cron)
// still give the wave up once the grace has passed since it. Each restart
// began the grace again, and a batch gone for 15 minutes kept its jobs.
func TestBatchDeliveryBatchNotFoundAcrossRestarts(t *testing.T) {
	t.Parallel()
	simCfg := waveSim(50*time.Millisecond, 0, 0)
	simCfg.Script = func(_ int, r *http.Request) *sim.ScriptedReply {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/batches/")
		if r.Method != http.MethodGet || !ok || strings.Contains(id, "/") {
			return nil
		}
		return &sim.ScriptedReply{Status: 404, Body: []byte(`{"error":{"message":"No batch found.","type":"invalid_request_error"}}`),
			Header: http.Header{"Content-Type": {"application/json"}}}
	}
	h := newHarness(t, harnessConfig{Sim: simCfg})
	h.enqueueBatch("wnr", llm.ProviderOpenAI, 6, time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	cfg.Wave.NotFoundGrace = 3 * time.Second
	start := time.Now()
	for i := 0; ; i++ {
		rw := h.startWorker(cfg, nil, nil)
		time.Sleep(time.Second)
		rw.stop(t, 20*time.Second)
		if h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wnr' AND status = 'failed' AND error LIKE '%404%'`) > 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("after %d restarts a second apart, the wave is not given up (grace 3 s)\n%s", i+1, h.logs.tail(30))
		}
	}
	cfg.Drain = true
	if err := h.startWorker(cfg, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("draining worker: %v", err)
	}
	if p := h.progress("wnr"); p.Queued != 0 {
		t.Errorf("%+v: want every job final", p)
	}
}

// A requeued batch-delivery batch runs in waves again, with a deadline of
// its own run: the first run's may have passed.
func TestBatchDeliveryRequeueHasItsOwnDeadline(t *testing.T) {
	t.Parallel()
	const n = 6
	// Long enough for each run to make its waves on a loaded machine (3 s
	// was not: a requeue's own deadline was 1 s away when it returned).
	const deadline = time.Minute
	h := newHarness(t, harnessConfig{Sim: waveSim(20*time.Millisecond, 0, 0)})
	h.enqueueBatch("wr", llm.ProviderAnthropic, n, deadline)
	// A spend cap cannot hold a provider batch's requests: refused.
	five := 5.0
	if _, err := enqueue.SetCap(h.ctx, h.st, "wr", store.Cap{MaxCostUSD: &five}); !errors.Is(err, enqueue.ErrBadConfig) {
		t.Fatalf("cap on a batch-delivery batch: %v, want ErrBadConfig", err)
	}
	cfg := h.waveWorker(llm.ProviderAnthropic, h.batchClient(llm.ProviderAnthropic))
	cfg.Wave.DeadlineMargin = time.Millisecond
	cfg.Drain = true
	if err := h.startWorker(cfg, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	// The first run's deadline passes: its recorded deadline is moved
	// into the past, as a minute's wait would.
	if moved := h.sqlInt(`WITH u AS (UPDATE batches SET settings = jsonb_set(settings, '{deadline_at}', to_jsonb(extract(epoch FROM now())::bigint - 1))
		WHERE name = 'wr' AND settings ? 'deadline_at' RETURNING 1) SELECT count(*) FROM u`); moved != 1 {
		t.Fatalf("moved the deadline of %d batches, want 1", moved)
	}
	// To a provider without a batch API, the requeue says the new run is
	// realtime (and at the realtime price).
	dry, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "wr", Statuses: []fixpoint.Status{"valid", "invalid", "failed"},
		Provider: llm.ProviderOllama, DryRun: true, Queue: h.q})
	if err != nil || dry.Settings.Delivery == queue.DeliveryBatch || len(dry.Warnings) != 1 || !strings.Contains(dry.Warnings[0], "ollama has no batch API") {
		t.Errorf("dry requeue to ollama: %+v %v; want realtime with a warning", dry, err)
	}
	requeued := time.Now()
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "wr", Statuses: []fixpoint.Status{"valid", "invalid", "failed"}, Queue: h.q})
	if err != nil {
		t.Fatal(err)
	}
	// Its own deadline: the batch's duration from the requeue (not from
	// when it returned, which a loaded machine delays).
	if rep.Settings.Delivery != queue.DeliveryBatch || rep.Settings.DeadlineAt < requeued.Add(deadline).Unix() {
		t.Fatalf("requeued settings %+v: want batch delivery with a deadline %s from the requeue (%d)",
			rep.Settings, deadline, requeued.Add(deadline).Unix())
	}
	if err := h.startWorker(cfg, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if waves := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wr' AND run = 2`); waves == 0 {
		t.Errorf("run 2 made no wave: it ran realtime on the first run's passed deadline")
	}
	if p := h.progress("wr"); p.Queued != 0 {
		t.Errorf("progress %+v", p)
	}
}

// Three workers share one batch-delivery batch: each collects what it
// pulls, and every wave is driven by one of them at a time; every job ends
// final once and every request is recorded once.
func TestBatchDeliveryThreeWorkers(t *testing.T) {
	t.Parallel()
	const n = 90
	h := newHarness(t, harnessConfig{Sim: waveSim(80*time.Millisecond, 0.05, 0.05)})
	h.enqueueBatch("w3", llm.ProviderOpenAI, n, time.Hour)
	client := h.batchClient(llm.ProviderOpenAI)
	var ws []*runningWorker
	for range 3 {
		cfg := h.waveWorker(llm.ProviderOpenAI, client)
		cfg.Drain = true
		cfg.Concurrency = 2 // small pulls, so each worker collects a share
		ws = append(ws, h.startWorker(cfg, nil, nil))
	}
	for _, w := range ws {
		if err := w.wait(t, 90*time.Second); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	h.checkWaveLedger("w3", n)
}

// A job a wave handed on to run realtime, whose message then lost the
// wave's mark (the stream was lost and enqueue --resume republished it),
// goes on realtime from its recorded attempts. Before, it was collected
// into a new wave whose request took attempt number 1 again: the wave
// could never be recorded, the "ledger unavailable" retry never ended,
// and a --drain worker never returned.
func TestBatchDeliveryResumeAfterTheWaveHandedJobsOn(t *testing.T) {
	t.Parallel()
	const n = 12
	var blockRealtime atomic.Bool
	blockRealtime.Store(true)
	cfgSim := waveSim(20*time.Millisecond, 0, 0) // messy: many first replies need a repair
	cfgSim.Script = func(_ int, r *http.Request) *sim.ScriptedReply {
		if blockRealtime.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return &sim.ScriptedReply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}}
		}
		return nil
	}
	h := newHarness(t, harnessConfig{Sim: cfgSim})
	h.enqueueBatch("wl", llm.ProviderOpenAI, n, 24*time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	cfg.Wave.RealtimeBelow = 1000 // every repair runs realtime, where the provider refuses it for an hour
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 30*time.Second, "repairs handed back for an hour", func() bool {
		return h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = 'wl' AND status = 'queued' AND attempts > 0 AND wave_id IS NULL`) > 0 &&
			h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'wl' AND status <> 'done'`) == 0
	})
	rw.stop(t, 20*time.Second)
	handedOn := h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = 'wl' AND status = 'queued' AND attempts > 0`)
	s, err := h.js.Stream(h.ctx, h.q.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(h.ctx); err != nil { // the stream's data is lost
		t.Fatal(err)
	}
	prog, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "wl", Resume: true, Queue: h.q}, nil)
	if err != nil || prog.Republished != handedOn {
		t.Fatalf("resume: %+v %v; want the %d queued jobs republished", prog, err, handedOn)
	}
	blockRealtime.Store(false)
	cfg.Drain = true
	if err := h.startWorker(cfg, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if p := h.progress("wl"); p.Queued != 0 || p.Valid+p.Invalid != n {
		t.Errorf("progress %+v, want every job valid or invalid", p)
	}
	// Each job's attempts are numbered on from its wave's, one row each.
	if gaps := h.sqlInt(`SELECT count(*) FROM jobs j WHERE batch = 'wl' AND j.attempts <> (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.run = j.run)`); gaps != 0 {
		t.Errorf("%d jobs whose attempts column differs from their attempt rows", gaps)
	}
	if again := h.sqlInt(`SELECT count(*) FROM (SELECT r.job_id FROM wave_requests r JOIN waves w ON w.id = r.wave_id
		WHERE w.batch = 'wl' AND r.attempt_no = 1 GROUP BY r.job_id HAVING count(*) > 1) twice`); again != 0 {
		t.Errorf("a job was collected into a wave twice for its first attempt")
	}
}

// A wave whose holder died around the create is found again among the
// key's batches and never taken for another's, nor created twice:
//   - Anthropic, never created, beside another client's batch of its size:
//     that batch was adopted (its replies recorded as expired, and a
//     cancel of the batch cancelled the other client's);
//   - Anthropic, created, beside another of its size: neither was adopted
//     and the wave was created again (its first batch's replies paid and
//     never recorded);
//   - OpenAI, created, then 120 more batches on the key: only the newest
//     100 were read, and the wave was created again.
func TestBatchDeliveryReconcileAmongLookalikes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, provider, point string
		foreign               int
	}{
		{"anthropic never created", llm.ProviderAnthropic, "create", 1},
		{"anthropic created", llm.ProviderAnthropic, "created", 1},
		{"openai created", llm.ProviderOpenAI, "created", 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 12
			h := newHarness(t, harnessConfig{Sim: waveSim(50*time.Millisecond, 0, 0)})
			h.enqueueBatch("lk", tc.provider, n, time.Hour)
			client := h.batchClient(tc.provider)
			a := h.startFrozen(h.waveWorker(tc.provider, client), tc.point)
			size := h.sqlInt(`SELECT requests FROM waves ORDER BY id LIMIT 1`)

			// Another client of the key makes batches of the wave's size.
			other := client.(*llm.Client)
			for f := range tc.foreign {
				var items []llm.BatchItem
				for i := range size {
					items = append(items, llm.BatchItem{CustomID: fmt.Sprintf("other-%d-%d", f, i), Request: fixpoint.Request{Model: "sim-model",
						Messages: []fixpoint.Message{{Role: "user", Content: "hello"}}, Mode: fixpoint.ModePrompt, User: fmt.Sprintf("o%d-%d", f, i)}})
				}
				file := ""
				if tc.provider == llm.ProviderOpenAI {
					var err error
					if file, err = other.UploadBatchFile(h.ctx, items); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := other.CreateBatch(h.ctx, file, items, map[string]string{"client": "other"}); err != nil {
					t.Fatal(err)
				}
			}

			h.drainThenKill(h.waveWorker(tc.provider, client), a)
			h.checkWaveLedgerBeside("lk", n, int64(tc.foreign), int64(tc.foreign*size))
			if strings.Contains(h.logs.String(), "a request the wave does not have") {
				t.Errorf("a wave read another client's batch:\n%s", h.logs.tail(40))
			}
		})
	}
}

// A create slower than the wave's lease, or than the client's timeout, is
// still one provider batch. Under load a submit outlasted its lease: the
// worker's own poll loop (or another worker) took the wave over, found no
// batch yet and created a second, and one of the two was orphaned and paid
// for. And a create whose answer the client gave up on was tried again
// (reconciled first) before the provider had made it.
func TestBatchDeliverySlowCreateMakesOneBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		provider string
		timeout  bool // the create outlasts the client's timeout, not only the lease
	}{
		{"openai/past_the_lease", llm.ProviderOpenAI, false},
		{"anthropic/past_the_lease", llm.ProviderAnthropic, false},
		{"openai/past_the_client_timeout", llm.ProviderOpenAI, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 20
			h := newHarness(t, harnessConfig{Sim: waveSim(50*time.Millisecond, 0, 0)})
			h.enqueueBatch("ws", tc.provider, n, time.Hour)
			var cfg pipeline.WorkerConfig
			var slowed atomic.Int32
			landed := make(chan struct{})
			if !tc.timeout {
				cfg = h.waveWorker(tc.provider, h.batchClient(tc.provider))
				cfg.Wave.Lease = time.Second
				// The first create takes three leases: the wave's holder
				// is still acting when its first lease would have expired.
				pipeline.SetWaveHook(&cfg, func(point string, _ int64) {
					if point == "create" && slowed.Add(1) == 1 {
						time.Sleep(3 * cfg.Wave.Lease)
					}
				})
			} else {
				// The provider makes the first batch 3 s after its create
				// arrives, whether or not the client still waits: the
				// client gives up after 1.5 s.
				proxy := httptest.NewServer(slowCreate(t, h.simURL, 3*time.Second, &slowed, landed))
				t.Cleanup(proxy.Close)
				client := h.client(func(c *llm.Config) {
					c.BaseURL, c.TotalTimeout = proxy.URL+"/v1", 1500*time.Millisecond
				})
				cfg = h.waveWorker(tc.provider, client)
				cfg.Wave.Lease = 4 * time.Second
			}
			cfg.Drain = true
			if err := h.startWorker(cfg, nil, nil).wait(t, 90*time.Second); err != nil {
				t.Fatalf("worker: %v", err)
			}
			if slowed.Load() == 0 {
				t.Fatalf("no create was slowed")
			}
			if tc.timeout {
				// The count below must include the slow create.
				select {
				case <-landed:
				case <-time.After(30 * time.Second):
					t.Fatalf("the slow create never reached the simulator")
				}
			}
			h.checkWaveLedger("ws", n)
			created := h.sim.srv.Stats().Batch.Created
			if waves := h.sqlInt(`SELECT count(*) FROM waves WHERE batch = 'ws'`); int64(waves) != created {
				t.Errorf("%d waves, the provider created %d batches: want exactly one a wave", waves, created)
			}
			if tc.timeout && !strings.Contains(h.logs.String(), "provider batch found again") {
				t.Errorf("the create the client gave up on was not found again:\n%s", h.logs.tail(40))
			}
		})
	}
}

// slowCreate proxies to the simulator at simURL, holding the first batch
// create for delay before the simulator makes it, even when the client has
// given up meanwhile; landed is closed once the simulator answered it.
func slowCreate(t *testing.T, simURL string, delay time.Duration, slowed *atomic.Int32, landed chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // before the client leaves
		if err != nil {
			return
		}
		ctx := r.Context()
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/batches") && slowed.Add(1) == 1 {
			time.Sleep(delay)
			ctx = context.WithoutCancel(ctx)
			defer close(landed)
		}
		req, err := http.NewRequestWithContext(ctx, r.Method, simURL+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}
