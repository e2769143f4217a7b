package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// /readyz answers 503 with the reason while the worker is not ready (here
// a lane stopped because its provider has no such model: the reason names
// the lane and the model), and 200 once it is; /healthz stays 200
// throughout, so a stopped lane does not get the worker restarted in a
// loop.
func TestReadyzNamesAStoppedLane(t *testing.T) {
	t.Parallel()
	var notReady atomic.Pointer[error]
	laneErr := errors.New(`lane ollama/llama9 stopped since 2026-12-03T12:00:00Z: ollama has no model "llama9": provider has no such model (6 of its jobs held here, the rest stay queued)`)
	notReady.Store(&laneErr)
	srv := httptest.NewServer(opsHandler(pipeline.NewMetrics(), func(context.Context) error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "lane ollama/llama9 stopped") || !strings.Contains(body, `has no model "llama9"`) {
		t.Errorf("/readyz with a stopped lane: %d %q; want 503 naming the lane and the model", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with a stopped lane: %d, want 200", code)
	}
	notReady.Store(nil)
	if code, body := get("/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz when ready: %d %q; want 200 ready", code, body)
	}
}
