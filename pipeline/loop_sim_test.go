package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// simClient starts a simulator with preset and returns a client of provider
// pointed at it.
func simClient(t testing.TB, preset, provider string, seed uint64) llm.Config {
	t.Helper()
	cfg, err := sim.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seed
	_, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	base := url
	if llm.WireOf(provider) == llm.WireOpenAIChat {
		base += "/v1"
	}
	return llm.Config{Provider: provider, BaseURL: base, APIKey: "sim-key",
		Retry: llm.RetryConfig{NoJitter: true, InitialInterval: 1}, Lane: llm.LaneConfig{MaxConcurrency: 64, InitialConcurrency: 16}}
}

const orderSchema = `{
  "type": "object",
  "properties": {
    "customer": {"type": "object", "properties": {
      "name": {"type": "string", "minLength": 2},
      "tier": {"enum": ["free", "pro", "enterprise"]}
    }, "required": ["name", "tier"], "additionalProperties": false},
    "lines": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
      "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
      "qty": {"type": "integer", "minimum": 1, "maximum": 50}
    }, "required": ["sku", "qty"], "additionalProperties": false}},
    "rush": {"type": "boolean"}
  },
  "required": ["customer", "lines", "rush"],
  "additionalProperties": false
}`

type simRun struct {
	results []*fixpoint.Result
	valid   int
	calls   int
}

func runSimJobs(t testing.TB, client Completer, n int, lim fixpoint.Limits, mode fixpoint.Mode, prefix string) simRun {
	t.Helper()
	schema, err := validate.Compile([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	loop := NewLoop(client, LoopConfig{})
	var run simRun
	for i := 0; i < n; i++ {
		job := &repair.Job{ID: fmt.Sprintf("%s-%d", prefix, i), Prompt: fmt.Sprintf("Extract the order from email #%d.", i),
			Schema: schema, SchemaRaw: []byte(orderSchema), Model: "sim-model", Mode: mode, Limits: lim}
		res, err := loop.Run(context.Background(), job)
		if err != nil {
			t.Fatalf("job %s: %v", job.ID, err)
		}
		run.results = append(run.results, res)
		run.calls += res.Calls
		if res.Status == fixpoint.StatusValid {
			run.valid++
			if errs := schema.Validate(mustDecode(t, res.Value)); len(errs) > 0 {
				t.Fatalf("job %s is valid but its value fails the schema: %v", job.ID, errs)
			}
		}
	}
	return run
}

func mustDecode(t testing.TB, b []byte) any {
	t.Helper()
	c := validate.Check(nil, string(b))
	if !c.Valid {
		t.Fatalf("value %s does not decode", b)
	}
	return c.Value
}

// TestLoopOverSimulator runs the loop for every provider, mode and strategy
// against the simulator's messy preset and checks convergence and the books.
func TestLoopOverSimulator(t *testing.T) {
	t.Parallel()
	const jobs = 40
	validClasses := map[string]bool{"": true, "syntax": true, "shape": true, "semantic": true, "truncated": true, "refusal": true}
	for _, provider := range llm.ProviderNames() {
		for _, mode := range []fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
			for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
				name := fmt.Sprintf("%s/%s/%s", provider, mode, strategy)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					c, err := llm.New(simClient(t, "messy", provider, 7))
					if err != nil {
						t.Fatal(err)
					}
					run := runSimJobs(t, c, jobs, fixpoint.Limits{MaxAttempts: 4, Strategy: strategy}, mode, name)
					// messy: about half the first replies are wrong; exact
					// feedback fixes most within three corrections.
					if run.valid < jobs*80/100 {
						t.Errorf("valid %d/%d, want at least 80%%", run.valid, jobs)
					}
					firstValid := 0
					for _, res := range run.results {
						var in, out int
						for i, a := range res.Attempts {
							if a.No != i+1 || !validClasses[a.Class] {
								t.Fatalf("job %s attempt %d: no=%d class=%q", res.JobID, i+1, a.No, a.Class)
							}
							if a.TokensIn == 0 || a.TokensOut == 0 && a.Raw != "" {
								t.Errorf("job %s attempt %d: tokens %d/%d not recorded", res.JobID, a.No, a.TokensIn, a.TokensOut)
							}
							if a.Valid != (i == len(res.Attempts)-1 && res.Status == fixpoint.StatusValid) {
								t.Errorf("job %s attempt %d valid=%v but job status %s", res.JobID, a.No, a.Valid, res.Status)
							}
							in, out = in+a.TokensIn, out+a.TokensOut
						}
						if in != res.TokensIn || out != res.TokensOut {
							t.Errorf("job %s tokens %d/%d, sum of attempts %d/%d", res.JobID, res.TokensIn, res.TokensOut, in, out)
						}
						if res.Calls != len(res.Attempts) {
							t.Errorf("job %s: %d calls for %d attempts", res.JobID, res.Calls, len(res.Attempts))
						}
						if res.FirstAttemptValid {
							firstValid++
						}
					}
					if firstValid == jobs {
						t.Errorf("every job valid on the first attempt: the messy preset injected nothing")
					}
				})
			}
		}
	}
}

// TestLoopTokenBudget checks that no job spends past its budget.
func TestLoopTokenBudget(t *testing.T) {
	t.Parallel()
	c, err := llm.New(simClient(t, "messy", llm.ProviderOpenAI, 3))
	if err != nil {
		t.Fatal(err)
	}
	const budget = 2500
	run := runSimJobs(t, c, 60, fixpoint.Limits{MaxAttempts: 6, TokenBudget: budget}, fixpoint.ModePrompt, "budget")
	stopped := 0
	for _, res := range run.results {
		if res.TokensIn+res.TokensOut > budget {
			t.Errorf("job %s spent %d tokens, budget %d", res.JobID, res.TokensIn+res.TokensOut, budget)
		}
		if res.Class == fixpoint.OutcomeBudget {
			stopped++
			if res.Status != fixpoint.StatusFailed {
				t.Errorf("job %s stopped by budget has status %s, want failed", res.JobID, res.Status)
			}
		}
	}
	if stopped == 0 {
		t.Errorf("no job reached the budget of %d tokens; the test does not exercise it", budget)
	}
}

// TestExactFeedbackConverges compares exact feedback with a deliberately
// vague one on the same seed and jobs: naming the JSON pointers is what
// makes the model fix its reply.
func TestExactFeedbackConverges(t *testing.T) {
	t.Parallel()
	rates := map[fixpoint.FeedbackFormat]int{}
	for _, fb := range []fixpoint.FeedbackFormat{fixpoint.FeedbackText, fixpoint.FeedbackVague} {
		c, err := llm.New(simClient(t, "messy", llm.ProviderOpenAI, 11))
		if err != nil {
			t.Fatal(err)
		}
		run := runSimJobs(t, c, 120, fixpoint.Limits{MaxAttempts: 3, Feedback: fb}, fixpoint.ModePrompt, "fb")
		rates[fb] = run.valid
	}
	t.Logf("valid after 3 attempts: exact %d/120, vague %d/120", rates[fixpoint.FeedbackText], rates[fixpoint.FeedbackVague])
	if rates[fixpoint.FeedbackText] < 108 {
		t.Errorf("exact feedback: %d/120 valid, want at least 90%%", rates[fixpoint.FeedbackText])
	}
	if rates[fixpoint.FeedbackVague] > rates[fixpoint.FeedbackText]-20 {
		t.Errorf("vague feedback %d/120 is not clearly worse than exact %d/120", rates[fixpoint.FeedbackVague], rates[fixpoint.FeedbackText])
	}
}

// BenchmarkStrategies compares the two repair strategies on the messy
// preset over 1,000 jobs: valid rate, mean attempts and tokens per valid job.
func BenchmarkStrategies(b *testing.B) {
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
		b.Run(string(strategy), func(b *testing.B) {
			c, err := llm.New(simClient(b, "messy", llm.ProviderOpenAI, 5))
			if err != nil {
				b.Fatal(err)
			}
			var valid, attempts, tokens, jobs int
			for i := 0; i < b.N; i++ {
				run := runSimJobs(b, c, 1000, fixpoint.Limits{MaxAttempts: 3, Strategy: strategy}, fixpoint.ModePrompt, fmt.Sprintf("bench-%d", i))
				for _, res := range run.results {
					attempts += len(res.Attempts)
					tokens += res.TokensIn + res.TokensOut
				}
				valid += run.valid
				jobs += len(run.results)
			}
			b.ReportMetric(100*float64(valid)/float64(jobs), "valid%")
			b.ReportMetric(float64(attempts)/float64(jobs), "attempts/job")
			b.ReportMetric(float64(tokens)/float64(max(valid, 1)), "tokens/valid")
		})
	}
}
