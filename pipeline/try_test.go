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

// A tried job runs the stages after the schema a batch's job runs: the
// schema's rules (one that does not compile is a bad job, naming it) and
// the evidence stage, against the prompt unless a source is given.
func TestTryJobChecks(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"type":"object","properties":{"vendor":{"type":"string"}},
		"x-fixpoint-rules":[{"rule":"self.vendor != ''","message":"no vendor"}]}`)
	job, err := pipeline.TryJob(pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "Invoice from Acme", Schema: schema, Evidence: fixpoint.EvidenceRequire})
	if err != nil {
		t.Fatal(err)
	}
	if job.Rules == nil || job.Rules.Len() != 1 || job.Evidence != fixpoint.EvidenceRequire || job.Source == nil || job.Source.Text() != "Invoice from Acme" {
		t.Errorf("job rules %v, evidence %q, source %v; want the rule, require, the prompt as source", job.Rules, job.Evidence, job.Source)
	}
	job, err = pipeline.TryJob(pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "p", Schema: schema, Source: "Invoice from Globex"})
	if err != nil || job.Evidence != fixpoint.EvidenceCheck || job.Source.Text() != "Invoice from Globex" {
		t.Errorf("default evidence %q, source %v (%v); want check against the source given", job.Evidence, job.Source, err)
	}
	_, err = pipeline.TryJob(pipeline.TrySpec{Provider: "openai", Model: "m", Prompt: "p", Schema: []byte(`{"type":"object","x-fixpoint-rules":[{"rule":"self.x(","message":"m"}]}`)})
	if !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "x-fixpoint-rules/0") {
		t.Errorf("a rule that does not compile: %v; want a bad job naming it", err)
	}
}
