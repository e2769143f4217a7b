package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
)

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{args: []string{"--help"}, code: exitOK, want: "Usage: fixpoint-bench [flags]"},
		{args: []string{"--nope"}, code: exitUsage, want: "fixpoint-bench: flag provided but not defined: -nope"},
		{args: []string{"--rounds", "0"}, code: exitUsage, want: "fixpoint-bench: --rounds must be at least 1, got 0"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("fixpoint-bench %q: exit %d, want %d, output lacking %q:\n%s", tc.args, code, tc.code, tc.want, out.String())
		}
	}
}

// The figures are only comparable with the worker's own set-up: figure 2
// pulls as many jobs ahead as `worker run` does by default, and every figure
// runs the batch `worker demo` runs. Until the worker's demo takes its batch
// from cmd/internal/tickets too, its copy must stay equal to that package.
func TestSameSetUpAsTheWorker(t *testing.T) {
	t.Parallel()
	worker := parseDir(t, "../worker")
	ticketsSrc := parseDir(t, "../internal/tickets")
	bench := parseDir(t, ".")

	if got, want := funcBody(t, bench, "workerJobsAhead"), funcBody(t, worker, "jobsAheadDefault"); got == "" || got != want {
		t.Errorf("workerJobsAhead is %q, cmd/worker's jobsAheadDefault %q: figure 2 no longer runs as `worker run` does", got, want)
	}

	usesTickets := false
	for _, f := range worker.files {
		for _, imp := range f.Imports {
			if strings.HasSuffix(imp.Path.Value, `/cmd/internal/tickets"`) {
				usesTickets = true
			}
		}
	}
	for _, c := range []struct{ name, want string }{{"demoSchema", tickets.Schema}, {"demoTemplate", tickets.Template}} {
		got, ok := constString(t, worker, c.name)
		switch {
		case !ok && !usesTickets:
			t.Errorf("cmd/worker has no %s and does not use cmd/internal/tickets: where is the demo's batch?", c.name)
		case ok && got != c.want:
			t.Errorf("cmd/worker's %s differs from cmd/internal/tickets: the bench no longer measures the demo's batch", c.name)
		}
	}
	got, want := funcBody(t, worker, "demoDataset"), funcBody(t, ticketsSrc, "Dataset")
	switch {
	case got == "" && !usesTickets:
		t.Error("cmd/worker has no demoDataset and does not use cmd/internal/tickets")
	case got != "" && got != want:
		t.Errorf("cmd/worker's demoDataset differs from tickets.Dataset:\n%s\n---\n%s", got, want)
	}
}

type parsedDir struct {
	fset  *token.FileSet
	files []*ast.File
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) parsedDir {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	p := parsedDir{fset: token.NewFileSet()}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.files = append(p.files, f)
	}
	return p
}

// funcBody returns the printed body of the function name, "" if none.
func funcBody(t *testing.T, p parsedDir, name string) string {
	t.Helper()
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
				var b bytes.Buffer
				if err := printer.Fprint(&b, p.fset, fn.Body); err != nil {
					t.Fatal(err)
				}
				return b.String()
			}
		}
	}
	return ""
}

// constString returns the value of the string constant name.
func constString(t *testing.T, p parsedDir, name string) (string, bool) {
	t.Helper()
	for _, f := range p.files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if id.Name != name || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s is not a string literal", name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					return v, true
				}
			}
		}
	}
	return "", false
}
