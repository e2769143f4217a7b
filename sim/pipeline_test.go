package sim

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// TestFormattingFaultsAreRepairedByExtract checks the contract with the
// extractor: every formatting fault on its own is repaired locally, back to
// the value without faults.
func TestFormattingFaultsAreRepairedByExtract(t *testing.T) {
	t.Parallel()
	one := func(k FaultKind) Mix {
		var m Mix
		switch k {
		case FaultFence:
			m.Fence = 1
		case FaultProse:
			m.Prose = 1
		case FaultTrailingComma:
			m.TrailingComma = 1
		case FaultSingleQuotes:
			m.SingleQuotes = 1
		case FaultPythonLiterals:
			m.PythonLiterals = 1
		case FaultComments:
			m.Comments = 1
		}
		return m
	}
	clean := New(Config{Seed: 5, Now: fixedNow})
	for _, k := range allFaultKinds[:6] {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			s := New(Config{Seed: 5, Mix: one(k), Now: fixedNow})
			for i := range 50 {
				body := orderRequest(fmt.Sprintf("fmt-%d", i))
				rec := do(t, s, "/v1/chat/completions", body)
				if got := rec.Header().Get("X-Sim-Faults"); got != string(k) {
					t.Fatalf("X-Sim-Faults = %q, want %q", got, k)
				}
				text, _ := openAIText(t, rec.Body.Bytes())
				want, _ := openAIText(t, do(t, clean, "/v1/chat/completions", body).Body.Bytes())
				if text == want {
					t.Fatalf("reply with %s equals the clean reply %s", k, text)
				}
				gotC, err := extract.Extract(text)
				if err != nil {
					t.Fatalf("extract %q: %v", text, err)
				}
				wantC, err := extract.Extract(want)
				if err != nil {
					t.Fatalf("extract clean %q: %v", want, err)
				}
				if !reflect.DeepEqual(gotC[0].Value, wantC[0].Value) {
					t.Fatalf("%s: extract recovered %s from %q, want %s", k, gotC[0].JSON, text, wantC[0].JSON)
				}
			}
		})
	}
}

// TestPipelineLoopConverges runs the loop the pipeline runs (extract,
// validate, correct with validate's messages) against the messy preset with
// every fault on, in both correction strategies.
func TestPipelineLoopConverges(t *testing.T) {
	t.Parallel()
	sch, err := validate.Compile([]byte(orderSchema))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	feedback := func(res validate.CheckResult, exact bool) string {
		if !exact {
			return "That is not valid. Please try again."
		}
		var b strings.Builder
		b.WriteString("Your reply did not validate:\n")
		for _, e := range res.Errors {
			b.WriteString("- " + e.Message + "\n")
		}
		return b.String()
	}
	const tasks = 300
	for _, strategy := range []string{"conversation", "repair"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			cfg, _ := Preset("messy")
			cfg.Seed, cfg.Now = 21, fixedNow
			s := New(cfg)
			run := func(exact bool) int {
				valid := 0
				for i := range tasks {
					body := orderRequest(fmt.Sprintf("%s-%d", strategy, i))
					base := body["messages"].([]any)
					msgs := base
					for turn := 0; turn <= 3; turn++ {
						body["messages"] = msgs
						text, _ := openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
						res := validate.Check(sch, text)
						if res.Valid {
							valid++
							break
						}
						fb := feedback(res, exact)
						if strategy == "conversation" {
							msgs = append(msgs, map[string]any{"role": "assistant", "content": text}, map[string]any{"role": "user", "content": fb})
						} else {
							quoted := fb + "\n" + fixpoint.PreviousReplyOpen + "\n" + text + "\n" + fixpoint.PreviousReplyClose + "\n"
							msgs = append(base[:len(base):len(base)], map[string]any{"role": "user", "content": quoted})
						}
					}
				}
				return valid
			}
			exact, vague := run(true), run(false)
			t.Logf("%s: valid within 3 corrections: exact %d/%d, vague %d/%d", strategy, exact, tasks, vague, tasks)
			if exact < tasks*85/100 {
				t.Errorf("exact: %d of %d valid, want >= 85%%", exact, tasks)
			}
			if exact-vague < tasks/5 {
				t.Errorf("exact %d vs vague %d: want exact clearly ahead", exact, vague)
			}
		})
	}
}
