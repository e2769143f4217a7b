package pipeline_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// A tried job under a document strategy needs a document; one given goes
// into the job (and its id), and is checked as text.
func TestTryJobDocument(t *testing.T) {
	t.Parallel()
	spec := pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "Extract the parties", Schema: []byte(`{"type":"object"}`),
		Limits: fixpoint.Limits{Strategy: fixpoint.StrategyParallel}}
	if _, err := pipeline.TryJob(spec); !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "strategy parallel runs over a document") {
		t.Fatalf("no document: %v, want a bad job naming the missing document", err)
	}
	withoutID := pipeline.TryJobID(spec)
	spec.Document = "Agreement between A and B."
	job, err := pipeline.TryJob(spec)
	if err != nil || job.Document != spec.Document || job.ID == withoutID {
		t.Fatalf("TryJob: %v; document %q, id %s (without a document %s)", err, job.Document, job.ID, withoutID)
	}
	spec.Document = "caf\xe9"
	if _, err := pipeline.TryJob(spec); err == nil || !strings.Contains(err.Error(), "document is not UTF-8") {
		t.Errorf("a document not UTF-8: %v", err)
	}
}

// TrySteps marks the deterministic merge as no call, and cuts a tool
// call's arguments.
func TestTrySteps(t *testing.T) {
	t.Parallel()
	res := &fixpoint.Result{Attempts: []fixpoint.Attempt{
		{No: 1, Step: fixpoint.StepChunk, Chunk: &fixpoint.ChunkRef{N: 0, End: 10}, RequestHash: "h", TokensIn: 10},
		{No: 2, Step: fixpoint.StepMerge, Valid: true},
		{No: 3, Step: fixpoint.StepAgent, RequestHash: "h2", ToolCalls: []fixpoint.ToolCall{{Name: "set_output", Arguments: strings.Repeat("x", 500)}}},
	}}
	steps := pipeline.TrySteps(res)
	if !steps[0].Call || steps[1].Call || !steps[2].Call {
		t.Errorf("calls %v %v %v, want the merge alone no call", steps[0].Call, steps[1].Call, steps[2].Call)
	}
	if got := steps[2].ToolCalls[0].Arguments; len([]rune(got)) != pipeline.TryArgumentsMax+1 {
		t.Errorf("arguments of %d characters, want %d and the cut mark", len([]rune(got)), pipeline.TryArgumentsMax)
	}
}
