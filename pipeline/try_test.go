package pipeline_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// A tried job's id follows its prompt, schema and nonce (the simulator
// draws from it), and not its mode, strategy or coercion (so that those
// can be compared on one input's draws).
func TestTryJobID(t *testing.T) {
	t.Parallel()
	base := pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "p", Schema: []byte(`{"type":"object"}`)}
	id := pipeline.TryJobID(base)
	if !strings.HasPrefix(id, "try-") || pipeline.TryJobID(base) != id {
		t.Fatalf("id %q: want a stable try-... id", id)
	}
	other := base
	other.Mode, other.Limits, other.Model = fixpoint.ModeTool, fixpoint.Limits{Strategy: fixpoint.StrategyRepair, Coerce: fixpoint.CoerceAll}, "n"
	if pipeline.TryJobID(other) != id {
		t.Error("the mode, strategy, coercion or model changed the id")
	}
	seen := map[string]bool{id: true}
	for _, change := range []func(*pipeline.TrySpec){
		func(s *pipeline.TrySpec) { s.Prompt = "q" },
		func(s *pipeline.TrySpec) { s.Schema = []byte(`{"type":"array"}`) },
		func(s *pipeline.TrySpec) { s.Nonce = "1" },
		func(s *pipeline.TrySpec) { s.System = "p" }, // not the same as prompt "p" moved
		func(s *pipeline.TrySpec) { s.System, s.Prompt = "", "p\x00" },
	} {
		s := base
		change(&s)
		got := pipeline.TryJobID(s)
		if seen[got] {
			t.Errorf("%+v: id %s taken already", s, got)
		}
		seen[got] = true
	}
}

// TryJob refuses a job a batch would refuse, saying what is wrong.
func TestTryJobRefuses(t *testing.T) {
	t.Parallel()
	ok := pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "p", Schema: []byte(`{"type":"object"}`)}
	if job, err := pipeline.TryJob(ok); err != nil || job.ID != pipeline.TryJobID(ok) || job.Schema == nil {
		t.Fatalf("a good spec: %v", err)
	}
	for want, change := range map[string]func(*pipeline.TrySpec){
		"the prompt is empty":        func(s *pipeline.TrySpec) { s.Prompt = " " },
		"not UTF-8":                  func(s *pipeline.TrySpec) { s.Prompt = "caf\xe9" },
		"over the workers' limit":    func(s *pipeline.TrySpec) { s.Prompt = strings.Repeat("x", pipeline.MaxPromptBytesDefault+1) },
		"no model":                   func(s *pipeline.TrySpec) { s.Model = "" },
		"the schema is empty":        func(s *pipeline.TrySpec) { s.Schema = nil },
		"no value satisfies":         func(s *pipeline.TrySpec) { s.Schema = []byte(`{"$ref":"#"}`) },
		"max_attempts 30":            func(s *pipeline.TrySpec) { s.Limits.MaxAttempts = 30 },
		"needs \"type\": \"object\"": func(s *pipeline.TrySpec) { s.Mode, s.Schema = fixpoint.ModeTool, []byte(`{"type":"array"}`) },
		"strategy patch needs mode prompt": func(s *pipeline.TrySpec) {
			s.Mode, s.Limits.Strategy = fixpoint.ModeJSONSchema, fixpoint.StrategyPatch
		},
	} {
		s := ok
		change(&s)
		_, err := pipeline.TryJob(s)
		if !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), want) {
			t.Errorf("want an ErrBadJob naming %q, got %v", want, err)
		}
	}
}
