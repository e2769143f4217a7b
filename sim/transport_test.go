package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/poll"
)

func startSim(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	cfg.Now = fixedNow
	s, url, closeFn, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(closeFn)
	return s, url
}

func post(ctx context.Context, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

const smallOpenAI = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

func TestScriptFirstCallsFailThenOK(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	s, url := startSim(t, Config{Script: func(n int, r *http.Request) *ScriptedReply {
		b, _ := io.ReadAll(r.Body)
		if json.Valid(b) {
			seen.Add(1)
		}
		if n <= 2 {
			return &ScriptedReply{Status: 503}
		}
		if n == 3 {
			return &ScriptedReply{Status: 429}
		}
		return nil
	}})
	var got []int
	for range 4 {
		resp, err := post(context.Background(), url+"/v1/chat/completions", smallOpenAI)
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, resp.StatusCode)
		if resp.StatusCode != 200 {
			var e struct{ Error struct{ Message string } }
			if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
				t.Errorf("status %d body %s, want an OpenAI error body", resp.StatusCode, b)
			}
		}
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "1" {
			t.Errorf("scripted 429 Retry-After = %q, want 1", resp.Header.Get("Retry-After"))
		}
	}
	if want := []int{503, 503, 429, 200}; !slices.Equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	if seen.Load() != 4 {
		t.Errorf("script read %d valid bodies, want 4", seen.Load())
	}
	st := s.Stats()
	if st.Requests != 4 || st.Replies != 1 || st.ByStatus[503] != 2 || st.Transport[EventScripted] != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestHangUntilClientGivesUp(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, Config{Script: func(int, *http.Request) *ScriptedReply { return &ScriptedReply{Hang: true} }})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := post(ctx, url+"/v1/chat/completions", smallOpenAI)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("post = %v, want the client's deadline", err)
	}
	// The client may give up before the server has read the call (on a
	// loaded machine): wait for the server to count it.
	poll.Until(t, 10*time.Second, "one call counted without a response", func() bool { return s.Stats().ByStatus[0] == 1 })
}

func TestCloseReleasesWaitingCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"hang", Config{Transport: Transport{Hang: 1}}},
		{"latency", Config{Latency: Latency{Dist: DistFixed, RequestP50: time.Hour}}},
		{"scripted delay", Config{Script: func(int, *http.Request) *ScriptedReply {
			return &ScriptedReply{Status: 500, Delay: time.Hour}
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, url, closeFn, err := Start(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				resp, err := post(context.Background(), url+"/v1/chat/completions", smallOpenAI)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			poll.Until(t, 10*time.Second, "the call to arrive", func() bool { return s.Stats().Requests > 0 })
			closeFn()
			closeFn() // safe twice
			if err := <-errc; err == nil {
				t.Fatal("a waiting call got a response, want a failed call after Close")
			}
			if got := s.Stats().ByStatus[0]; got != 1 {
				t.Errorf("calls without a response = %d, want 1", got)
			}
		})
	}
}

func TestResetClosesConnection(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, Config{Transport: Transport{Reset: 1}})
	resp, err := post(context.Background(), url+"/v1/messages", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
}

func TestTrickleSendsWholeBodySlowly(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, Config{Transport: Transport{Trickle: 1}, TrickleInterval: time.Microsecond})
	resp, err := post(context.Background(), url+"/api/chat", `{"model":"l","stream":false,"messages":[{"role":"user","content":"x"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != -1 || !json.Valid(b) {
		t.Fatalf("Content-Length %d body %s, want a chunked valid body", resp.ContentLength, b)
	}
	if s.Stats().Transport[EventTrickle] != 1 {
		t.Errorf("stats %v", s.Stats().Transport)
	}
}

func TestLatencyIsApplied(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, Config{Latency: Latency{Dist: DistFixed, RequestP50: 30 * time.Millisecond}})
	start := time.Now()
	resp, err := post(context.Background(), url+"/v1/chat/completions", smallOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("reply after %v, want at least the fixed 30ms latency", el)
	}
}

func TestLatencyDistributions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		dist     Dist
		p50, p99 time.Duration
	}{
		{"lognormal", DistLognormal, 200 * time.Millisecond, 2 * time.Second},
		{"uniform", DistUniform, 100 * time.Millisecond, 190 * time.Millisecond},
		{"fixed", DistFixed, 40 * time.Millisecond, 90 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(1, 2))
			xs := make([]time.Duration, 20000)
			for i := range xs {
				xs[i] = sample(tc.dist, tc.p50, tc.p99, r)
			}
			slices.Sort(xs)
			p50, p99 := xs[len(xs)/2], xs[len(xs)*99/100]
			wantP99 := tc.p99
			if tc.dist == DistFixed {
				wantP99 = tc.p50
			}
			near := func(got, want time.Duration) bool {
				return got >= want*94/100 && got <= want*106/100
			}
			if !near(p50, tc.p50) || !near(p99, wantP99) {
				t.Fatalf("p50 %v p99 %v, want %v and %v", p50, p99, tc.p50, wantP99)
			}
		})
	}
	if d := (Latency{}).delay(100, rand.New(rand.NewPCG(1, 1))); d != 0 {
		t.Errorf("zero latency delay = %v, want 0", d)
	}
	l := Latency{Dist: DistFixed, RequestP50: time.Millisecond, TokenP50: 2 * time.Microsecond}
	if d := l.delay(500, rand.New(rand.NewPCG(1, 1))); d != 2*time.Millisecond {
		t.Errorf("fixed delay of 500 tokens = %v, want 1ms + 500*2µs", d)
	}
}
