package repair_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// simDocJob is a job over a simulated document, graded against it.
func simDocJob(t *testing.T, strategy fixpoint.Strategy, d sim.Document) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(sim.DocumentSchema))
	if err != nil {
		t.Fatal(err)
	}
	var raw any
	if err := json.Unmarshal([]byte(sim.DocumentSchema), &raw); err != nil {
		t.Fatal(err)
	}
	return &repair.Job{ID: "doc-sim-" + string(strategy), Schema: schema, SchemaRaw: []byte(sim.DocumentSchema), Model: "gpt-4o-mini",
		Prompt: strings.ReplaceAll(sim.DocumentTemplate, "{{.id}}", "A-1"), Document: d.Text, MaxTokens: 60_000,
		Evidence: fixpoint.EvidenceRequire, Source: evidence.New(d.Text), Exempt: evidence.Exempt(raw),
		Limits: fixpoint.Limits{MaxAttempts: 3, Strategy: strategy, ChunkTokens: 4000, ChunkOverlap: 200}}
}

// driveSim runs m against the simulator, every request of a Next at once
// (their replies fed in the order sent).
func driveSim(t *testing.T, c *llm.Client, m repair.Machine) {
	t.Helper()
	act := m.Next()
	var queue []*fixpoint.Request
	for feeds := 0; feeds < 1000; feeds++ {
		if act.Err != nil {
			t.Fatalf("transient failure from a simulator without transport faults: %v", act.Err)
		}
		queue = append(queue, act.Requests...)
		if len(queue) == 0 {
			return
		}
		req := queue[0]
		queue = queue[1:]
		started := time.Now()
		resp, err := c.Complete(context.Background(), *req)
		_, act = m.Feed(req, resp, err, started)
	}
	t.Fatal("no end in 1000 calls")
}

// TestChunkedThroughTheSimulator: on the clean simulator both strategies
// give the document's truth, every subsidiary once, grounded in the
// document with spans into it; on the messy one the job ends with its
// attempts numbered and counted.
func TestChunkedThroughTheSimulator(t *testing.T) {
	t.Parallel()
	d, err := sim.NewDocument(3, 0, "en", 50_000)
	if err != nil {
		t.Fatal(err)
	}
	runes := []rune(d.Text)
	want, _ := json.Marshal(d.Truth)
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			m, err := repair.StartDocument(simDocJob(t, strategy, d), nil, repair.Config{})
			if err != nil {
				t.Fatal(err)
			}
			driveSim(t, simCompleter(t, "clean"), m)
			res := m.Result()
			if res.Status != fixpoint.StatusValid {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			var got, truth any
			_ = json.Unmarshal(res.Value, &got)
			_ = json.Unmarshal(want, &truth)
			if g, w := mustMarshal(got), mustMarshal(truth); g != w {
				t.Errorf("value is not the document's truth:\n got %.300s\nwant %.300s", g, w)
			}
			final := res.Attempts[len(res.Attempts)-1]
			if final.Step != fixpoint.StepMerge || len(final.Evidence) == 0 {
				t.Fatalf("last attempt %s with %d groundings, want the merge, graded", final.Step, len(final.Evidence))
			}
			for _, g := range final.Evidence {
				if g.Grade == fixpoint.GradeNone || g.End > len(runes) || g.Start >= g.End {
					t.Errorf("%s: grade %s span %d..%d in a document of %d code points", g.Path, g.Grade, g.Start, g.End, len(runes))
				}
			}
		})
	}
	t.Run("messy", func(t *testing.T) {
		t.Parallel()
		m, err := repair.StartDocument(simDocJob(t, fixpoint.StrategyParallel, d), nil, repair.Config{})
		if err != nil {
			t.Fatal(err)
		}
		driveSim(t, simCompleter(t, "messy"), m)
		res := m.Result()
		calls := 0
		for i, a := range res.Attempts {
			if a.No != i+1 {
				t.Errorf("attempt %d numbered %d", i, a.No)
			}
			if a.Step != fixpoint.StepMerge {
				calls++
			}
		}
		if res.Calls != calls || !res.Status.Final() {
			t.Errorf("%d calls counted, %d attempts with a call; status %s", res.Calls, calls, res.Status)
		}
	})
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
