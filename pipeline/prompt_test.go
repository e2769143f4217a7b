package pipeline

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/llm"
)

var updatePrompts = flag.Bool("update-prompts", false, "rewrite the system prompt golden files in testdata/prompt")

// TestSystemPromptGolden pins the system prompt, schema description included,
// byte for byte, for the schemas in testdata/prompt: demo.json is a copy of
// demoSchema in cmd/worker/demo.go, nested.json and rootarray.json use $ref,
// $defs, items, nested objects past the description's depth and escaped
// names. The simulator and other tests read these prompts, so any change to
// them must be deliberate: run with -update-prompts and review the diff.
func TestSystemPromptGolden(t *testing.T) {
	t.Parallel()
	schemas, err := filepath.Glob(filepath.Join("testdata", "prompt", "*.json"))
	if err != nil || len(schemas) == 0 {
		t.Fatalf("no schemas in testdata/prompt: %v", err)
	}
	for _, file := range schemas {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			job := &Job{SchemaRaw: raw, Mode: llm.ModePrompt, System: "  Be brief.  "}
			got := systemPrompt(job)
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *updatePrompts {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update-prompts to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("system prompt for %s changed:\n--- got\n%s\n--- want\n%s", name, got, want)
			}
		})
	}
}
