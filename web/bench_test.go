package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/fixpoint-dev/fixpoint/web"
)

// The dashboard benchmarks read a generated batch of FIXPOINT_BENCH_JOBS
// jobs (default 1,000,000) written straight into a fresh ledger, made once
// per benchmark process (a few minutes at 1M) and dropped at its end:
//
//	go test ./web/ -run '^$' -bench Dashboard -benchtime 50x -timeout 60m
//
// Each request's server time is measured around the handler (no network);
// p50-ms and p95-ms are reported over the b.N requests.

const benchBatch = "bench-1m"

var (
	benchOnce sync.Once
	benchLed  struct {
		st   *store.Store
		h    http.Handler
		jobs int
		err  error
	}
)

// benchLedger generates the batch the first time it is asked for; every
// benchmark of the process shares it, and TestMain drops its database
// after the last one (storetest sweeps what a killed process left).
func benchLedger(b *testing.B) (*store.Store, http.Handler, int) {
	b.Helper()
	benchOnce.Do(func() {
		n := 1_000_000
		if v := os.Getenv("FIXPOINT_BENCH_JOBS"); v != "" {
			if n, benchLed.err = strconv.Atoi(v); benchLed.err != nil {
				return
			}
		}
		benchLed.jobs = n
		dsn := storetest.NewDB(&keepTB{B: b})
		t0 := time.Now()
		st, err := storetest.Generate(context.Background(), dsn, storetest.GenSpec{Batch: benchBatch, Jobs: n, Seed: 1})
		if err != nil {
			benchLed.err = err
			return
		}
		b.Logf("generated %d jobs, %d attempts in %s", st.Jobs, st.Attempts, time.Since(t0).Round(time.Second))
		benchLed.st, benchLed.err = store.Open(context.Background(), dsn, &store.Config{MaxConns: 8})
		benchLed.h = web.NewHandler(benchLed.st, web.Config{})
	})
	if benchLed.err != nil {
		b.Fatal(benchLed.err)
	}
	return benchLed.st, benchLed.h, benchLed.jobs
}

// keepTB is the first benchmark's testing.B with its cleanups deferred to
// the end of the process: the generated ledger outlives the benchmark that
// made it, for the ones after it.
type keepTB struct {
	*testing.B
}

var (
	benchCleanMu sync.Mutex
	benchCleanup []func()
)

func (k *keepTB) Cleanup(f func()) {
	benchCleanMu.Lock()
	defer benchCleanMu.Unlock()
	benchCleanup = append(benchCleanup, f)
}

// TestMain drops the generated ledger after the benchmarks.
func TestMain(m *testing.M) {
	code := m.Run()
	benchCleanMu.Lock()
	for i := len(benchCleanup) - 1; i >= 0; i-- {
		benchCleanup[i]()
	}
	benchCleanMu.Unlock()
	if benchLed.st != nil {
		benchLed.st.Close()
	}
	os.Exit(code)
}

// reportLatencies reports the p50 and p95 of ds in milliseconds.
func reportLatencies(b *testing.B, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := min(int(p*float64(len(ds))+0.5), len(ds)) - 1
		return float64(ds[max(i, 0)].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDashboard measures the server time of the batch page, its
// lazily loaded parts, and filtered job-list pages (first page, and a page
// deep in the batch through the keyset cursor).
func BenchmarkDashboard(b *testing.B) {
	st, h, _ := benchLedger(b)
	ctx := context.Background()
	// A cursor half-way through: the page after the 25,000th valid job.
	var deep string
	f := store.JobFilter{Status: "valid", Limit: store.JobPageMax}
	for range 25 {
		_, next, err := st.JobPage(ctx, benchBatch, f)
		if err != nil {
			b.Fatal(err)
		}
		f.After, deep = next, next
	}
	base := "/batches/" + url.PathEscape(benchBatch)
	pages := []struct{ name, path string }{
		{"batch-page", base},
		{"jobs", base + "/jobs"},
		{"jobs-status=invalid", base + "/jobs?status=invalid"},
		{"jobs-status=dead", base + "/jobs?status=dead"},
		{"jobs-class=refusal", base + "/jobs?class=refusal"},
		{"jobs-status=invalid&class=truncated", base + "/jobs?status=invalid&class=truncated"},
		{"jobs-path-common", base + "/jobs?path=/address/zip"},
		{"jobs-path-rare", base + "/jobs?path=/rare/path"},
		{"jobs-attempts=3", base + "/jobs?attempts=3"},
		{"jobs-coerced", base + "/jobs?coerced=1"},
		{"jobs-patched", base + "/jobs?patched=1"},
		{"jobs-status=valid-deep", base + "/jobs?status=valid&after=" + url.QueryEscape(deep)},
		{"part-clusters", base + "/clusters"},
		{"part-costs", base + "/costs"},
		{"part-repairs", base + "/repairs"},
		{"part-timeline", base + "/timeline"},
		{"search-header", "/search?" + url.Values{"q": {benchBatch + ":no-such-job"}}.Encode()},
		{"search-text-none", "/search?" + url.Values{"batch": {benchBatch}, "q": {"no such text"}}.Encode()},
		{"search-text-deep", "/search?" + url.Values{"batch": {benchBatch}, "q": {"no such text"}, "after": {deep}}.Encode()},
		{"costs-30d", "/costs"},
		{"costs-7d-hourly", "/costs?range=7d"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			failed := 0
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, p.path, nil)
				req.Header.Set("HX-Request", "true")
				if p.name == "batch-page" {
					req.Header.Del("HX-Request")
				}
				w := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(w, req)
				ds = append(ds, time.Since(t0))
				if w.Code != http.StatusOK {
					// A part over its query timeout answers 503: counted.
					failed++
					if failed == 1 {
						b.Logf("%s: %d %.300s", p.path, w.Code, w.Body.String())
					}
				}
			}
			reportLatencies(b, ds)
			b.ReportMetric(float64(failed), "failed")
		})
	}
}

// BenchmarkLiveFinish measures how long a finished job takes to show on
// an open batch page: a job is finished through the writer's call
// (SaveResults, one transaction) and the time from its commit to the
// event of the batch page's stream carrying the new valid count is taken,
// with the handler's default poll interval.
func BenchmarkLiveFinish(b *testing.B) {
	st, h, _ := benchLedger(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(h)
	defer srv.Close()
	var queued []string
	f := store.JobFilter{Status: "queued", Limit: store.JobPageMax}
	for len(queued) < 5000 {
		rows, next, err := st.JobPage(ctx, benchBatch, f)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			queued = append(queued, r.ID)
		}
		if next == "" {
			break
		}
		f.After = next
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/batches/"+url.PathEscape(benchBatch)+"/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(resp.Body)
	valid := regexp.MustCompile(`<dt>Valid</dt><dd>(\d+)</dd>`)
	want := int64(-1)
	wait := func() time.Time {
		for {
			select {
			case e, ok := <-events:
				if !ok {
					b.Fatal("the stream ended")
				}
				m := valid.FindStringSubmatch(e[1])
				if m == nil {
					continue
				}
				if n, _ := strconv.ParseInt(m[1], 10, 64); want < 0 || n == want {
					return time.Now()
				}
			case <-time.After(30 * time.Second):
				b.Fatal("no event within 30 s")
			}
		}
	}
	wait() // the first event: the page's figures as it opens
	ov, err := st.Overview(ctx, benchBatch)
	if err != nil {
		b.Fatal(err)
	}
	want = ov.Valid
	ds := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		if i >= len(queued) {
			b.Fatalf("only %d queued jobs to finish", len(queued))
		}
		r := store.Result{JobID: queued[i], Status: fixpoint.StatusValid, Value: []byte(`{"name":"x"}`), Attempts: 1, Calls: 1,
			FirstAttemptValid: true, TokensIn: 300, TokensOut: 50, CostUSD: 0.0001, WallMS: 500,
			AttemptRows: []store.Attempt{{No: 1, Raw: `{"name":"x"}`, Valid: true, Model: "sim-typical", TokensIn: 300, TokensOut: 50}}}
		i++
		// Finished at a varying phase of the stream's 500 ms poll (0 to
		// 499 ms after the last event), as jobs finish at any moment: a
		// spacing of the measured commits, not a wait for anything.
		time.Sleep(time.Duration(i*37%500) * time.Millisecond)
		won, err := st.SaveResults(ctx, []store.Result{r})
		if err != nil || !won[0] {
			b.Fatalf("save: %v %v", won, err)
		}
		committed := time.Now()
		want++
		ds = append(ds, wait().Sub(committed))
	}
	reportLatencies(b, ds)
	fmt.Fprintf(os.Stderr, "live: %d jobs finished\n", len(ds))
}
