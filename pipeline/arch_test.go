package pipeline

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBenchOutOfWorker keeps the benchmark out of the production binary: it
// is its own command, cmd/fixpoint-bench, and the worker's package holds no
// bench file (code or test) nor links the bench.
func TestBenchOutOfWorker(t *testing.T) {
	t.Parallel()
	const mod = "github.com/fixpoint-dev/fixpoint/"
	out, err := exec.Command("go", "list", "-f", `{{join .GoFiles " "}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}`, mod+"cmd/worker").Output()
	if err != nil {
		t.Fatalf("go list cmd/worker: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 3 {
		t.Fatalf("go list found %d files in cmd/worker: %q", len(files), files)
	}
	for _, f := range files {
		if strings.HasPrefix(f, "bench") {
			t.Errorf("cmd/worker holds %s: the benchmark belongs in cmd/fixpoint-bench", f)
		}
	}
	out, err = exec.Command("go", "list", "-deps", mod+"cmd/worker").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/worker: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == mod+"cmd/fixpoint-bench" || strings.HasPrefix(dep, mod+"cmd/fixpoint-bench/") {
			t.Errorf("cmd/worker links %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-f", "{{.Name}}", mod+"cmd/fixpoint-bench").CombinedOutput()
	if name := strings.TrimSpace(string(out)); err != nil || name != "main" {
		t.Errorf("cmd/fixpoint-bench is not a command (%v): the benchmark must move, not go\n%s", err, out)
	}
}
