package pipeline_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// usageServer is an OpenAI-compatible server that answers every chat
// completion with a valid record and the usage given, counting the calls.
func usageServer(t *testing.T, usage string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"no route"}}`, http.StatusNotFound)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","model":"m","choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":%s}`,
			`{"name":"Ann","age":30,"tier":"pro"}`, usage)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// anomalyRun is a batch of n jobs of model anomaly-model, capped at
// dollars (none when 0) with a max_tokens of 1024, run to the end by a
// worker calling srv, priced at in and out dollars a million tokens and
// making conc calls at once (8 when 0).
type anomalyRun struct {
	n       int
	dollars float64
	in, out float64
	conc    int
}

func (r anomalyRun) run(t *testing.T, h *harness, srv *httptest.Server) {
	t.Helper()
	cfg := h.enqueueConfig("b")
	cfg.Model, cfg.MaxTokens = "anomaly-model", 1024
	if r.dollars > 0 {
		cfg.Cap.MaxCostUSD = &r.dollars
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(r.n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	if r.conc > 0 {
		wc.Concurrency = r.conc
	}
	var err error
	prices := fmt.Sprintf(`{"anomaly-model":{"input_per_mtok":%g,"output_per_mtok":%g}}`, r.in, r.out)
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(prices)); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("b", r.n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
}

// A reply claiming 10^18 tokens is a provider anomaly: the attempt is
// charged by estimate and its row written, once per call. Priced as
// reported it overflowed the ledger's cost column: the result was refused,
// the call paid for again on every delivery, and no row kept any of them.
func TestHugeUsageStillLeavesAnAttemptRow(t *testing.T) {
	t.Parallel()
	const n = 3
	h := newHarness(t, harnessConfig{})
	srv, calls := usageServer(t, `{"prompt_tokens":1000000000000000000,"completion_tokens":1000000000000000000}`)
	anomalyRun{n: n, in: 3, out: 15}.run(t, h, srv)
	if got := calls.Load(); got != n {
		t.Errorf("%d calls for %d jobs, want one each", got, n)
	}
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusValid || len(as) != 1 {
			t.Fatalf("job %d: %s with %d attempt rows (%s); want valid with 1", i, j.Status, len(as), j.Error)
		}
		a := as[0]
		if a.TokensIn <= 0 || a.TokensIn > fixpoint.MaxCallTokens || a.TokensOut <= 0 || a.CostUSD <= 0 || a.CostUSD > 1 {
			t.Errorf("job %d: attempt charged %d in, %d out, $%f; want the estimate", i, a.TokensIn, a.TokensOut, a.CostUSD)
		}
		if !strings.Contains(a.ProviderError, "1000000000000000000") {
			t.Errorf("job %d: provider_error %q does not keep the reported usage", i, a.ProviderError)
		}
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Negative usage neither lifts a batch's spend cap nor takes the worker
// down (a Prometheus counter panics on a negative Add): every call is
// charged by estimate, the cap stops the batch, nothing spent is below
// zero.
func TestNegativeUsageKeepsTheCap(t *testing.T) {
	t.Parallel()
	const n = 12
	h := newHarness(t, harnessConfig{})
	srv, calls := usageServer(t, `{"prompt_tokens":-1000000,"completion_tokens":-99999999}`)
	// Each call is a few hundred input tokens by estimate, some $0.03 at
	// $100 a million (output is free, so what a call holds is what it
	// costs): the cap pays for a few.
	dollars := 0.1
	anomalyRun{n: n, dollars: dollars, in: 100, conc: 1}.run(t, h, srv)
	p := h.progress("b")
	if p.Valid == 0 || p.Valid == n || p.OverBudget != n-p.Valid || calls.Load() != int64(p.Valid) {
		t.Errorf("%d valid, %d over budget of %d jobs after %d calls; want the cap to stop the batch partway", p.Valid, p.OverBudget, n, calls.Load())
	}
	sp, err := h.st.BatchSpend(h.ctx, "b")
	if err != nil || sp.CostUSD <= 0 || sp.CostUSD > dollars || sp.Tokens <= 0 {
		t.Errorf("spend %+v %v; want above zero, within the $%g cap", sp, err, dollars)
	}
	h.checkInvariants("b", invariants{Jobs: n})
}

// bodyServer is an OpenAI-compatible server that answers every chat
// completion 200 with body, counting the calls.
func bodyServer(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// A 200 reply whose usage or body cannot be read was made and billed: it
// is a paid attempt of its job, charged by estimate and against the
// batch's cap, and bounded like any failed attempt. A reply whose text
// can be read stands (its usage an anomaly); one that cannot be read is
// asked for again within the job's attempts, then the job fails with
// class provider. Such replies were retried inside each call, then
// waited out as an outage, for ever: 5 jobs made 125 calls in 90 s, each
// recorded as an outage at $0, and a $1 cap never stopped them.
func TestPaidRepliesThatCannotBeReadAreBounded(t *testing.T) {
	t.Parallel()
	const content = `{"name":"Ann","age":30,"tier":"pro"}`
	reply := func(usage string) string {
		return fmt.Sprintf(`{"id":"c1","model":"m","choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":%s}`, content, usage)
	}
	for _, tc := range []struct {
		name, body string
		readable   bool   // the reply's text can be read
		note       string // what the attempt's provider_error keeps
	}{
		{"usage 1e300", reply(`{"prompt_tokens":1e300,"completion_tokens":9}`), true, "prompt_tokens 1e300"},
		{"usage float", reply(`{"prompt_tokens":12.5,"completion_tokens":9}`), true, "prompt_tokens 12.5"},
		{"usage string", reply(`{"prompt_tokens":"12","completion_tokens":9}`), true, `prompt_tokens "12"`},
		{"usage NaN", reply(`{"prompt_tokens":NaN,"completion_tokens":9}`), false, "charged by estimate"},
		{"html body", `<html><body>502 Bad Gateway</body></html>`, false, "charged by estimate"},
		{"truncated body", reply(`{"prompt_tokens":12,"completion_tokens":9}`)[:70], false, "charged by estimate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n, maxAttempts = 3, 3
			h := newHarness(t, harnessConfig{})
			srv, calls := bodyServer(t, tc.body)
			anomalyRun{n: n, dollars: 1, in: 3, out: 15}.run(t, h, srv)
			wantCalls, status := int64(n), fixpoint.StatusValid
			if !tc.readable {
				wantCalls, status = n*maxAttempts, fixpoint.StatusFailed
			}
			if got := calls.Load(); got != wantCalls {
				t.Errorf("%d calls for %d jobs, want %d: each paid reply is one attempt", got, n, wantCalls)
			}
			var cost float64
			for i := 1; i <= n; i++ {
				j, as := h.job(jobID("b", i))
				if j.Status != status || int64(len(as)) != wantCalls/n {
					t.Fatalf("job %d: %s/%s with %d attempt rows (%s); want %s with %d", i, j.Status, j.FinalClass, len(as), j.Error, status, wantCalls/n)
				}
				if !tc.readable && j.FinalClass != fixpoint.OutcomeProvider {
					t.Errorf("job %d: final class %q, want %s", i, j.FinalClass, fixpoint.OutcomeProvider)
				}
				for _, a := range as {
					if a.TokensIn <= 0 || a.CostUSD <= 0 || !strings.Contains(a.ProviderError, tc.note) {
						t.Errorf("job %d attempt %d: %d in, $%f, %q; want charged by estimate, the note %q", i, a.No, a.TokensIn, a.CostUSD, a.ProviderError, tc.note)
					}
					if !tc.readable && (a.Class != fixpoint.OutcomeProvider || a.ProviderClass != string(fixpoint.ClassBadResponse) || a.Raw == "") {
						t.Errorf("job %d attempt %d: class %q/%q, raw %q; want provider/bad_response keeping the body", i, a.No, a.Class, a.ProviderClass, a.Raw)
					}
					cost += a.CostUSD
				}
				if ic, err := h.st.JobInterrupted(h.ctx, jobID("b", i)); err != nil || len(ic) != 0 {
					t.Errorf("job %d: interrupted calls %+v (%v); want none: a paid reply is no outage", i, ic, err)
				}
			}
			sp, err := h.st.BatchSpend(h.ctx, "b")
			if err != nil || sp.Calls != wantCalls || !near(sp.CostUSD, cost) {
				t.Errorf("spend counter %+v (%v); want %d calls and $%f, the attempts'", sp, err, wantCalls, cost)
			}
			h.checkInvariants("b", invariants{Jobs: n, MaxCalls: wantCalls, Statuses: map[fixpoint.Status]int{status: n}})
		})
	}
}

// Usage that is well-formed but more than the request could have cost
// (millions of tokens for a short prompt with max_tokens 1024) is a
// provider anomaly: charged by estimate, the reported figures kept in the
// row, and the batch's cap holds. Charged as reported, six such calls
// spent $22.50 against a $5 cap.
func TestUsageBeyondTheRequestKeepsTheCap(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	srv, calls := usageServer(t, `{"prompt_tokens":5000000,"completion_tokens":5000000}`)
	dollars := 5.0
	anomalyRun{n: n, dollars: dollars, in: 0.75, conc: 1}.run(t, h, srv)
	sp, err := h.st.BatchSpend(h.ctx, "b")
	if err != nil || sp.CostUSD > dollars || sp.CostUSD <= 0 {
		t.Errorf("spent $%f of a $%g cap (%v); want within it", sp.CostUSD, dollars, err)
	}
	if calls.Load() != n {
		t.Errorf("%d calls, want one a job", calls.Load())
	}
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusValid || len(as) != 1 {
			t.Fatalf("job %d: %s with %d attempts; want valid with 1", i, j.Status, len(as))
		}
		if a := as[0]; a.TokensIn >= 5_000_000 || !strings.Contains(a.ProviderError, "input 5000000, output 5000000") {
			t.Errorf("job %d: charged %d in, provider_error %q; want the estimate, the reported figures kept", i, a.TokensIn, a.ProviderError)
		}
	}
	if logs := h.logs.String(); strings.Count(logs, "reported usage a call cannot have had") != 1 {
		t.Errorf("the worker warned of the anomaly %d times; want once (once a minute):\n%s", strings.Count(logs, "reported usage a call cannot have had"), logs)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// near reports whether two dollar amounts agree to the ledger's precision
// (numeric(18, 8) per row, summed).
func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
