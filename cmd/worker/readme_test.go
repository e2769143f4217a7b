package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's SQL examples answer on the ledger a `make demo` leaves: run
// a small demo, then every statement of every sql block.
func TestREADMEQueries(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	var out bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--database-url", dsn, "--nats-dir", t.TempDir(), "--rows", "60", "--preset", "messy", "--latency", "1ms"},
		strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, out.String())
	}
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(readme(t), -1)
	n := 0
	for _, b := range blocks {
		for _, stmt := range strings.Split(b[1], ";\n") {
			var lines []string
			for _, l := range strings.Split(stmt, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "--") {
					lines = append(lines, l)
				}
			}
			q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";"))
			if q == "" {
				continue
			}
			n++
			rows, err := st.CountRows(context.Background(), q)
			if err != nil || rows == 0 {
				t.Errorf("README query gives %d rows (%v) after make demo:\n%s", rows, err, q)
			}
		}
	}
	if n < 6 {
		t.Errorf("found %d queries in the README's sql blocks, want at least 6", n)
	}
}

// worker --help names the subcommands and every environment variable the
// README's configuration table names.
func TestHelpNamesTheREADMEVariables(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := out.String()
	table := readme(t)
	table = table[strings.Index(table, "## Configuration"):]
	table = table[:strings.Index(table, "\n\n")+2+strings.Index(table[strings.Index(table, "\n\n")+2:], "\n\n")]
	vars := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(table, -1)
	if len(vars) < 10 {
		t.Fatalf("found %d variables in the README's configuration table", len(vars))
	}
	for _, v := range vars {
		if !strings.Contains(help, v[1]) {
			t.Errorf("worker --help does not name %s", v[1])
		}
	}
	for _, cmd := range []string{"migrate", "check", "try", "demo", "--drain --batch"} {
		if !strings.Contains(help, cmd) {
			t.Errorf("worker --help does not name %q", cmd)
		}
	}
	// The benchmark is its own command, cmd/fixpoint-bench: the worker's
	// help may point there but offers no bench of its own, and `worker
	// bench` is an unknown command.
	var top bytes.Buffer
	if code := run(context.Background(), []string{"help"}, strings.NewReader(""), &top, &top); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	offersBench := regexp.MustCompile(`(^|[^-\w])bench\b`)
	for name, text := range map[string]string{"worker --help": help, "worker help": top.String()} {
		if m := offersBench.FindString(text); m != "" {
			t.Errorf("%s offers a bench command (%q); the benchmark is fixpoint-bench:\n%s", name, m, text)
		}
	}
	var bench bytes.Buffer
	if code := run(context.Background(), []string{"bench", "--quick"}, strings.NewReader(""), &bench, &bench); code != exitUsage {
		t.Errorf("worker bench: exit %d, want %d (unknown command)\n%s", code, exitUsage, bench.String())
	}
}
