package extract

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenResult is what a golden file holds for one reply.
type goldenResult struct {
	Candidates []goldenCandidate `json:"candidates,omitempty"`
	Error      string            `json:"error,omitempty"`
}

type goldenCandidate struct {
	Source    fixpoint.Source   `json:"source"`
	Start     int               `json:"start"`
	End       int               `json:"end"`
	Truncated bool              `json:"truncated"`
	JSON      json.RawMessage   `json:"json"`
	Repairs   []fixpoint.Repair `json:"repairs"`
}

// TestGolden runs Extract on representative model replies and compares the
// candidates, sources, repairs and offsets with testdata/golden/*.golden.
// Run with -update to rewrite them after an intended change.
func TestGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.input"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("glob golden inputs: %v (%d)", err, len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reply, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var res goldenResult
			cands, err := Extract(string(reply))
			if err != nil {
				res.Error = err.Error()
			}
			for _, c := range cands {
				res.Candidates = append(res.Candidates, goldenCandidate{
					Source: c.Source, Start: c.Start, End: c.End, Truncated: c.Truncated,
					JSON: c.JSON, Repairs: append([]fixpoint.Repair{}, c.Repairs...),
				})
			}
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := strings.TrimSuffix(in, ".input") + ".golden"
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from %s:\n%s", name, path, got)
			}
		})
	}
}
