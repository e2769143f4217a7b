package pipeline

import (
	"context"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// simDocJob is a job over a simulated 50,000-character agreement under
// strategy s.
func simDocJob(t *testing.T, s fixpoint.Strategy, seed uint64) (*repair.Job, []chunk.Chunk) {
	t.Helper()
	doc, err := sim.NewDocument(seed, 0, "en", sim.DocumentMinChars)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := validate.Compile([]byte(sim.DocumentSchema))
	if err != nil {
		t.Fatal(err)
	}
	lim := fixpoint.Limits{Strategy: s, ChunkTokens: 4000, ChunkOverlap: 200}
	chunks, err := chunk.Split(doc.Text, chunk.Options{Tokens: lim.ChunkTokens, Overlap: lim.ChunkOverlap})
	if err != nil {
		t.Fatal(err)
	}
	return &repair.Job{ID: "doc-sim-1", Prompt: "Extract the agreement's fields and every subsidiary.", Schema: schema,
		SchemaRaw: []byte(sim.DocumentSchema), Model: "gpt-4o-mini", Mode: fixpoint.ModePrompt, Limits: lim, Document: doc.Text}, chunks
}

// The parallel strategy run by the Loop on the simulator: one chunk call
// per chunk, each attempt naming its chunk, then the merge, and a final
// result whose totals cover every call.
func TestDocumentLoopParallelOnTheSimulator(t *testing.T) {
	t.Parallel()
	client, err := llm.New(simClient(t, "typical", llm.ProviderOpenAI, 5))
	if err != nil {
		t.Fatal(err)
	}
	job, chunks := simDocJob(t, fixpoint.StrategyParallel, 5)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks: want a document longer than one", len(chunks))
	}
	res, err := NewLoop(client, LoopConfig{}).Run(context.Background(), job)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	seen, merges, tokens := map[int]bool{}, 0, 0
	for _, a := range res.Attempts {
		tokens += a.TokensIn + a.TokensOut
		switch a.Step {
		case fixpoint.StepChunk:
			if a.Chunk == nil {
				t.Fatalf("chunk attempt %d names no chunk", a.No)
			}
			seen[a.Chunk.N] = true
		case fixpoint.StepMerge:
			merges++
		}
	}
	if len(seen) != len(chunks) || merges != 1 {
		t.Errorf("attempts over %d of %d chunks and %d merges, want every chunk and one merge", len(seen), len(chunks), merges)
	}
	if !res.Status.Final() || tokens != res.TokensIn+res.TokensOut {
		t.Errorf("status %s, %d tokens in attempts and %d in the totals: want a final result whose totals cover every call", res.Status, tokens, res.TokensIn+res.TokensOut)
	}
}

// The sequential and agent strategies run by the Loop on the simulator
// end final, with the step of each attempt set.
func TestDocumentLoopSequentialAndAgentOnTheSimulator(t *testing.T) {
	t.Parallel()
	for _, s := range []fixpoint.Strategy{fixpoint.StrategySequential, fixpoint.StrategyAgent} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			client, err := llm.New(simClient(t, "typical", llm.ProviderOpenAI, 9))
			if err != nil {
				t.Fatal(err)
			}
			job, _ := simDocJob(t, s, 9)
			res, err := NewLoop(client, LoopConfig{}).Run(context.Background(), job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !res.Status.Final() || len(res.Attempts) == 0 {
				t.Fatalf("status %s after %d attempts, want a final result", res.Status, len(res.Attempts))
			}
			for _, a := range res.Attempts {
				if a.Step == "" {
					t.Errorf("attempt %d has no step", a.No)
				}
			}
			t.Logf("%s: %s after %d attempts", s, res.Status, len(res.Attempts))
		})
	}
}
