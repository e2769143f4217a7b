package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// report serve gives the dashboard its Try playground: a messy-preset try
// runs on the simulator the command starts, through to its verdict; with
// --try=false the page says the playground is off.
func TestServeTry(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := startServe(t, ctx, "--addr", "127.0.0.1:0", "--database-url", dsn)
	page := fetch(t, base+"try")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `value="sim:messy"`) || !strings.Contains(page, `value="provider:openai"`) {
		t.Fatalf("the Try page lacks its token, the messy preset or openai:\n%s", page)
	}
	form := url.Values{"csrf": {m[1]}, "source": {"sim:messy"}, "seed": {"3"}, "mode": {"prompt"}, "strategy": {"repair"},
		"coerce": {"safe"}, "max_attempts": {"3"}, "prompt": {"Count the apples: three."},
		"schema": {`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`}}
	req, _ := http.NewRequest(http.MethodPost, base+"try", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	run := regexp.MustCompile(`id="run-([0-9a-f]+)"`).FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || run == nil {
		t.Fatalf("POST /try: %d\n%s", resp.StatusCode, body)
	}
	// The run's event stream ends after its "done" event, once the verdict
	// is in.
	events, err := (&http.Client{Timeout: time.Minute}).Get(base + "try/runs/" + run[1] + "/events")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(events.Body)
	events.Body.Close()
	if err != nil || !strings.Contains(string(stream), "event: done\n") {
		t.Fatalf("the try's event stream: %v, ended without its done event:\n%s", err, stream)
	}
	part := fetch(t, base+"try/runs/"+run[1])
	if !strings.Contains(part, `id="try-verdict"`) || !strings.Contains(part, `id="try-attempt-1"`) || !strings.Contains(part, "simulator messy") {
		t.Errorf("the try did not end with its cards:\n%s", part)
	}
	cancel()
	<-done

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	base, done = startServe(t, ctx, "--addr", "127.0.0.1:0", "--database-url", dsn, "--try=false")
	if page := fetch(t, base+"try"); !strings.Contains(page, "not enabled") {
		t.Errorf("with --try=false the page does not say the playground is off:\n%s", page)
	}
	cancel()
	<-done
}

func fetch(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d\n%s", u, resp.StatusCode, b)
	}
	return string(b)
}
