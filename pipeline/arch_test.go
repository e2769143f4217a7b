package pipeline

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection enforces the architecture: extract and validate are
// pure leaves, llm knows nothing of NATS or Postgres, store is the only
// package that imports pgx, and nothing imports a cmd package (the
// commands share cmd/internal among themselves).
func TestImportDirection(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "github.com/fixpoint-dev/fixpoint/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/fixpoint-dev/fixpoint/"
	type pkg struct {
		ImportPath string
		Imports    []string
	}
	forbidden := map[string][]string{
		"extract":  {"github.com/", "golang.org/", "os", "net/http", "log", "time", mod},
		"validate": {"github.com/jackc", "github.com/nats-io", "os", "net/http", "log", mod + "llm", mod + "store", mod + "pipeline"},
		"llm":      {"github.com/jackc", "github.com/nats-io", "log", mod + "store", mod + "pipeline"},
		"store":    {"github.com/nats-io", mod + "pipeline", mod + "llm", mod + "repair"},
		// The repair step is a state machine: no queue, ledger or network
		// of its own (it uses llm's request and reply types only).
		"repair": {"github.com/jackc", "github.com/nats-io", "net", "net/http", "os", "log", mod + "store", mod + "pipeline", mod + "llm/sim"},
		// The queue side knows nothing of datasets or batch actions.
		"pipeline": {mod + "enqueue"},
		// The statuses are a leaf every package may use.
		"jobstatus": {"github.com/", "golang.org/", "os", "net", "log", mod},
	}
	allowed := map[string][]string{
		// validate wraps the schema library the issue names; extract's types.
		// golang.org/x/text's normalization tables equate canonically
		// equivalent enum values.
		"validate": {"github.com/santhosh-tekuri/jsonschema/v6", "golang.org/x/text/unicode/norm", mod + "extract"},
		// extract decodes what its parser wrote with a pure JSON library
		// (values in, values out), checked against encoding/json in its tests.
		"extract": {"github.com/segmentio/encoding/json"},
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, mod+"cmd/") && !(strings.HasPrefix(imp, mod+"cmd/internal/") && strings.HasPrefix(rel, "cmd/")) {
				t.Errorf("%s imports command package %s", rel, imp)
			}
			if strings.HasPrefix(imp, "github.com/jackc/pgx") && rel != "store" && !strings.HasPrefix(rel, "store/") {
				t.Errorf("%s imports %s: only store may use pgx", rel, imp)
			}
			if strings.HasPrefix(imp, "github.com/nats-io/nats-server") && !strings.HasPrefix(rel, "cmd/") {
				t.Errorf("%s imports %s: only the commands run an embedded NATS server", rel, imp)
			}
			for _, bad := range forbidden[rel] {
				if !(imp == bad || strings.HasPrefix(imp, bad+"/") || strings.HasSuffix(bad, "/") && strings.HasPrefix(imp, bad)) {
					continue
				}
				ok := false
				for _, a := range allowed[rel] {
					if imp == a || strings.HasPrefix(imp, a+"/") {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s must not import %s", rel, imp)
				}
			}
		}
	}
	if seen < 8 {
		t.Fatalf("go list returned %d packages, want the whole module", seen)
	}
}

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

// TestReportLinksNoNATSServer: report only runs SQL views; it must not carry
// the NATS server (issue 14).
func TestReportLinksNoNATSServer(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/fixpoint-dev/fixpoint/cmd/report").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") {
			t.Errorf("cmd/report links %s", dep)
		}
	}
}
