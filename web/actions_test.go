package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/web"
)

// libActions are the dashboard's actions as package enqueue runs them
// (report serve's, tested in cmd/report, add the commands' parsing and
// texts): requeued jobs go to a JetStream server of the test's.
type libActions struct {
	st    *store.Store
	js    jetstream.JetStream
	queue queue.Config
}

func (a libActions) Requeue(ctx context.Context, batch string, r web.RequeueRequest) (web.Outcome, error) {
	rep, err := enqueue.Requeue(ctx, a.js, a.st, enqueue.RequeueConfig{Batch: batch, Jobs: r.Jobs, Statuses: r.Statuses, Class: r.Class,
		Model: r.Model, MaxAttempts: r.MaxAttempts, Queue: a.queue})
	if err != nil {
		return web.Outcome{}, libErr(err)
	}
	total := 0
	for _, n := range rep.Jobs {
		total += n
	}
	return web.Outcome{Lines: []string{fmt.Sprintf("requeued %d jobs as run %d; %d published", total, rep.Run, rep.Published)}}, nil
}

func (a libActions) Cancel(ctx context.Context, batch string, r web.CancelRequest) (web.Outcome, error) {
	if len(r.Jobs) > 0 {
		n, err := enqueue.CancelJobs(ctx, a.st, batch, r.Jobs)
		if err != nil {
			return web.Outcome{}, libErr(err)
		}
		return web.Outcome{Lines: []string{fmt.Sprintf("batch %s: cancelled %d of the %d jobs chosen", batch, n, len(r.Jobs))}}, nil
	}
	n, err := enqueue.Cancel(ctx, a.st, batch)
	if err != nil {
		return web.Outcome{}, libErr(err)
	}
	return web.Outcome{Lines: []string{fmt.Sprintf("batch %s: cancelled %d jobs not yet final", batch, n)}}, nil
}

func (a libActions) SetCap(ctx context.Context, batch string, r web.CapRequest) (web.Outcome, error) {
	sp, err := a.st.BatchSpend(ctx, batch)
	if err != nil {
		return web.Outcome{}, err
	}
	c := sp.Cap
	if r.MaxCostUSD != "" {
		v, err := strconv.ParseFloat(r.MaxCostUSD, 64)
		if err != nil {
			return web.Outcome{}, web.BadAction(fmt.Errorf("max cost %q is not a number", r.MaxCostUSD))
		}
		c.MaxCostUSD = &v
	}
	if sp, err = enqueue.SetCap(ctx, a.st, batch, c); err != nil {
		return web.Outcome{}, libErr(err)
	}
	return web.Outcome{Lines: []string{fmt.Sprintf("batch %s: cap $%g; spent %d tokens, $%.6f", batch, *sp.MaxCostUSD, sp.Tokens, sp.CostUSD)},
		Warnings: []string{"sim-messy has no price in fixpoint's table, so a worker can enforce a cost cap only when its --prices lists it, & one without ends the batch's jobs over_budget"}}, nil
}

func libErr(err error) error {
	if errors.Is(err, enqueue.ErrBadConfig) {
		return web.BadAction(err)
	}
	return err
}

// jetStreamServer starts a JetStream server for the test.
func jetStreamServer(t *testing.T) jetstream.JetStream {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
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
	return js
}

// actionClient is a browser's session: the admin token, the CSRF cookie
// and the forms' token the actions part gave.
type actionClient struct {
	srv           *httptest.Server
	auth          string
	cookie, token string
}

// open reads a batch's actions part, keeping its cookie and token.
func (c *actionClient) open(t *testing.T, batch string) string {
	t.Helper()
	hdr := []string{"HX-Request", "true"}
	if c.auth != "" {
		hdr = append(hdr, "Authorization", c.auth)
	}
	req, _ := http.NewRequest(http.MethodGet, c.srv.URL+"/batches/"+url.PathEscape(batch)+"/actions", nil)
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	wantPage(t, resp, string(b), 200)
	for _, ck := range resp.Cookies() {
		if ck.Name == "fixpoint_csrf" {
			if ck.SameSite != http.SameSiteStrictMode || !ck.HttpOnly || ck.Path != "/" {
				t.Errorf("CSRF cookie %+v: want SameSite=Strict, HttpOnly, Path /", ck)
			}
			c.cookie = ck.Value
		}
	}
	if m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(b)); m != nil {
		c.token = m[1]
	}
	return string(b)
}

// post sends an action's form (the session's CSRF token in it unless the
// form has one) and returns the status and body.
func (c *actionClient) post(t *testing.T, path string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	if _, ok := form["csrf"]; !ok && c.token != "" {
		form = maps.Clone(form)
		form.Set("csrf", c.token)
	}
	req, _ := http.NewRequest(http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "fixpoint_csrf", Value: c.cookie})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if got := resp.Header.Get("Content-Security-Policy"); got != web.ContentSecurityPolicy {
		t.Errorf("POST %s: CSP %q", path, got)
	}
	return resp.StatusCode, string(b)
}

// TestDashboardActions: the actions on a ledger a demo run filled. A
// read-only dashboard offers none and refuses their POSTs; one with
// Actions (behind RequireToken) refuses a POST without the token, without
// the CSRF token or from another origin, changing nothing, and with them
// does what enqueue cap, requeue (published to a real JetStream server)
// and cancel do; then the same in a browser.
func TestDashboardActions(t *testing.T) {
	l := newDashLedger(t)
	ctx := context.Background()
	js := jetStreamServer(t)
	acts := libActions{st: l.st, js: js, queue: queue.Config{Stream: "WEBACTS", Subject: "fixpoint.webacts"}}
	ro := httptest.NewServer(web.NewHandler(l.st, web.Config{}))
	t.Cleanup(ro.Close)
	admin := httptest.NewServer(web.RequireToken(web.NewHandler(l.st, web.Config{Actions: acts}), adminToken))
	t.Cleanup(admin.Close)
	demo := "/batches/" + url.PathEscape(l.demo)
	capOf := func() store.Cap {
		t.Helper()
		sp, err := l.st.BatchSpend(ctx, l.demo)
		if err != nil {
			t.Fatal(err)
		}
		return sp.Cap
	}

	t.Run("read-only", func(t *testing.T) {
		c := &actionClient{srv: ro}
		part := c.open(t, l.demo)
		if strings.Contains(part, "<form") || strings.Contains(part, "<button") || !strings.Contains(part, "Read-only") || c.cookie != "" {
			t.Errorf("the read-only part offers actions or sets a cookie:\n%s", part)
		}
		resp, body := get(t, ro, demo)
		wantPage(t, resp, body, 200, `hx-get="`+demo+`/actions"`, ">read-only<")
		c.cookie, c.token = "AAAAAAAAAAAAAAAAAAAAAAAA", "forged"
		for _, a := range []string{"cap", "cancel", "requeue"} {
			code, body := c.post(t, demo+"/"+a, url.Values{"max_cost_usd": {"1"}, "status": {"invalid"}})
			if code != 403 || !strings.Contains(body, "read-only") {
				t.Errorf("read-only POST %s: %d, want 403 saying read-only\n%.300s", a, code, body)
			}
		}
		if capOf().Capped() {
			t.Error("a refused POST set the cap")
		}
	})

	t.Run("refused", func(t *testing.T) {
		c := &actionClient{srv: admin, auth: "Bearer " + adminToken}
		part := c.open(t, l.demo)
		for _, want := range []string{`id="cap-form"`, `id="requeue-form"`, `id="cancel-form"`, `value="invalid" checked`} {
			if !strings.Contains(part, want) {
				t.Errorf("the actions part lacks %s", want)
			}
		}
		if c.cookie == "" || c.token == "" {
			t.Fatalf("no CSRF cookie (%q) or token (%q)", c.cookie, c.token)
		}
		noAuth := *c
		noAuth.auth = ""
		noCookie := *c
		noCookie.cookie = ""
		other := *c
		other.cookie = "BBBBBBBBBBBBBBBBBBBBBBBB"
		form := url.Values{"max_cost_usd": {"5"}}
		for _, r := range []struct {
			name string
			c    *actionClient
			form url.Values
			hdr  []string
			want int
		}{
			{"no admin token", &noAuth, form, nil, 401},
			{"no CSRF token", c, url.Values{"max_cost_usd": {"5"}, "csrf": {""}}, nil, 403},
			{"a forged CSRF token", c, url.Values{"max_cost_usd": {"5"}, "csrf": {"forged"}}, nil, 403},
			{"no CSRF cookie", &noCookie, form, nil, 403},
			{"another session's cookie", &other, form, nil, 403},
			{"another origin", c, form, []string{"Origin", "http://evil.example"}, 403},
			{"another site", c, form, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		} {
			code, body := r.c.post(t, demo+"/cap", r.form, r.hdr...)
			if code != r.want {
				t.Errorf("%s: %d, want %d\n%.300s", r.name, code, r.want, body)
			}
			if capOf().Capped() {
				t.Fatalf("%s: the cap was set", r.name)
			}
		}
		// GET of an action, and a POST where none is taken.
		if resp, _ := get(t, admin, demo+"/cap", "Authorization", "Bearer "+adminToken); resp.StatusCode != 404 && resp.StatusCode != 405 {
			t.Errorf("GET of an action: %d", resp.StatusCode)
		}
		if code, _ := c.post(t, "/", form); code != 405 {
			t.Errorf("POST /: %d, want 405", code)
		}
		if code, _ := c.post(t, demo+"/explode", form); code != 404 {
			t.Errorf("POST of no action: %d, want 404", code)
		}
	})

	t.Run("done", func(t *testing.T) {
		c := &actionClient{srv: admin, auth: "Bearer " + adminToken}
		c.open(t, l.demo)
		// The cap, same origin as a browser sends it.
		code, body := c.post(t, demo+"/cap", url.Values{"max_cost_usd": {"25"}}, "HX-Request", "true", "Origin", admin.URL, "Sec-Fetch-Site", "same-origin")
		if cp := capOf(); code != 200 || cp.MaxCostUSD == nil || *cp.MaxCostUSD != 25 || !strings.Contains(body, "<p>batch "+l.demo+": cap $25; spent") ||
			!strings.Contains(body, "lists it, &amp; one without ends") || strings.Contains(body, "<html") {
			t.Errorf("cap: %d, ledger %+v\n%s", code, cp, body)
		}
		for _, bad := range []url.Values{{"max_cost_usd": {""}}, {"max_cost_usd": {"x"}}} {
			if code, body := c.post(t, demo+"/cap", bad, "HX-Request", "true"); code != 400 {
				t.Errorf("cap %v: %d, want 400\n%s", bad, code, body)
			}
		}
		if code, body := c.post(t, demo+"/requeue", url.Values{}, "HX-Request", "true"); code != 400 || !strings.Contains(body, "choose at least one status") {
			t.Errorf("requeue of no status: %d\n%s", code, body)
		}
		if code, body := c.post(t, demo+"/requeue", url.Values{"status": {"invalid"}, "max_attempts": {"0"}}, "HX-Request", "true"); code != 400 {
			t.Errorf("requeue with max attempts 0: %d\n%s", code, body)
		}

		// Requeue the jobs that did not end valid: a new run, published.
		b, _ := l.st.Overview(ctx, l.demo)
		want := b.Invalid + b.Failed
		if want == 0 {
			t.Fatalf("the messy demo has no invalid or failed job: %+v", b)
		}
		code, body = c.post(t, demo+"/requeue", url.Values{"status": {"invalid", "failed", "rejected", "dead"}})
		if code != 200 || !strings.Contains(body, fmt.Sprintf("requeued %d jobs as run 2; %d published", want, want)) || !strings.Contains(body, "<html") {
			t.Errorf("requeue: %d, want %d requeued\n%.3000s", code, want, body)
		}
		st, err := js.Stream(ctx, "WEBACTS")
		if err != nil {
			t.Fatalf("no stream WEBACTS after the requeue: %v", err)
		}
		if info, _ := st.Info(ctx); info.State.Msgs != uint64(want) {
			t.Errorf("stream WEBACTS holds %d messages, want %d", info.State.Msgs, want)
		}
		if b, _ := l.st.Overview(ctx, l.demo); b.Queued != want {
			t.Errorf("after the requeue %d jobs are queued, want %d", b.Queued, want)
		}

		// Another action holds the batch: refused, saying which.
		release, err := l.st.LockBatch(ctx, l.demo, "requeue")
		if err != nil {
			t.Fatal(err)
		}
		code, body = c.post(t, demo+"/cancel", url.Values{}, "HX-Request", "true")
		release()
		if code != 409 || !strings.Contains(body, "another requeue of batch "+l.demo+" is in progress") {
			t.Errorf("cancel while a requeue holds the batch: %d\n%s", code, body)
		}
		// Cancel: the requeued jobs end cancelled.
		code, body = c.post(t, demo+"/cancel", url.Values{}, "HX-Request", "true")
		if b, _ := l.st.Overview(ctx, l.demo); code != 200 || !strings.Contains(body, fmt.Sprintf("cancelled %d jobs not yet final", want)) || b.Queued != 0 || b.Cancelled != want {
			t.Errorf("cancel: %d, %d queued, %d cancelled\n%s", code, b.Queued, b.Cancelled, body)
		}
		// The outcome of an action on a hostile batch name is text.
		code, body = c.post(t, "/batches/"+url.PathEscape(xssBatch)+"/cancel", url.Values{}, "HX-Request", "true")
		if code != 200 || strings.Contains(body, "<script>") || !strings.Contains(body, htmlEscape(xssBatch)) {
			t.Errorf("cancel of %s: %d\n%s", xssBatch, code, body)
		}
	})

	t.Run("jobs", func(t *testing.T) { testJobActions(t, l, js, ro, admin) })
	t.Run("browser", func(t *testing.T) { testActionsBrowser(t, l, ro, admin) })
}

// testJobActions: a job's page offers to requeue it when final and to
// cancel it while queued, and the job list a selection of jobs to do the
// same with; each acts on the jobs chosen alone, through the same POSTs and
// checks as the batch's actions. Read-only, none is offered.
func testJobActions(t *testing.T, l *dashLedger, js jetstream.JetStream, ro, admin *httptest.Server) {
	ctx := context.Background()
	demo := "/batches/" + url.PathEscape(l.demo)
	valid, _, err := l.st.JobPage(ctx, l.demo, store.JobFilter{Status: "valid", Limit: 3})
	if err != nil || len(valid) != 3 {
		t.Fatalf("3 valid jobs of the demo: %d (%v)", len(valid), err)
	}
	one, two, three := valid[0].ID, valid[1].ID, valid[2].ID
	before, _ := l.st.Overview(ctx, l.demo)
	msgs := func() uint64 {
		t.Helper()
		s, err := js.Stream(ctx, "WEBACTS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	published := msgs()

	// Read-only: no form on the job's page, no box in the job list.
	resp, body := get(t, ro, "/jobs/"+url.PathEscape(one)+"/actions", "HX-Request", "true")
	wantPage(t, resp, body, 200, "Read-only")
	if strings.Contains(body, "<form") {
		t.Errorf("the read-only job page offers an action:\n%s", body)
	}
	if _, body := get(t, ro, demo+"/jobs?status=valid", "HX-Request", "true"); strings.Contains(body, `name="job"`) || strings.Contains(body, "job-select") {
		t.Error("the read-only job list offers a selection")
	}

	c := &actionClient{srv: admin, auth: "Bearer " + adminToken}
	c.open(t, l.demo)
	// A valid job's page offers its requeue, and the requeue runs it alone.
	resp, body = get(t, admin, "/jobs/"+url.PathEscape(one)+"/actions", "HX-Request", "true", "Authorization", c.auth)
	wantPage(t, resp, body, 200, `id="job-requeue-form"`, `name="job" value="`+one+`"`, `name="scope" value="jobs"`)
	code, body := c.post(t, demo+"/requeue", url.Values{"job": {one}, "scope": {"jobs"}}, "HX-Request", "true")
	if code != 200 || !strings.Contains(body, "requeued 1 jobs as run") || !strings.Contains(body, `href="/jobs/`+url.PathEscape(one)+`"`) {
		t.Errorf("requeue of job %s: %d\n%s", one, code, body)
	}
	j, _, err := l.st.Job(ctx, one)
	if err != nil || j.Status != "queued" {
		t.Fatalf("job %s after its requeue: %+v (%v), want queued", one, j, err)
	}
	if after, _ := l.st.Overview(ctx, l.demo); after.Valid != before.Valid-1 || after.Queued != before.Queued+1 {
		t.Errorf("after the requeue of one job: %d valid, %d queued; want %d and %d", after.Valid, after.Queued, before.Valid-1, before.Queued+1)
	}
	if got := msgs(); got != published+1 {
		t.Errorf("the stream holds %d messages, want %d (the requeued job's one more)", got, published+1)
	}
	// (The batch, cancelled before, is not any more: a job of it runs.)
	before, _ = l.st.Overview(ctx, l.demo)
	// Queued, its page offers its cancel, which ends it alone.
	resp, body = get(t, admin, "/jobs/"+url.PathEscape(one)+"/actions", "HX-Request", "true", "Authorization", c.auth)
	wantPage(t, resp, body, 200, `id="job-cancel-form"`)
	code, body = c.post(t, demo+"/cancel", url.Values{"job": {one}, "scope": {"jobs"}}, "HX-Request", "true")
	if j, _, _ = l.st.Job(ctx, one); code != 200 || !strings.Contains(body, "cancelled 1 of the 1 jobs chosen") || j.Status != "cancelled" {
		t.Errorf("cancel of job %s: %d, job %s\n%s", one, code, j.Status, body)
	}
	if ov, _ := l.st.Overview(ctx, l.demo); !ov.CancelledAt.Equal(before.CancelledAt) {
		t.Errorf("the cancel of one job changed the batch's cancel mark: %v, was %v", ov.CancelledAt, before.CancelledAt)
	}

	// The job list offers a selection; requeue two of its jobs.
	_, body = get(t, admin, demo+"/jobs?status=valid", "HX-Request", "true", "Authorization", c.auth)
	for _, want := range []string{`id="job-select"`, `name="job" value="` + two + `"`, `id="select-requeue"`, `id="select-cancel"`, `class="select-all"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the job list lacks %s", want)
		}
	}
	code, body = c.post(t, demo+"/requeue", url.Values{"job": {two, three, one}, "scope": {"jobs"}, "model": {"sim-clean"}}, "HX-Request", "true")
	if code != 200 || !strings.Contains(body, "requeued 3 jobs") {
		t.Errorf("requeue of a selection (2 valid, 1 cancelled): %d\n%s", code, body)
	}
	for _, id := range []string{one, two, three} {
		if j, _, _ := l.st.Job(ctx, id); j.Status != "queued" || j.Model != "sim-clean" {
			t.Errorf("job %s after the selection's requeue: %s on %s, want queued on sim-clean", id, j.Status, j.Model)
		}
	}
	// A selection with no job ticked says so, and does nothing.
	if code, body := c.post(t, demo+"/cancel", url.Values{"scope": {"jobs"}}, "HX-Request", "true"); code != 400 || !strings.Contains(body, "tick at least one job") {
		t.Errorf("cancel of a selection of none: %d\n%s", code, body)
	}
	// The selection's POST passes the same checks: no CSRF token, refused.
	if code, _ := c.post(t, demo+"/cancel", url.Values{"job": {two}, "scope": {"jobs"}, "csrf": {"forged"}}, "HX-Request", "true"); code != 403 {
		t.Errorf("cancel of a selection with a forged token: %d, want 403", code)
	}
	if j, _, _ := l.st.Job(ctx, two); j.Status != "queued" {
		t.Errorf("a refused cancel changed job %s: %s", two, j.Status)
	}
}

// testActionsBrowser: with the token, the batch page shows the actions and
// raising the cap works; without, it shows none, and a POST forged from a
// page (read-only: refused; with the token, from another origin: refused)
// changes nothing.
func testActionsBrowser(t *testing.T, l *dashLedger, ro, admin *httptest.Server) {
	ctx, bl := newBrowser(t, 900)
	// The browser holds the admin token as one that logged in does.
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + adminToken}}); err != nil {
		t.Fatal(err)
	}
	cap := func() float64 {
		t.Helper()
		sp, err := l.st.BatchSpend(context.Background(), l.demo)
		if err != nil || sp.MaxCostUSD == nil {
			t.Fatalf("cap %+v (%v)", sp.Cap, err)
		}
		return *sp.MaxCostUSD
	}
	before := cap()
	demo := "/batches/" + url.PathEscape(l.demo)

	// With the token: the forms, and a cap raised from them.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin.URL+demo), chromedp.WaitVisible(chromedp.CSS("#cap-form button"))); err != nil {
		t.Fatalf("open %s: %v", demo, err)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelectorAll('#actions form.action button').length === 3 &&
			document.querySelector('header .ro').textContent.includes('actions on')`)); err != nil || !ok {
		t.Errorf("the batch page does not show the 3 actions (%v)", err)
	}
	raised := before + 10
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#cap-form input[name=max_cost_usd]`), strconv.FormatFloat(raised, 'f', -1, 64)),
		chromedp.Click(chromedp.CSS(`#cap-form button`)),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('#action-outcome').textContent.includes(': cap $%g;')`, raised),
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("no outcome of the cap raise on the page: %v", err)
	}
	if got := cap(); got != raised {
		t.Errorf("after the browser raised the cap to %g, the ledger says %g", raised, got)
	}
	if *screenshots {
		// docs/img/dashboard-actions.png (go test ./web -run TestDashboard -screenshots).
		if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS("#batch-actions"))); err != nil {
			t.Fatal(err)
		}
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "dashboard-actions.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rs, _, _ := bl.take(); !slices.Contains(rs, "POST "+admin.URL+demo+"/cap") {
		t.Errorf("the browser sent no POST of the cap: %v", rs)
	}
	testJobActionsBrowser(ctx, t, l, admin)

	// Without the token: no form, no button; a POST the page forges is
	// refused.
	if err := chromedp.Do(ctx, chromedp.Navigate(ro.URL+demo), chromedp.WaitVisible(chromedp.CSS("#actions"))); err != nil {
		t.Fatalf("open %s: %v", demo, err)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelectorAll('#actions form, #actions button').length === 0 &&
			document.querySelector('#actions').textContent.includes('Read-only')`)); err != nil || !ok {
		t.Errorf("the read-only batch page offers actions (%v)", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST",
			headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "max_cost_usd=999&csrf=forged"}).then(r => r.status)`, demo+"/cap"),
		chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Errorf("a forged POST on the read-only dashboard: %d (%v), want 403", status, err)
	}
	// A page of another origin (no CSP of ours) posts to the dashboard
	// that has the actions, the browser sending the token: refused (its
	// origin, its token), nothing changed.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>evil</title><p id=evil>evil</p>")
	}))
	defer evil.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#evil"))); err != nil {
		t.Fatal(err)
	}
	// The classic forgery: a form of the other page posted to the dashboard.
	forge := fmt.Sprintf(`(() => { const f = document.createElement("form"); f.method = "post"; f.action = %q;
		for (const [k, v] of [["max_cost_usd", "999"], ["csrf", "forged"]]) {
			const i = document.createElement("input"); i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); return true; })()`, admin.URL+demo+"/cap")
	forgedAnswer(ctx, t, forge, admin.URL+demo+"/cap", admin.URL)
	if got := cap(); got != raised {
		t.Errorf("a forged POST changed the cap to %g", got)
	}
	if rs, _, _ := bl.take(); !slices.Contains(rs, "POST "+admin.URL+demo+"/cap") {
		t.Errorf("the browser did not send the cross-origin POST (the test proves nothing): %v", rs)
	}
}

// forgedAnswer runs forge, a script that posts a form to target from
// another page, and checks the browser is answered 403 and shows the page
// saying it is refused (at origin): seen from the browser's response and
// load events, as no script can be asked while the page navigates.
func forgedAnswer(ctx context.Context, t *testing.T, forge, target, origin string) {
	t.Helper()
	answered, loaded := make(chan int64, 1), make(chan struct{}, 1)
	var gotAnswer atomic.Bool
	lctx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	if err := chromedp.Listen(lctx, func(ev any) {
		switch ev := ev.(type) {
		case *network.EventResponseReceived:
			if ev.Response.URL == target && !gotAnswer.Swap(true) {
				answered <- ev.Response.Status
			}
		case *page.EventLoadEventFired:
			if gotAnswer.Load() {
				select {
				case loaded <- struct{}{}:
				default:
				}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](forge)); err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-answered:
		if status != 403 {
			t.Errorf("the forged form's POST was answered %d, want 403", status)
		}
	case <-time.After(10 * time.Second):
		t.Error("the forged form's POST got no answer")
	}
	select {
	case <-loaded:
	case <-time.After(10 * time.Second):
		t.Error("the forged form's answer was not loaded")
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`location.href.startsWith(%q) && document.body.textContent.includes("refused")`, origin))); err != nil || !ok {
		t.Errorf("the forged form's answer does not say it is refused (%v)", err)
	}
}

// testJobActionsBrowser: a valid job requeued from its page, then the
// queued jobs of the list, every one ticked with the page's box, cancelled
// from the selection.
func testJobActionsBrowser(ctx context.Context, t *testing.T, l *dashLedger, admin *httptest.Server) {
	rows, _, err := l.st.JobPage(context.Background(), l.demo, store.JobFilter{Status: "valid", Limit: 1})
	if err != nil || len(rows) == 0 {
		t.Fatalf("no valid job left in the demo (%v)", err)
	}
	job := "/jobs/" + url.PathEscape(rows[0].ID)
	// Clicked once htmx has taken the form over: clicked before, the form
	// posts as a plain form and the outcome is a page of its own.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin.URL+job), chromedp.WaitVisible(chromedp.CSS("#job-requeue-form button"))); err != nil {
		t.Fatalf("open %s: %v", job, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete" && typeof htmx !== "undefined"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("htmx on %s: %v", job, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#job-requeue-form button"))); err != nil {
		t.Fatalf("requeue from %s: %v", job, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#job-action-outcome').textContent.includes('requeued 1 jobs')`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("no outcome of the job's requeue on its page: %v", err)
	}
	if j, _, _ := l.st.Job(context.Background(), rows[0].ID); j.Status != "queued" {
		t.Errorf("after its requeue from the page, job %s is %s", rows[0].ID, j.Status)
	}
	shotTo(ctx, t, "dashboard-job-actions.png", "#job-actions-section")

	queued, _, err := l.st.JobPage(context.Background(), l.demo, store.JobFilter{Status: "queued"})
	if err != nil || len(queued) == 0 {
		t.Fatalf("no queued job in the demo (%v)", err)
	}
	list := "/batches/" + url.PathEscape(l.demo) + "?status=queued"
	// The parts above the list (loaded after the page) in place first, so
	// that the list stays where it is.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin.URL+list), chromedp.WaitVisible(chromedp.CSS("#job-select input.select-all")),
		chromedp.WaitVisible(chromedp.CSS("#timeline")), chromedp.WaitVisible(chromedp.CSS("#clusters")), chromedp.ScrollIntoView(chromedp.CSS("#jobs")),
		chromedp.Click(chromedp.CSS("#job-select input.select-all"))); err != nil {
		t.Fatalf("select every job of %s: %v", list, err)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('#job-select input[name=job]')].every(b => b.checked)`)); err != nil || !ok {
		t.Errorf("the select-all box did not tick every job (%v)", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#select-cancel"))); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`document.querySelector('#select-outcome').textContent.includes('cancelled %d of the %d jobs chosen')`, len(queued), len(queued))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](want, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#select-outcome').textContent`))
		t.Errorf("the selection's cancel of the %d queued jobs: %v (%q)", len(queued), err, html)
	}
	if ov, _ := l.st.Overview(context.Background(), l.demo); ov.Queued != 0 {
		t.Errorf("after the selection's cancel, %d jobs are queued", ov.Queued)
	}
	shotTo(ctx, t, "dashboard-select.png", "#jobs")
}

// shotTo writes a screenshot of the window, the element sel at its top, to
// docs/img/name (-screenshots), else to a temporary directory.
func shotTo(ctx context.Context, t *testing.T, name, sel string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector(%q).scrollIntoView(), true)`, sel))); err != nil {
		where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + document.body.innerText.slice(0, 300)`))
		t.Fatalf("scroll to %s: %v (at %s)", sel, err, where)
	}
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot of %s: %v", sel, err)
	}
	dir := t.TempDir()
	if *screenshots {
		dir = filepath.Join("..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
