package web_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/fixpoint-dev/fixpoint/web"
)

// The untrusted texts the XSS cases put in replies, rows and errors.
const (
	xssScript = `<script>alert(1)</script>`
	xssImg    = `<img src=x onerror=alert(1)>`
	xssLink   = `javascript:alert(1)`
	// xssBatch is a batch name that is itself markup.
	xssBatch = `xss"><script>alert(2)</script>`
)

// hugeLine is a 1 MB reply with no line break.
var hugeLine = strings.Repeat("A", 1<<20)

// dashLedger is the ledger the dashboard tests read: a batch a real run
// of `worker demo` on the simulator (messy preset) filled, a batch of
// hostile replies (xssBatch), and a batch still running ("live", 3 jobs
// queued).
type dashLedger struct {
	dsn, demo string
	st        *store.Store
	// xssJob has a reply per hostile text; hugeJob a 1 MB single line.
	xssJob, hugeJob string
	// truth is the first job of truthBatch, whose values were graded;
	// revalidated the one that passed the batch's revalidation.
	truth, revalidated truthJob
}

func newDashLedger(t *testing.T) *dashLedger {
	t.Helper()
	dsn := storetest.NewDB(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "github.com/fixpoint-dev/fixpoint/cmd/worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build worker: %v\n%s", err, out)
	}
	// 200 rows: the messy preset leaves about 4% not valid, drawn by job id
	// (the batch's name is new each run), and the actions' requeue needs one;
	// 60 rows had none about one run in twelve.
	demo := exec.Command(filepath.Join(bin, "worker"), "demo", "--database-url", dsn, "--nats-dir", t.TempDir(),
		"--rows", "200", "--preset", "messy", "--latency", "1ms", "--concurrency", "8")
	demo.Env = append(os.Environ(), "FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn", "NATS_URL=")
	if out, err := demo.CombinedOutput(); err != nil {
		t.Fatalf("worker demo: %v\n%s", err, out)
	}
	st, err := store.Open(context.Background(), dsn, &store.Config{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	l := &dashLedger{dsn: dsn, st: st}
	bs, err := st.Overviews(context.Background(), nil, 10)
	if err != nil || len(bs) != 1 || bs[0].Valid == 0 {
		t.Fatalf("after the demo: batches %+v (%v), want one with valid jobs", bs, err)
	}
	l.demo = bs[0].Name
	l.addXSS(t)
	l.addTruth(t)
	l.addRerun(t)
	l.addLive(t)
	return l
}

// rerunJob is the job of batch "rerun": invalid after 2 attempts in run 1,
// requeued on another model, valid at its first attempt in run 2.
const rerunJob = "rerun-1"

func (l *dashLedger) addRerun(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	putJobs(t, l.st, "rerun", 1, func(int) string { return `{"i":1}` })
	attempt := func(no int, raw, class string) store.Attempt {
		a := store.Attempt{No: no, Raw: raw, Valid: class == "", Class: class, Model: "sim-messy", LatencyMS: 20, TokensIn: 10, TokensOut: 5,
			StartedAt: time.Now(), FinishReason: "stop", ProviderStatus: 200, CostUSD: 0.01}
		if class != "" {
			a.Errors = json.RawMessage(`[{"path":"/n","keyword":"type","class":"shape","message":"/n: expected integer, got string"}]`)
			a.Feedback = "fix /n"
		}
		return a
	}
	if _, err := l.st.SaveResults(ctx, []store.Result{{JobID: rerunJob, Status: fixpoint.StatusInvalid, Attempts: 2, Calls: 2, TokensIn: 20, TokensOut: 10,
		Error: "/n: expected integer", FinalClass: "shape", Value: json.RawMessage(`{"n":"one"}`),
		AttemptRows: []store.Attempt{attempt(1, `{"n":"1"}`, "shape"), attempt(2, `{"n":"one"}`, "shape")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Requeue(ctx, store.RequeueParams{Batch: "rerun", Statuses: []fixpoint.Status{fixpoint.StatusInvalid},
		Settings: json.RawMessage(`{}`), Model: "sim-clean"}); err != nil {
		t.Fatal(err)
	}
	second := attempt(1, `{"n":1}`, "")
	second.Model = "sim-clean"
	if _, err := l.st.SaveResults(ctx, []store.Result{{JobID: rerunJob, Run: 2, Status: fixpoint.StatusValid, Attempts: 1, Calls: 1, TokensIn: 10, TokensOut: 5,
		FirstAttemptValid: true, Value: json.RawMessage(`{"n":1}`), AttemptRows: []store.Attempt{second}}}); err != nil {
		t.Fatal(err)
	}
}

// putJobs records a batch of n jobs, their metadata from meta(i).
func putJobs(t *testing.T, st *store.Store, batch string, n int, meta func(i int) string) []string {
	t.Helper()
	ctx := context.Background()
	if err := st.PutBatch(ctx, store.BatchParams{Name: batch, Settings: json.RawMessage(`{"provider":"openai","model":"sim-messy"}`), TotalJobs: n}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	var ids []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%d", batch, i)
		ids = append(ids, id)
		jobs = append(jobs, store.NewJob{ID: id, Batch: batch, RowNo: i, Prompt: "extract " + xssScript,
			Provider: "openai", Model: "sim-messy", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(meta(i))})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (l *dashLedger) addXSS(t *testing.T) {
	t.Helper()
	ids := putJobs(t, l.st, xssBatch, 2, func(i int) string {
		return fmt.Sprintf(`{"note":%q,"link":%q}`, xssImg, xssLink)
	})
	l.xssJob, l.hugeJob = ids[0], ids[1]
	errs := fmt.Sprintf(`[{"path":"/name","keyword":"required","class":"shape","message":%q}]`, "missing "+xssImg)
	attempt := func(no int, raw string, valid bool) store.Attempt {
		a := store.Attempt{No: no, Raw: raw, Valid: valid, Model: "sim-messy", LatencyMS: 12, TokensIn: 10, TokensOut: 5,
			Request:   json.RawMessage(`[{"role":"user","content":"` + `\u003cscript\u003ealert(3)\u003c/script\u003e"}]`),
			StartedAt: time.Now(), FinishReason: "stop"}
		if !valid {
			a.Class, a.Errors, a.Feedback = "shape", json.RawMessage(errs), "fix it: "+xssScript
			a.ProviderError, a.TransportRetries = xssImg, 1
		}
		return a
	}
	rs := []store.Result{
		{JobID: l.xssJob, Status: fixpoint.StatusValid, Attempts: 3, Calls: 3,
			Value: json.RawMessage(fmt.Sprintf(`{"name":%q,"site":%q}`, xssScript, xssLink)),
			AttemptRows: []store.Attempt{
				attempt(1, "Sure! "+xssScript+` {"site":"`+xssLink+`"}`, false),
				attempt(2, xssImg+"\n<a href=\""+xssLink+"\">click</a>", false),
				attempt(3, fmt.Sprintf(`{"name":%q,"site":%q}`, xssScript, xssLink), true),
			}},
		{JobID: l.hugeJob, Status: fixpoint.StatusInvalid, Attempts: 1, Calls: 1, Error: "no JSON in " + xssScript,
			FinalClass: "syntax", AttemptRows: []store.Attempt{attempt(1, hugeLine, false)}},
	}
	rs[1].AttemptRows[0].Class = "syntax"
	if _, err := l.st.SaveResults(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	// Its dataset had 3 bad rows, which enqueue left out.
	if _, err := l.st.FinishRecording(context.Background(), xssBatch, "xss", "xss-dataset", 5, []string{"", "", ""}); err != nil {
		t.Fatal(err)
	}
}

// live is the running batch's name.
const live = "live"

func (l *dashLedger) addLive(t *testing.T) {
	t.Helper()
	putJobs(t, l.st, live, 3, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) })
}

// finish makes a job of the live batch valid.
func (l *dashLedger) finish(t *testing.T, id string) {
	t.Helper()
	_, err := l.st.SaveResults(context.Background(), []store.Result{{JobID: id, Status: fixpoint.StatusValid, Attempts: 1, Calls: 1,
		FirstAttemptValid: true, Value: json.RawMessage(`{"ok":true}`),
		AttemptRows: []store.Attempt{{No: 1, Raw: `{"ok":true}`, Valid: true, StartedAt: time.Now()}}}})
	if err != nil {
		t.Fatal(err)
	}
}

// get requests path from srv and returns the response and its body.
func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func wantPage(t *testing.T, resp *http.Response, body string, status int, contains ...string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d\n%.2000s", resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy {
		t.Errorf("%s: CSP %q", resp.Request.URL.Path, got)
	}
	for _, c := range contains {
		if !strings.Contains(body, c) {
			t.Errorf("%s: the page lacks %q", resp.Request.URL.Path, c)
		}
	}
}

// TestDashboard runs the handler's tests, then the browser's, on one
// ledger (a demo run is the costly part).
func TestDashboard(t *testing.T) {
	l := newDashLedger(t)
	h := web.NewHandler(l.st, web.Config{PollInterval: 100 * time.Millisecond})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Run("batches", func(t *testing.T) { testBatches(t, l, srv) })
	t.Run("batch", func(t *testing.T) { testBatch(t, l, srv) })
	t.Run("jobs", func(t *testing.T) { testJobList(t, l, srv) })
	t.Run("export", func(t *testing.T) { testExport(t, l, srv) })
	t.Run("job", func(t *testing.T) { testJob(t, l, srv) })
	t.Run("job-runs", func(t *testing.T) { testJobRuns(t, srv) })
	t.Run("truth-job", func(t *testing.T) { testTruthJob(t, l, srv) })
	t.Run("truth-batch", func(t *testing.T) { testTruthBatch(t, l, srv) })
	t.Run("truth-revalidated", func(t *testing.T) { testTruthRevalidated(t, l, srv) })
	t.Run("search", func(t *testing.T) { testSearch(t, l, srv) })
	t.Run("costs", func(t *testing.T) { testCosts(t, l, srv) })
	t.Run("xss", func(t *testing.T) { testXSS(t, l, srv) })
	t.Run("errors", func(t *testing.T) { testErrors(t, l, srv) })
	t.Run("timing", func(t *testing.T) { testTiming(t, l, srv) })
	t.Run("mounted", func(t *testing.T) { testMounted(t, l) })
	t.Run("browser", func(t *testing.T) { testBrowser(t, l, srv) })
	t.Run("stream-limit", func(t *testing.T) { testStreamLimit(t, l) })
	t.Run("client-stream-limit", func(t *testing.T) { testClientStreamLimit(t, l) })
	t.Run("purged", func(t *testing.T) { testPurgedJob(t, l, srv) })
	// Last: it finishes the live batch.
	t.Run("live", func(t *testing.T) { testLive(t, l, srv) })
	t.Run("stream-error", func(t *testing.T) { testStreamError(t, l) })
}

func testBatches(t *testing.T, l *dashLedger, srv *httptest.Server) {
	resp, body := get(t, srv, "/")
	b, err := l.st.Overview(context.Background(), l.demo)
	if err != nil {
		t.Fatal(err)
	}
	wantPage(t, resp, body, 200, l.demo, fmt.Sprintf(`<td class="n">%d</td><td class="n">%d</td>`, b.Valid, b.Invalid),
		"/batches/"+url.PathEscape(l.demo))
	for _, h := range []string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	// The progress bar shows each status in its part: the hostile batch's
	// valid job and its invalid one, each half the bar.
	xssRow := regexp.MustCompile(`(?s)<tr id="row-` + regexp.QuoteMeta(eventOf(xssBatch)) + `".*?</tr>`).FindString(body)
	if !strings.Contains(xssRow, `<rect class="pb-valid" x="0.0" y="0" width="500.0" height="10">`) ||
		!strings.Contains(xssRow, `<rect class="pb-invalid" x="500.0" y="0" width="500.0" height="10">`) {
		t.Errorf("the hostile batch's progress bar is not half valid, half invalid:\n%s", xssRow)
	}
	// It says the 3 bad rows enqueue skipped; the demo had none.
	if !strings.Contains(xssRow, "3 bad rows skipped") || strings.Count(body, "bad rows skipped") != 1 {
		t.Errorf("the batch list does not show the hostile batch's 3 bad rows skipped (and no other):\n%s", xssRow)
	}
	// Only the running batch streams.
	if !strings.Contains(body, `sse-connect="/events?b=live"`) || strings.Count(body, "sse-swap=") != 1 {
		t.Errorf("the live batch (and it alone) should stream:\n%s", body)
	}
}

func testBatch(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx := context.Background()
	cs, err := l.st.FailureClusters(ctx, l.demo, 1)
	if err != nil || len(cs) == 0 {
		t.Fatalf("the messy demo has no failure cluster (%v)", err)
	}
	f, err := l.st.BatchFunnel(ctx, l.demo)
	if err != nil || len(f.ValidAt) < 2 {
		t.Fatalf("funnel %+v (%v): the messy demo should have jobs valid at attempt 2", f, err)
	}
	base := "/batches/" + url.PathEscape(l.demo)
	resp, body := get(t, srv, base)
	wantPage(t, resp, body, 200, "Funnel", "Failure clusters", "Cost by model", `id="funnel-chart"`,
		fmt.Sprintf(`<tr><td>1</td><td class="n">%d</td>`, f.ValidAt[0]),
		`hx-get="`+base+`/clusters" hx-trigger="load"`, `hx-get="`+base+`/costs" hx-trigger="load"`, `hx-get="`+base+`/timeline" hx-trigger="load"`,
		"jobs.csv?", "jobs.jsonl?")
	// The parts the page loads after it is shown.
	resp, body = get(t, srv, base+"/clusters", "HX-Request", "true")
	wantPage(t, resp, body, 200, fmt.Sprintf(`<td class="n">%d</td><td class="n">%d</td>`, cs[0].Errors, cs[0].Jobs),
		"/jobs/"+url.PathEscape(cs[0].ExampleJob))
	// html/template escapes the query in lower-case hex.
	if link := base + "?path=" + url.QueryEscape(cs[0].Path); !strings.Contains(strings.ToLower(body), strings.ToLower(link)) {
		t.Errorf("the clusters lack the link %s", link)
	}
	mc, err := l.st.ModelCosts(ctx, l.demo)
	if err != nil || len(mc) == 0 {
		t.Fatalf("model costs %v (%v)", mc, err)
	}
	steps, err := l.st.RepairSteps(ctx, l.demo)
	if err != nil || len(steps) == 0 {
		t.Fatalf("repair steps %v (%v)", steps, err)
	}
	resp, body = get(t, srv, base+"/repairs", "HX-Request", "true")
	wantPage(t, resp, body, 200, fmt.Sprintf(`<td class="n">%d</td><td><span class="badge c-%s">%s</span></td><td class="n">%d</td><td class="n">%d</td><td class="n">%d</td>`,
		steps[0].AttemptNo, steps[0].Class, steps[0].Class, steps[0].Failed, steps[0].Retried, steps[0].ValidNext))
	resp, body = get(t, srv, base+"/costs", "HX-Request", "true")
	wantPage(t, resp, body, 200, fmt.Sprintf(`<td>%s</td><td>%s</td><td class="n">%d</td>`, mc[0].Model, mc[0].Basis, mc[0].Calls))
	tl, err := l.st.BatchTimeline(ctx, l.demo)
	if err != nil || len(tl.Progress) == 0 || tl.Calls == 0 {
		t.Fatalf("timeline of the demo: %d progress points, %d calls (%v)", len(tl.Progress), tl.Calls, err)
	}
	resp, body = get(t, srv, base+"/timeline", "HX-Request", "true")
	wantPage(t, resp, body, 200, `id="progress-chart"`, `id="latency-chart"`,
		fmt.Sprintf("%d realtime calls: p50 %.0f ms", tl.Calls, tl.P50), "No waves: this batch runs realtime.")
	// A finished batch opens no stream.
	if strings.Contains(body, "sse-connect") {
		t.Error("a finished batch's page opens a live stream")
	}
}

// jobIDs are the job links of a page, in order.
func jobIDs(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a href="/jobs/([^"]+)">`).FindAllStringSubmatch(body, -1) {
		id, _ := url.PathUnescape(m[1])
		ids = append(ids, id)
	}
	return ids
}

func testJobList(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx := context.Background()
	b, _ := l.st.Overview(ctx, l.demo)
	base := "/batches/" + url.PathEscape(l.demo) + "/jobs"
	// The filter: only invalid jobs, the same set as the store gives.
	resp, body := get(t, srv, base+"?status=invalid&limit=1000", "HX-Request", "true")
	wantPage(t, resp, body, 200)
	if strings.Contains(body, "<html") {
		t.Error("an htmx request got a whole page, want the list alone")
	}
	got := jobIDs(body)
	if int64(len(got)) != b.Invalid || strings.Count(body, `badge s-valid`) != 0 {
		t.Errorf("status=invalid lists %d jobs, want %d", len(got), b.Invalid)
	}
	// Keyset pages of 7 cover every job once, in row order (the demo's
	// ids follow its rows).
	var all []string
	next := base + "?limit=7"
	for pages := 0; next != ""; pages++ {
		if pages > int(b.Jobs)/7+1 {
			t.Fatal("more pages than jobs")
		}
		_, body := get(t, srv, next, "HX-Request", "true")
		all = append(all, jobIDs(body)...)
		next = ""
		if m := regexp.MustCompile(`class="next" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if int64(len(all)) != b.Jobs || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("pages of 7 gave %d jobs (sorted %v), want %d once each", len(all), slices.IsSorted(all), b.Jobs)
	}
	// Without htmx (a reload of a pushed URL) the same URL is the page.
	resp, body = get(t, srv, base+"?status=valid&attempts=2")
	wantPage(t, resp, body, 200, "<html", "Funnel")
	for _, id := range jobIDs(body) {
		j, _, err := l.st.Job(ctx, id)
		if err == nil && (j.Status != fixpoint.StatusValid || j.Attempts != 2) {
			t.Errorf("status=valid&attempts=2 lists %s: %s after %d attempts", id, j.Status, j.Attempts)
		}
	}
	for _, bad := range []string{"?status=done", "?attempts=x", "?class=nope", "?coerced=maybe", "?patched=2", "?after=nocursor"} {
		resp, body := get(t, srv, base+bad, "HX-Request", "true")
		wantPage(t, resp, body, 400)
	}
}

func testExport(t *testing.T, l *dashLedger, srv *httptest.Server) {
	b, _ := l.st.Overview(context.Background(), l.demo)
	base := "/batches/" + url.PathEscape(l.demo) + "/jobs"
	resp, body := get(t, srv, base+".csv?status=valid")
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || resp.StatusCode != 200 || int64(len(rows)) != b.Valid+1 || rows[0][0] != "id" {
		t.Fatalf("CSV export: status %d, %d rows (%v), want a header and %d jobs", resp.StatusCode, len(rows), err, b.Valid)
	}
	if !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("CSV export: Content-Disposition %q", resp.Header.Get("Content-Disposition"))
	}
	resp, body = get(t, srv, base+".jsonl")
	sc := bufio.NewScanner(strings.NewReader(body))
	n := 0
	for sc.Scan() {
		var rec struct {
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.ID == "" || len(rec.Input) == 0 {
			t.Fatalf("JSONL line %d: %v %s", n+1, err, sc.Text())
		}
		n++
	}
	if resp.StatusCode != 200 || int64(n) != b.Jobs {
		t.Errorf("JSONL export: status %d, %d lines, want %d", resp.StatusCode, n, b.Jobs)
	}
}

func testJob(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx := context.Background()
	rows, _, err := l.st.JobPage(ctx, l.demo, store.JobFilter{Status: "valid", Attempts: 2, Limit: 1})
	if err != nil || len(rows) == 0 {
		t.Fatalf("no demo job valid at attempt 2 (%v)", err)
	}
	j, attempts, err := l.st.Job(ctx, rows[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, srv, "/jobs/"+url.PathEscape(j.ID))
	wantPage(t, resp, body, 200, "Attempt 1", "Attempt 2", "Input row", "Final value", "Request as sent",
		`badge s-valid`, "Feedback sent next")
	if attempts[0].Feedback != "" && !strings.Contains(body, htmlEscape(attempts[0].Feedback)) {
		t.Error("the feedback sent after attempt 1 is not on the page whole")
	}
	// Each call got its 200 at once: no transport line on any card.
	for _, a := range attempts {
		if a.ProviderStatus != 200 || a.TransportRetries != 0 || a.ProviderError != "" {
			t.Fatalf("attempt %d: HTTP %d, %d retries, error %q; want a plain 200 (the simulator's messy preset)", a.No, a.ProviderStatus, a.TransportRetries, a.ProviderError)
		}
	}
	if strings.Contains(body, `class="transport"`) {
		t.Error("a card shows a transport line for a call that got its 200 at once")
	}
}

// A job whose attempts report purge deleted says so, on its page and in
// each of its runs, rather than that none were recorded.
func testPurgedJob(t *testing.T, l *dashLedger, srv *httptest.Server) {
	res, err := l.st.Purge(context.Background(), store.PurgeParams{Before: time.Now().Add(time.Minute), Batch: "rerun"})
	if err != nil || res.Attempts != 3 {
		t.Fatalf("purge of batch rerun: %+v, %v; want its 3 attempts", res, err)
	}
	resp, body := get(t, srv, "/jobs/"+rerunJob)
	wantPage(t, resp, body, 200, `id="purged"`, "Attempts purged", "3 attempts", "Final value", "Run 1")
	if strings.Contains(body, "No attempt recorded") || strings.Contains(body, "Attempt 1") {
		t.Error("a purged job's page shows no attempt recorded, or an attempt card")
	}
}

// A requeued job's page compares its runs side by side, shows the latest
// run's attempts, then each earlier run's in a section of its own.
func testJobRuns(t *testing.T, srv *httptest.Server) {
	resp, body := get(t, srv, "/jobs/"+rerunJob)
	wantPage(t, resp, body, 200, `<section id="runs">`, "Attempts of run 2 (latest)", `<details class="run" id="run-1">`,
		`id="attempt-1"`, `id="run-1-attempt-1"`, `id="run-1-attempt-2"`, "Final value of run 1")
	table := regexp.MustCompile(`(?s)<table class="runs">.*?</table>`).FindString(body)
	rows := regexp.MustCompile(`(?s)<tr[^>]*>\s*<td class="nowrap"><a href="#([^"]+)">run (\d)</a>.*?</tr>`).FindAllStringSubmatch(table, -1)
	if len(rows) != 2 || rows[0][2] != "2" || rows[0][1] != "attempts" || rows[1][2] != "1" || rows[1][1] != "run-1" {
		t.Fatalf("the runs table has %d rows (%v), want run 2 (latest, linking to its attempts) then run 1:\n%s", len(rows), rows, table)
	}
	for i, want := range [][]string{{"s-valid", "sim-clean", `<td class="n">1</td>`}, {"s-invalid", "sim-messy", `<td class="n">2</td>`, "/n: expected integer"}} {
		for _, w := range want {
			if !strings.Contains(rows[i][0], w) {
				t.Errorf("run %s's row lacks %q:\n%s", rows[i][2], w, rows[i][0])
			}
		}
	}
	// Run 1's cards are in its section, not among the latest run's.
	latest := body[strings.Index(body, `id="attempts"`):strings.Index(body, `id="run-1"`)]
	if strings.Count(latest, `<article class="card`) != 1 || strings.Contains(latest, "fix /n") {
		t.Errorf("the latest run's attempts hold %d cards, want its 1 alone", strings.Count(latest, `<article class="card`))
	}
	// A job never requeued has no runs part.
	if _, body := get(t, srv, "/jobs/"+url.PathEscape(live+"-2")); strings.Contains(body, `id="runs"`) || !strings.Contains(body, ">Attempts</h2>") {
		t.Error("a job of one run shows a runs part")
	}
}

// The search: an exact job id or batch name goes to its page; text is
// searched for in one batch's jobs, each match saying where it was found.
func testSearch(t *testing.T, l *dashLedger, srv *httptest.Server) {
	noRedirect := *srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rows, _, err := l.st.JobPage(context.Background(), l.demo, store.JobFilter{Limit: 4})
	if err != nil || len(rows) != 4 {
		t.Fatalf("the demo's first jobs: %v", err)
	}
	for q, want := range map[string]string{rows[1].ID: "/jobs/" + url.PathEscape(rows[1].ID), l.demo: "/batches/" + url.PathEscape(l.demo), xssBatch: "/batches/" + url.PathEscape(xssBatch)} {
		for _, batch := range []string{"", l.demo} {
			resp, err := noRedirect.Get(srv.URL + "/search?" + url.Values{"q": {" " + q + " "}, "batch": {batch}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			isBatch := strings.HasPrefix(want, "/batches/")
			if batch != "" && isBatch {
				continue // within a batch, a name is text
			}
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
				t.Errorf("search %q (batch %q): %d to %q, want 303 to %s", q, batch, resp.StatusCode, resp.Header.Get("Location"), want)
			}
		}
	}
	// Part of a batch's name: the batches that hold it.
	resp, body := get(t, srv, "/search?q="+url.QueryEscape(l.demo[:8]))
	wantPage(t, resp, body, 200, "No job has the id", `<ul class="found"><li><a href="/batches/`+url.PathEscape(l.demo)+`">`)
	// Text within a batch: the job whose id and input hold a ticket's id.
	ticket := rows[3].ID[strings.LastIndex(rows[3].ID, ":")+1:]
	resp, body = get(t, srv, "/search?"+url.Values{"batch": {l.demo}, "q": {strings.ToLower(ticket)}}.Encode())
	wantPage(t, resp, body, 200, `id="search-note"`, "Searched the jobs of rows 1 to 200: 1 match; that is the end of the batch.",
		`found in <span class="badge">id</span> <span class="badge">input</span>`)
	if ids := jobIDs(body); len(ids) != 1 || ids[0] != rows[3].ID {
		t.Errorf("search %q in the demo: %v, want %s alone", ticket, ids, rows[3].ID)
	}
	// An htmx request (the list's search on) gets the list alone.
	resp, body = get(t, srv, "/search?"+url.Values{"batch": {l.demo}, "q": {ticket}}.Encode(), "HX-Request", "true")
	wantPage(t, resp, body, 200, `<div id="job-list">`)
	if strings.Contains(body, "<html") {
		t.Error("an htmx search got a whole page")
	}
	// Hostile text: searched for, shown as text.
	resp, body = get(t, srv, "/search?"+url.Values{"batch": {xssBatch}, "q": {"onerror=alert(1)"}}.Encode())
	wantPage(t, resp, body, 200, "2 matches", `found in <span class="badge">input</span>`)
	resp, body = get(t, srv, "/search?"+url.Values{"batch": {xssBatch}, "q": {xssScript}}.Encode())
	wantPage(t, resp, body, 200, "2 matches", `<span class="badge">prompt</span>`)
	if strings.Contains(body, "<script>alert") {
		t.Error("the search page holds the query unescaped")
	}
	for _, c := range []struct {
		q, batch string
		status   int
	}{
		{strings.Repeat("x", store.SearchTextMax+1), l.demo, 400}, {"x", "nope", 404},
	} {
		resp, body := get(t, srv, "/search?"+url.Values{"batch": {c.batch}, "q": {c.q}}.Encode())
		wantPage(t, resp, body, c.status)
	}
	resp, body = get(t, srv, "/search?"+url.Values{"batch": {l.demo}, "q": {"x"}, "after": {"nocursor"}}.Encode())
	wantPage(t, resp, body, 400)
	// Every page has the header's search box.
	resp, body = get(t, srv, "/")
	wantPage(t, resp, body, 200, `<form class="find" method="get" action="/search" role="search">`)
}

// The costs over time: every batch's calls of the range by step, stacked,
// and their totals by batch; a requeued job's runs all count.
func testCosts(t *testing.T, l *dashLedger, srv *httptest.Server) {
	mc, err := l.st.ModelCosts(context.Background(), l.demo)
	if err != nil {
		t.Fatal(err)
	}
	var demoCalls int64
	for _, m := range mc {
		demoCalls += m.Calls
	}
	resp, body := get(t, srv, "/costs")
	wantPage(t, resp, body, 200, `id="costs-chart"`, "last 30 days, by day",
		// rerun-1's 3 calls over its 2 runs, $0.01 each.
		`<a href="/batches/rerun">rerun</a></td><td class="n">$0.0300</td>`,
		fmt.Sprintf(`<a href="/batches/%s">%s</a></td><td class="n">$0</td><td class="n">0.0%%</td><td class="n">%d</td>`, url.PathEscape(l.demo), l.demo, demoCalls))
	m := regexp.MustCompile(`data-chart="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no chart data")
	}
	var chart struct {
		T      []int64     `json:"t"`
		Labels []string    `json:"labels"`
		Own    [][]float64 `json:"own"`
		Sum    [][]float64 `json:"sum"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &chart); err != nil {
		t.Fatalf("chart data %q: %v", m[1], err)
	}
	i := slices.Index(chart.Labels, "rerun")
	if len(chart.T) != 30 || i < 0 || chart.Own[i][29] < 0.0299 || chart.Own[i][29] > 0.0301 || !slices.Contains(chart.Labels, l.demo) || slices.Contains(chart.Labels, "other batches") {
		t.Errorf("chart: %d steps, labels %v; want 30 days, a series per batch that called (no others), rerun's $0.03 today", len(chart.T), chart.Labels)
	}
	if last := chart.Sum[len(chart.Sum)-1][29]; last < 0.0299 || last > 0.0301 {
		t.Errorf("the stack's top today is $%v, want the day's total $0.03", last)
	}
	resp, body = get(t, srv, "/costs?range=24h")
	wantPage(t, resp, body, 200, "last 24 hours, by hour", `<a href="/batches/rerun">rerun</a>`)
	resp, body = get(t, srv, "/costs?range=1y")
	wantPage(t, resp, body, 400, "range")
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;")
	return r.Replace(s)
}

func testXSS(t *testing.T, l *dashLedger, srv *httptest.Server) {
	pages := []string{"/", "/batches/" + url.PathEscape(xssBatch), "/jobs/" + url.PathEscape(l.xssJob), "/jobs/" + url.PathEscape(l.hugeJob)}
	for _, p := range pages {
		resp, body := get(t, srv, p)
		wantPage(t, resp, body, 200)
		for _, bad := range []string{"<script>alert", "<img src=x", `href="javascript:`, `src="javascript:`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s holds %q unescaped", p, bad)
			}
		}
		// The text onerror=alert(1) is shown; no tag carries it.
		if m := regexp.MustCompile(`<[a-z]+[^<>]*\sonerror=`).FindString(body); m != "" {
			t.Errorf("%s: a tag with an event handler: %s", p, m)
		}
		// Every script the page loads is the dashboard's own.
		for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
			if !regexp.MustCompile(`^<script src="/static/[A-Za-z.-]+\.js" defer>$`).MatchString(m) {
				t.Errorf("%s: unexpected script tag %s", p, m)
			}
		}
	}
	_, body := get(t, srv, "/jobs/"+url.PathEscape(l.xssJob))
	for _, want := range []string{htmlEscape(xssScript), htmlEscape(xssImg), "javascript:alert(1)", "Attempt 3", `<p class="transport">Transport: 1 retry`} {
		if !strings.Contains(body, want) {
			t.Errorf("the job page lacks %q (the text shown, escaped)", want)
		}
	}
	// The 1 MB line is shown whole, in a box that wraps it.
	_, body = get(t, srv, "/jobs/"+url.PathEscape(l.hugeJob))
	if !strings.Contains(body, `<pre class="box raw">`+hugeLine+`</pre>`) {
		t.Error("the 1 MB reply is not shown whole in its box")
	}
}

func testErrors(t *testing.T, l *dashLedger, srv *httptest.Server) {
	for _, c := range []struct {
		path   string
		status int
	}{{"/jobs/nope", 404}, {"/batches/nope", 404}, {"/nope", 404}, {"/static/", 404}} {
		resp, body := get(t, srv, c.path)
		wantPage(t, resp, body, c.status)
	}
	resp, err := srv.Client().Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST: %d, want 405 (read-only)", resp.StatusCode)
	}
	resp, body := get(t, srv, "/static/htmx.min.js")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || len(body) < 10000 {
		t.Errorf("htmx: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}

	// A slow ledger: the jobs table and the batch rollups locked by
	// another session. The page is an error page once QueryTimeout is
	// over, not a hung one.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE jobs, batch_rollups, batch_rollup_errors IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	slow := httptest.NewServer(web.NewHandler(l.st, web.Config{QueryTimeout: 300 * time.Millisecond}))
	defer slow.Close()
	for _, p := range []string{"", "/clusters", "/jobs"} {
		start := time.Now()
		resp, body = get(t, slow, "/batches/"+url.PathEscape(l.demo)+p, "HX-Request", "true")
		wantPage(t, resp, body, 503, "did not answer within 300ms")
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: the error took %s", p, took)
		}
	}
	_ = tx.Rollback(ctx)

	// A ledger that is gone.
	down, err := store.Open(ctx, l.dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	gone := httptest.NewServer(web.NewHandler(down, web.Config{}))
	defer gone.Close()
	resp, body = get(t, gone, "/")
	wantPage(t, resp, body, 503, "Service Unavailable")
}

// testTiming measures the server time of the batch page and of a filtered
// job list page on the demo ledger (logged; the bound is loose, for a
// shared machine).
func testTiming(t *testing.T, l *dashLedger, srv *httptest.Server) {
	for _, p := range []string{"/batches/" + url.PathEscape(l.demo), "/batches/" + url.PathEscape(l.demo) + "/jobs?status=invalid"} {
		var d []time.Duration
		for range 20 {
			start := time.Now()
			resp, _ := get(t, srv, p, "HX-Request", "true")
			d = append(d, time.Since(start))
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
		}
		slices.Sort(d)
		t.Logf("%s: p50 %s, p95 %s over 20 requests", p, d[9], d[18])
		if d[18] > 2*time.Second {
			t.Errorf("%s: p95 %s", p, d[18])
		}
	}
}

// testLive reads the live batch's stream while its jobs finish: an event
// per change, and "done" when none is queued.
func testLive(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/batches/"+live+"/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := readEvents(resp.Body)
	next := func() [2]string {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the stream ended early")
			}
			return e
		case <-ctx.Done():
			t.Fatal("no event in time")
		}
		return [2]string{}
	}
	valid := regexp.MustCompile(`<dt>Valid</dt><dd>(\d+)</dd>`)
	// The browser test may have finished some of the batch's jobs.
	rows, _, err := l.st.JobPage(ctx, live, store.JobFilter{Status: "queued"})
	if err != nil || len(rows) == 0 {
		t.Fatalf("the live batch has no queued job left (%v)", err)
	}
	done := 3 - len(rows)
	e := next()
	if m := valid.FindStringSubmatch(e[1]); m == nil || m[1] != fmt.Sprint(done) || !strings.HasPrefix(e[0], "b") {
		t.Fatalf("first event %q: want the progress with %d valid", e, done)
	}
	for _, r := range rows {
		l.finish(t, r.ID)
		done++
		e = next()
		if m := valid.FindStringSubmatch(e[1]); m == nil || m[1] != fmt.Sprint(done) {
			t.Fatalf("event after %s finished: %q, want %d valid", r.ID, e, done)
		}
	}
	if e = next(); e[0] != "done" {
		t.Errorf("after the last job: event %q, want done", e[0])
	}
}

// Mounted under a prefix in another server, every link, script and
// stream of a page starts with it and resolves.
func testMounted(t *testing.T, l *dashLedger) {
	mux := http.NewServeMux()
	h := web.NewHandler(l.st, web.Config{BasePath: "/fixpoint/"})
	mux.Handle("/fixpoint/", http.StripPrefix("/fixpoint", web.RequireToken(h, adminToken)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, _ := get(t, srv, "/fixpoint/")
	if resp.StatusCode != 401 {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	auth := []string{"Authorization", "Bearer " + adminToken}
	for _, p := range []string{"/fixpoint/", "/fixpoint/batches/" + url.PathEscape(l.demo), "/fixpoint/jobs/" + url.PathEscape(l.xssJob)} {
		resp, body := get(t, srv, p, auth...)
		wantPage(t, resp, body, 200)
		refs := regexp.MustCompile(`(?:href|src|hx-get|sse-connect)="(/[^"]*)"`).FindAllStringSubmatch(body, -1)
		if len(refs) < 5 {
			t.Fatalf("%s: %d links", p, len(refs))
		}
		for _, m := range refs {
			ref := strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.HasPrefix(ref, "/fixpoint/") {
				t.Errorf("%s: link %s is outside the mount", p, ref)
				continue
			}
			if strings.Contains(ref, "/events") {
				continue
			}
			if resp, _ := get(t, srv, ref, auth...); resp.StatusCode != 200 {
				t.Errorf("%s: link %s gives %d", p, ref, resp.StatusCode)
			}
		}
	}
}

// readEvents sends the events of an SSE body on a channel as [name, data].
func readEvents(body io.Reader) chan [2]string {
	events := make(chan [2]string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(body)
		var name string
		var data []string
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "":
				events <- [2]string{name, strings.Join(data, "\n")}
				name, data = "", nil
			}
		}
	}()
	return events
}

// Past MaxStreams open streams a new one is refused with 503 and a
// Retry-After; a closed stream gives its place back.
func testStreamLimit(t *testing.T, l *dashLedger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(web.NewHandler(l.st, web.Config{MaxStreams: 1}))
	defer srv.Close()
	open := func() *http.Response {
		sctx, scancel := context.WithCancel(ctx)
		t.Cleanup(scancel)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/batches/"+live+"/events", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := open()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	// The first event proves the stream holds its place.
	if e, ok := <-readEvents(first.Body); !ok || !strings.HasPrefix(e[0], "b") {
		t.Fatalf("first stream's first event %q", e)
	}
	second := open()
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable || second.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "1 live streams are open already") {
		t.Fatalf("second stream: %d, Retry-After %q, %s", second.StatusCode, second.Header.Get("Retry-After"), body)
	}
	first.Body.Close()
	// The server sees the closed stream at its next write.
	for {
		third := open()
		third.Body.Close()
		if third.StatusCode == http.StatusOK {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the closed stream's place never came back")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Past ClientStreams open streams of one client (its address) a new one of
// its is refused with 429 and a Retry-After, while another client still
// gets one; a closed stream gives its client's place back.
func testClientStreamLimit(t *testing.T, l *dashLedger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(web.NewHandler(l.st, web.Config{MaxStreams: 3, ClientStreams: 2}))
	t.Cleanup(srv.Close) // after the streams' cleanups close them
	// from is a client connecting from the loopback address ip.
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	open := func(c *http.Client) *http.Response {
		t.Helper()
		sctx, scancel := context.WithCancel(ctx)
		t.Cleanup(scancel)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/batches/"+live+"/events", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode == http.StatusOK {
			// The first event proves the stream holds its places.
			if e, ok := <-readEvents(resp.Body); !ok || !strings.HasPrefix(e[0], "b") {
				t.Fatalf("a stream's first event %q", e)
			}
		}
		return resp
	}
	a, b := from("127.0.0.1"), from("127.0.0.2")
	first := open(a)
	if second := open(a); first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("client a's first two streams: %d, %d", first.StatusCode, second.StatusCode)
	}
	third := open(a)
	body, _ := io.ReadAll(third.Body)
	if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "this client (127.0.0.1) holds 2 live streams already") {
		t.Fatalf("client a's third stream: %d, Retry-After %q, %s", third.StatusCode, third.Header.Get("Retry-After"), body)
	}
	if other := open(b); other.StatusCode != http.StatusOK {
		t.Fatalf("client b's stream, with a place left: %d", other.StatusCode)
	}
	first.Body.Close()
	// The server sees the closed stream at its next write.
	for {
		again := open(a)
		again.Body.Close()
		if again.StatusCode == http.StatusOK {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the closed stream's place never came back to its client")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A stream whose ledger stops answering says so, keeps polling, and
// clears the message when the ledger answers again.
func testStreamError(t *testing.T, l *dashLedger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(l.st, web.Config{QueryTimeout: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/batches/"+live+"/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(resp.Body)
	var names []string
	for e := range events {
		names = append(names, e[0])
		if e[0] == "ledger-error" && e[1] != "" && tx != nil {
			if !strings.Contains(e[1], "deadline exceeded") {
				t.Errorf("ledger-error %q", e[1])
			}
			_ = tx.Rollback(ctx)
			tx = nil
		}
	}
	// Errors while locked, then the progress, the error cleared, done.
	got := strings.Join(slices.Compact(names), ",")
	if !regexp.MustCompile(`^ledger-error,b[0-9a-f]+,ledger-error,done$`).MatchString(got) {
		t.Errorf("events %s", got)
	}
}

// eventOf is the SSE event (and row id suffix) of a batch's name.
func eventOf(batch string) string {
	sum := sha256.Sum256([]byte(batch))
	return "b" + hex.EncodeToString(sum[:8])
}
