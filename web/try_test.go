package web_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

// testSims serves the simulator's presets as report serve does, stopped
// when the test ends.
func testSims(t *testing.T, latency sim.Latency) *playground.SimPresets {
	s := &playground.SimPresets{Latency: latency}
	t.Cleanup(s.Close)
	return s
}

// keyProvider is an OpenAI-compatible provider (the simulator, clean)
// that records the Authorization header of each call.
type keyProvider struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newKeyProvider(t *testing.T) *keyProvider {
	p := &keyProvider{}
	s := sim.New(sim.Config{Seed: 1})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.auth = append(p.auth, r.Header.Get("Authorization"))
		p.mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	t.Cleanup(s.Close)
	return p
}

func (p *keyProvider) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth...)
}

// tryServer is a dashboard with the playground and no ledger (the Try
// page reads none), logging into a buffer.
type tryServer struct {
	srv    *httptest.Server
	log    *syncbuf.Buffer
	keyed  *keyProvider
	trier  *playground.Trier
	sims   *playground.SimPresets
	client *http.Client
}

func newTryServer(t *testing.T, latency sim.Latency) *tryServer {
	ts := &tryServer{log: &syncbuf.Buffer{}, keyed: newKeyProvider(t), sims: testSims(t, latency)}
	ts.trier = playground.New(playground.Config{Simulator: ts.sims, Providers: []playground.Provider{
		{Name: "openai", BaseURL: ts.keyed.srv.URL + "/v1", DefaultModel: "sim-clean"},
	}})
	h := web.NewHandler(nil, web.Config{Try: ts.trier, TryTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ts.srv = httptest.NewServer(h)
	t.Cleanup(ts.srv.Close)
	ts.client = ts.srv.Client()
	return ts
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// token is the form token of the Try page.
func (ts *tryServer) token(t *testing.T) string {
	t.Helper()
	resp, body := get(t, ts.srv, "/try")
	wantPage(t, resp, body, 200, `<form class="try"`, `type="password" name="key"`, `value="sim:messy"`)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the Try page has no form token:\n%s", body)
	}
	return m[1]
}

// tryForm is a valid try of the messy preset.
func tryForm(token string) url.Values {
	return url.Values{"csrf": {token}, "source": {"sim:messy"}, "model": {""}, "seed": {"7"}, "mode": {"prompt"},
		"strategy": {"conversation"}, "coerce": {"safe"}, "max_attempts": {"3"},
		"schema": {`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`},
		"prompt": {"Count the apples: three."}}
}

func (ts *tryServer) post(t *testing.T, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.srv.URL+"/try", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var runRE = regexp.MustCompile(`id="run-([0-9a-f]+)"`)

// follow reads a run's event stream to its end and returns the last
// progress part.
func (ts *tryServer) follow(t *testing.T, body string) string {
	t.Helper()
	m := runRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the answer holds no run:\n%s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.srv.URL+"/try/runs/"+m[1]+"/events", nil)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("the run's stream: %d %s", resp.StatusCode, ct)
	}
	var last, cur strings.Builder
	event, parts := "", 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			cur.Reset()
		case strings.HasPrefix(line, "data: "):
			cur.WriteString(strings.TrimPrefix(line, "data: ") + "\n")
		case line == "" && event == "progress":
			last.Reset()
			last.WriteString(cur.String())
			parts++
		case line == "" && event == "done":
			if parts == 0 {
				t.Fatal("the stream ended with no progress part")
			}
			return last.String()
		}
	}
	t.Fatalf("the stream ended without its done event (%v)", sc.Err())
	return ""
}

// TestTryPlayground posts tries to the playground: a messy job runs
// through the repair step and its stream ends with the cards; bad input
// is refused, saying what is wrong; a cross-site post or one without
// the form's token is refused; a typed key serves its try only and shows
// nowhere.
func TestTryPlayground(t *testing.T) {
	t.Parallel()
	// Latency keeps a run going when the post is answered: its stream
	// has something to follow.
	ts := newTryServer(t, sim.Latency{RequestP50: 5 * time.Millisecond, RequestP99: 10 * time.Millisecond})
	token := ts.token(t)

	// A messy run valid after a repair: found by trying seeds (the draws
	// are a function of the input and the seed).
	var final string
	for seed := 1; seed <= 30 && !strings.Contains(final, `id="try-verdict">valid after`); seed++ {
		f := tryForm(token)
		f.Set("seed", fmt.Sprint(seed))
		resp, body := ts.post(t, f, "HX-Request", "true")
		wantPage(t, resp, body, 200, `class="pipeline"`, "simulator messy", "seed <span class=\"mono\">"+fmt.Sprint(seed)+"</span>")
		if strings.Contains(body, "<html") {
			t.Fatal("an htmx post got a whole page, want the run's part")
		}
		if strings.Contains(body, `sse-connect=`) {
			final = ts.follow(t, body)
		} else {
			final = body // done before the answer was written
		}
	}
	for _, want := range []string{`id="try-attempt-1"`, `id="try-attempt-2"`, `id="try-verdict"`, "Sent next", `data-stage="validate"`, "st-ok"} {
		if !strings.Contains(final, want) {
			t.Errorf("no messy try in 30 seeds shows %q:\n%s", want, final)
		}
	}
	wantRetryStage(t, final)

	// The same input and seed: the same replies.
	f := tryForm(token)
	_, b1 := ts.post(t, f, "HX-Request", "true")
	_, b2 := ts.post(t, f, "HX-Request", "true")
	raw := regexp.MustCompile(`(?s)<pre class="box raw">.*?</pre>`)
	if r1, r2 := raw.FindAllString(ts.final(t, b1), -1), raw.FindAllString(ts.final(t, b2), -1); len(r1) == 0 || strings.Join(r1, "") != strings.Join(r2, "") {
		t.Errorf("one input and seed gave two different runs:\n%s\n%s", r1, r2)
	}

	// A post without htmx gets the page, the form as given.
	resp, body := ts.post(t, f)
	wantPage(t, resp, body, 200, "<html", `class="pipeline"`, "Count the apples: three.")

	bad := []struct {
		name, key, value, want string
	}{
		{"attempts over 5", "max_attempts", "6", "from 1 to 5"},
		{"attempts not a number", "max_attempts", "x", "from 1 to 5"},
		{"schema too big", "schema", `{"description":"` + strings.Repeat("x", web.TrySchemaMaxBytes) + `"}`, "over the playground"},
		{"prompt too big", "prompt", strings.Repeat("x", web.TryPromptMaxBytes+1), "over the playground"},
		{"empty prompt", "prompt", "  ", "the prompt is empty"},
		{"schema not JSON", "schema", `{"type":`, "schema"},
		{"schema nothing satisfies", "schema", `{"$ref":"#"}`, "no value satisfies"},
		{"unknown preset", "source", "sim:nope", "pick a simulator preset or a provider"},
		{"unknown provider", "source", "provider:cohere", "not one this dashboard calls"},
		{"bad mode", "mode", "yaml", "want prompt, json_schema or tool"},
		{"bad strategy", "strategy", "pray", "strategy"},
		{"bad coercion", "coerce", "most", "coerce"},
		{"patch in tool mode", "mode", "tool", "strategy patch needs mode prompt"},
		{"no key", "source", "provider:openai", "openai needs an API key"},
	}
	for _, tt := range bad {
		f := tryForm(token)
		f.Set(tt.key, tt.value)
		if tt.name == "patch in tool mode" {
			f.Set("strategy", "patch")
		}
		if tt.name == "no key" {
			f.Del("seed")
		}
		resp, body := ts.post(t, f, "HX-Request", "true")
		if resp.StatusCode != 400 || !strings.Contains(body, `id="try-error"`) || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, want 400 naming %q:\n%.500s", tt.name, resp.StatusCode, tt.want, body)
		}
	}
	// The page without htmx shows the error over the form as it was.
	f = tryForm(token)
	f.Set("max_attempts", "9")
	resp, body = ts.post(t, f)
	wantPage(t, resp, body, 400, "from 1 to 5", `<form class="try"`, "Count the apples: three.")

	// A body past every bound is cut off, and said so.
	f = tryForm(token)
	f.Set("schema", strings.Repeat("{", 4*(web.TrySchemaMaxBytes+web.TryPromptMaxBytes+web.TryDocumentMaxBytes)))
	if resp, body := ts.post(t, f, "HX-Request", "true"); resp.StatusCode != 400 || !strings.Contains(body, "read the form") {
		t.Errorf("a post over the body's bound: %d, want 400\n%.300s", resp.StatusCode, body)
	}

	// CSRF: another site's post, or a post without the page's token.
	resp, body = ts.post(t, tryForm(token), "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != 403 {
		t.Errorf("a cross-site post: %d, want 403\n%.300s", resp.StatusCode, body)
	}
	resp, body = ts.post(t, tryForm("0123"))
	if resp.StatusCode != 403 || !strings.Contains(body, "token") {
		t.Errorf("a post with a wrong token: %d, want 403 naming the token\n%.300s", resp.StatusCode, body)
	}
	// Other methods stay refused.
	req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+"/", nil)
	if resp, err := ts.client.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /: %v %v, want 405", resp.StatusCode, err)
	}

	// A typed key: sent to the provider for its try, then forgotten.
	const key = "sk-typed-in-the-page-0123456789"
	f = tryForm(token)
	f.Set("source", "provider:openai")
	f.Set("key", key)
	f.Del("seed")
	resp, body = ts.post(t, f, "HX-Request", "true")
	if resp.StatusCode != 200 {
		t.Fatalf("a try with a typed key: %d\n%s", resp.StatusCode, body)
	}
	final = ts.final(t, body)
	if calls := ts.keyed.calls(); len(calls) == 0 || calls[0] != "Bearer "+key {
		t.Errorf("the provider got %q, want the typed key", calls)
	}
	if strings.Contains(body, key) || strings.Contains(final, key) || strings.Contains(ts.log.String(), key) {
		t.Error("the typed key shows in a page or the log")
	}
	f.Del("key")
	if resp, body := ts.post(t, f, "HX-Request", "true"); resp.StatusCode != 400 || !strings.Contains(body, "needs an API key") {
		t.Errorf("a try after a keyed one, with no key: %d, want 400 (the key is not kept)\n%.300s", resp.StatusCode, body)
	}
	if _, body := get(t, ts.srv, "/try"); strings.Contains(body, key) {
		t.Error("the Try page shows the typed key")
	}
}

// final is a run's last part: followed on its stream, or the answer when
// it was done already.
func (ts *tryServer) final(t *testing.T, body string) string {
	t.Helper()
	if strings.Contains(body, "sse-connect=") {
		return ts.follow(t, body)
	}
	return body
}

// wantRetryStage: a run valid at attempt n > 1 shows the diagram's retry
// stage gone through, n-1 times (not "not needed").
func wantRetryStage(t *testing.T, final string) {
	t.Helper()
	n := strings.Count(final, `id="try-attempt-`)
	retries := map[bool]string{true: "1 retry", false: fmt.Sprintf("%d retries", n-1)}[n == 2]
	if want := `<li class="stage st-ok" data-stage="retry"><b>Retry</b><span class="small">valid after ` + retries + `</span>`; !strings.Contains(final, want) {
		t.Errorf("valid at attempt %d: the retry stage is not %q:\n%s", n, want, final)
	}
}

// Without a Trier the page says the playground is not enabled, and a post
// is refused.
func TestTryDisabled(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(web.NewHandler(nil, web.Config{}))
	t.Cleanup(srv.Close)
	resp, body := get(t, srv, "/try")
	wantPage(t, resp, body, 200, "not enabled")
	if strings.Contains(body, `<form class="try"`) {
		t.Error("a disabled playground shows its form")
	}
	r, err := srv.Client().Post(srv.URL+"/try", "application/x-www-form-urlencoded", bytes.NewReader(nil))
	if err != nil || r.StatusCode != 404 {
		t.Errorf("POST /try with no playground: %v %v, want 404", r.StatusCode, err)
	}
}

// With no simulator and no provider key the page says how to get one.
func TestTryNoKey(t *testing.T) {
	t.Parallel()
	tr := playground.New(playground.Config{Providers: []playground.Provider{{Name: "openai"}, {Name: "anthropic"}}})
	srv := httptest.NewServer(web.NewHandler(nil, web.Config{Try: tr}))
	t.Cleanup(srv.Close)
	resp, body := get(t, srv, "/try")
	wantPage(t, resp, body, 200, `id="try-nokey"`, "OPENAI_API_KEY", `<form class="try"`, "openai (type a key)")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no form token")
	}
	f := tryForm(m[1])
	f.Set("source", "provider:anthropic")
	f.Del("seed")
	r, err := srv.Client().PostForm(srv.URL+"/try", f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 400 || !strings.Contains(string(b), "anthropic needs an API key") {
		t.Errorf("a keyless try: %d, want 400 asking for a key\n%.400s", r.StatusCode, b)
	}
	// With the simulator there is no such note.
	ts := newTryServer(t, sim.Latency{})
	if _, body := get(t, ts.srv, "/try"); strings.Contains(body, `id="try-nokey"`) {
		t.Error("the no-key note shows with the simulator on offer")
	}
}

// The event stream of a run the server does not know is a 404.
func TestTryUnknownRun(t *testing.T) {
	t.Parallel()
	ts := newTryServer(t, sim.Latency{})
	for _, p := range []string{"/try/runs/0000/events", "/try/runs/0000"} {
		if resp, _ := get(t, ts.srv, p); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}
