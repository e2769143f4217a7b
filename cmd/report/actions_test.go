package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// actionsBatch records batch "acts": 4 jobs enqueue recorded the settings
// of (stream ACTS), ended invalid, and 2 still queued.
func actionsBatch(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(enqueue.BatchSettings{Provider: "openai", Model: "gpt-4o-mini", TemplateSHA256: "t", SchemaHash: hash,
		Stream: "ACTS", Subject: "fixpoint.acts"})
	if err := st.PutBatch(ctx, store.BatchParams{Name: "acts", Settings: settings, TotalJobs: 6}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	var results []store.Result
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("acts:%d", i)
		jobs = append(jobs, store.NewJob{ID: id, Batch: "acts", RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai",
			Model: "gpt-4o-mini", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(`{}`)})
		if i <= 4 {
			results = append(results, store.Result{JobID: id, Status: fixpoint.StatusInvalid, Error: "gave up", FinalClass: "semantic", Deliveries: 1})
		}
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
}

// session is a browser's session with the dashboard: its admin token, its
// CSRF cookie and the token of its forms.
type session struct {
	base, token, cookie, csrf string
}

// post sends an action's form; with csrf "" the form has no token.
func (s session) post(t *testing.T, path string, form url.Values, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.cookie != "" {
		req.Header.Set("Cookie", s.cookie)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// form is an action's form with the session's CSRF token.
func (s session) form(kv ...string) url.Values {
	f := url.Values{"csrf": {s.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Add(kv[i], kv[i+1])
	}
	return f
}

// TestServeActions runs the dashboard's actions through report serve, on a
// real ledger and a real JetStream server: refused without the token, the
// CSRF token or from another origin, changing nothing; with them, the
// effect of enqueue cap, cancel and requeue (the jobs published again).
func TestServeActions(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	actionsBatch(t, st)
	ctx := context.Background()
	ns, err := natsconn.StartServer(natsconn.ServerConfig{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, done := startServe(t, sctx, "--addr", "127.0.0.1:0", "--database-url", dsn, "--admin-token", testAdminToken, "--nats-url", ns.ClientURL())
	base = strings.TrimSuffix(base, "/")

	// The actions part gives the session its cookie and the forms' token.
	req, _ := http.NewRequest(http.MethodGet, base+"/batches/acts/actions", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(part))
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "fixpoint_csrf" {
			cookie = c
		}
	}
	if resp.StatusCode != 200 || m == nil || cookie == nil || cookie.SameSite != http.SameSiteStrictMode || !cookie.HttpOnly {
		t.Fatalf("actions part: %d, csrf %v, cookie %+v\n%s", resp.StatusCode, m, cookie, part)
	}
	s := session{base: base, token: testAdminToken, cookie: "fixpoint_csrf=" + cookie.Value, csrf: m[1]}

	capOf := func() store.Cap {
		t.Helper()
		sp, err := st.BatchSpend(ctx, "acts")
		if err != nil {
			t.Fatal(err)
		}
		return sp.Cap
	}
	// Refused, and nothing changed.
	noToken, noCSRF, noCookie, otherSession := s, s, s, s
	noToken.token = ""
	noCSRF.csrf = ""
	noCookie.cookie = ""
	otherSession.cookie = "fixpoint_csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct {
		name string
		s    session
		hdr  []string
		want int
	}{
		{"no admin token", noToken, nil, 401},
		{"no CSRF token", noCSRF, nil, 403},
		{"no CSRF cookie", noCookie, nil, 403},
		{"another session's cookie", otherSession, nil, 403},
		{"another origin", s, []string{"Origin", "http://evil.example"}, 403},
		{"another site", s, []string{"Sec-Fetch-Site", "cross-site"}, 403},
	} {
		code, body := c.s.post(t, "/batches/acts/cap", c.s.form("max_total_tokens", "5000"), c.hdr...)
		if code != c.want {
			t.Errorf("%s: %d, want %d\n%.500s", c.name, code, c.want, body)
		}
		if c.want == 403 && !strings.Contains(body, "refused") {
			t.Errorf("%s: the answer does not say it is refused:\n%.500s", c.name, body)
		}
		if capOf().Capped() {
			t.Fatalf("%s: the cap was set", c.name)
		}
	}

	// The cap: what enqueue cap does, said as enqueue cap says it.
	code, body := s.post(t, "/batches/acts/cap", s.form("max_total_tokens", "5000"), "HX-Request", "true", "Origin", base)
	if c := capOf(); code != 200 || c.MaxTotalTokens == nil || *c.MaxTotalTokens != 5000 || c.MaxCostUSD != nil ||
		!strings.Contains(body, "batch acts: cap 5000 tokens; spent 0 tokens") || strings.Contains(body, "<html") {
		t.Errorf("cap: %d, ledger %+v\n%s", code, c, body)
	}
	code, body = s.post(t, "/batches/acts/cap", s.form("max_cost_usd", "NaN"), "HX-Request", "true")
	if code != 400 || !strings.Contains(body, `max cost (USD) &#34;NaN&#34;: want a number of dollars`) {
		t.Errorf("cap NaN: %d\n%s", code, body)
	}

	// Cancel: the 2 queued jobs end cancelled.
	code, body = s.post(t, "/batches/acts/cancel", s.form(), "Sec-Fetch-Site", "same-origin")
	p, _ := st.Progress(ctx, "acts")
	if code != 200 || !strings.Contains(body, "batch acts: cancelled 2 jobs not yet final") || !strings.Contains(body, "<html") || p.Queued != 0 {
		t.Errorf("cancel: %d, progress %+v\n%.2000s", code, p, body)
	}

	// Requeue the invalid and cancelled jobs: a new run, published to the
	// batch's stream.
	code, body = s.post(t, "/batches/acts/requeue", s.form("status", "invalid", "status", "cancelled"), "HX-Request", "true")
	if code != 200 || !strings.Contains(body, "batch acts: requeued 6 jobs (2 cancelled, 4 invalid) as run 2") || !strings.Contains(body, "6 published") {
		t.Errorf("requeue: %d\n%s", code, body)
	}
	stream, err := js.Stream(ctx, "ACTS")
	if err != nil {
		t.Fatalf("the requeue made no stream ACTS: %v", err)
	}
	info, _ := stream.Info(ctx)
	if info.State.Msgs != 6 {
		t.Errorf("stream ACTS holds %d messages, want the 6 requeued jobs", info.State.Msgs)
	}
	if p, _ := st.Progress(ctx, "acts"); p.Queued != 6 {
		t.Errorf("after the requeue %d jobs are queued, want 6", p.Queued)
	}

	// Another action holding the batch: refused, saying which.
	release, err := st.LockBatch(ctx, "acts", "requeue")
	if err != nil {
		t.Fatal(err)
	}
	code, body = s.post(t, "/batches/acts/cancel", s.form(), "HX-Request", "true")
	release()
	if code != 409 || !strings.Contains(body, "another requeue of batch acts is in progress") {
		t.Errorf("cancel while a requeue holds the batch: %d\n%s", code, body)
	}
	if p, _ := st.Progress(ctx, "acts"); p.Queued != 6 {
		t.Errorf("the refused cancel changed the batch: %d queued", p.Queued)
	}
	code, body = s.post(t, "/batches/nope/cancel", s.form(), "HX-Request", "true")
	if code != 404 || !strings.Contains(body, "no such batch") {
		t.Errorf("cancel of no batch: %d\n%s", code, body)
	}

	serveJobActions(t, s, st, stream)
	cancel()
	<-done
}

// serveJobActions: one job cancelled (the other chosen is of no batch), then
// requeued with a queued one, through report serve: each acts on the jobs
// it can, and says which not.
func serveJobActions(t *testing.T, s session, st *store.Store, stream jetstream.Stream) {
	t.Helper()
	ctx := context.Background()
	code, body := s.post(t, "/batches/acts/cancel", s.form("scope", "jobs", "job", "acts:1", "job", "acts:99"), "HX-Request", "true")
	if j, _, _ := st.Job(ctx, "acts:1"); code != 200 || j.Status != fixpoint.StatusCancelled ||
		!strings.Contains(body, "batch acts: cancelled 1 of the 2 jobs chosen; the others were final already, or not of the batch") {
		t.Errorf("cancel of acts:1 and acts:99: %d, acts:1 %s\n%s", code, j.Status, body)
	}
	code, body = s.post(t, "/batches/acts/requeue", s.form("scope", "jobs", "job", "acts:1", "job", "acts:2"), "HX-Request", "true")
	if code != 200 || !strings.Contains(body, "(1 cancelled) as run 3") ||
		!strings.Contains(body, "1 of the 2 jobs chosen was not requeued: not final yet, or not of batch acts") {
		t.Errorf("requeue of acts:1 (cancelled) and acts:2 (queued): %d\n%s", code, body)
	}
	if info, _ := stream.Info(ctx); info.State.Msgs != 7 {
		t.Errorf("stream ACTS holds %d messages, want 7 (the requeued job one more)", info.State.Msgs)
	}
}

// Without a token the dashboard is read-only: a POST of an action is
// refused (403) and changes nothing, whatever it carries.
func TestServeReadOnlyRefusesActions(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	actionsBatch(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := startServe(t, ctx, "--addr", "127.0.0.1:0", "--database-url", dsn)
	s := session{base: strings.TrimSuffix(base, "/"), cookie: "fixpoint_csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAA", csrf: "x"}
	for _, a := range []string{"cap", "cancel", "requeue"} {
		code, body := s.post(t, "/batches/acts/"+a, s.form("max_total_tokens", "1", "status", "invalid"))
		if code != 403 || !strings.Contains(body, "read-only") {
			t.Errorf("%s: %d, want 403 saying read-only\n%.500s", a, code, body)
		}
	}
	if p, err := st.Progress(context.Background(), "acts"); err != nil || p.Queued != 2 {
		t.Errorf("the refused actions changed the batch: %+v %v", p, err)
	}
	if sp, _ := st.BatchSpend(context.Background(), "acts"); sp.Capped() {
		t.Error("the refused cap was set")
	}
	cancel()
	<-done
}
