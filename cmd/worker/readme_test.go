package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// doc reads a file of the repository's documentation, path relative to
// the module root (README.md, docs/ledger.md).
func doc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fenced returns the bodies of the ```lang blocks of text.
func fenced(text, lang string) []string {
	var bodies []string
	for _, m := range regexp.MustCompile("(?s)```"+regexp.QuoteMeta(lang)+"\n(.*?)```").FindAllStringSubmatch(text, -1) {
		bodies = append(bodies, m[1])
	}
	return bodies
}

// statements splits sql blocks into their statements, comment lines
// dropped.
func statements(blocks []string) []string {
	var qs []string
	for _, b := range blocks {
		for _, stmt := range strings.Split(b, ";\n") {
			var lines []string
			for _, l := range strings.Split(stmt, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "--") {
					lines = append(lines, l)
				}
			}
			if q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")); q != "" {
				qs = append(qs, q)
			}
		}
	}
	return qs
}

// assertRows runs each query on the ledger at dsn and fails for one that
// errors or returns no row.
func assertRows(t *testing.T, dsn, where string, queries []string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range queries {
		rows, err := countRows(context.Background(), conn, q)
		if err != nil || rows == 0 {
			t.Errorf("%s query gives %d rows (%v):\n%s", where, rows, err, q)
		}
	}
}

// countRows runs query in a read-only transaction, so that documented SQL
// cannot change the ledger it is checked on, and counts the rows it gives.
func countRows(ctx context.Context, conn *pgx.Conn, query string) (int, error) {
	n := 0
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			n++
		}
		return rows.Err()
	})
	return n, err
}

// The SQL examples of docs/ledger.md answer on the ledger a `make demo`
// leaves: run a small demo, then every statement of every sql block.
func TestREADMEQueries(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	var out bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--database-url", dsn, "--nats-dir", t.TempDir(), "--rows", "60", "--preset", "messy", "--latency", "1ms"},
		strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, out.String())
	}
	qs := statements(fenced(doc(t, "docs/ledger.md"), "sql"))
	if len(qs) < 6 {
		t.Fatalf("found %d queries in docs/ledger.md's sql blocks, want at least 6", len(qs))
	}
	assertRows(t, dsn, "docs/ledger.md (after make demo)", qs)
}

// The README's worked batch runs as written: its shell block's bin/
// commands with the built commands, in a directory holding examples/, on a
// fresh ledger and the embedded queue; the summary shows the jobs and
// valid jobs the README prints, and its SQL answers.
func TestREADMEWorkedBatch(t *testing.T) {
	t.Parallel()
	readme := doc(t, "README.md")
	var commands []string
	for _, block := range fenced(readme, "sh") {
		if !strings.Contains(block, "bin/enqueue") {
			continue
		}
		for _, line := range strings.Split(block, "\n") {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "bin/") {
				commands = append(commands, line)
			}
		}
		break
	}
	if len(commands) < 4 || !strings.HasPrefix(commands[len(commands)-1], "bin/report summary ") {
		t.Fatalf("the README's worked batch: found commands %q, want migrate, enqueue, worker and report summary", commands)
	}
	batch := strings.Fields(commands[len(commands)-1])[2]

	bin := buildCommands(t)
	build := exec.Command("go", "build", "-o", bin, "github.com/fixpoint-dev/fixpoint/cmd/report")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join("..", "..", "examples"))); err != nil {
		t.Fatal(err)
	}
	dsn := storetest.NewDB(t)
	var summary string
	for _, line := range commands {
		cmd := exec.Command("sh", "-c", bin+"/"+strings.TrimPrefix(line, "bin/"))
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0",
			"FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		summary = string(out)
	}

	// The README's summary row and the one the run printed agree on the
	// batch, its jobs and its valid jobs.
	row := func(text string) []string {
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Fields(l); len(f) > 3 && f[0] == batch {
				return f[:3]
			}
		}
		return nil
	}
	var shown []string
	for _, b := range fenced(readme, "text") {
		if shown = row(b); shown != nil {
			break
		}
	}
	if got := row(summary); shown == nil || fmt.Sprint(got) != fmt.Sprint(shown) {
		t.Errorf("report summary row %v, the README shows %v:\n%s", got, shown, summary)
	}
	qs := statements(fenced(readme, "sql"))
	if len(qs) == 0 {
		t.Fatal("no sql block in the README")
	}
	assertRows(t, dsn, "README.md (after its worked batch)", qs)
}

// The cron line of docs/enqueue.md runs as written, with the built
// commands, on its first night: a database that does not exist yet, the
// simulator (--sim clean added to the worker), a clean directory holding
// its s.json, t.txt and data.jsonl.
func TestDocsCronLine(t *testing.T) {
	t.Parallel()
	blocks := fenced(doc(t, "docs/enqueue.md"), "cron")
	if len(blocks) != 1 {
		t.Fatalf("docs/enqueue.md has %d cron blocks, want 1", len(blocks))
	}
	fields := strings.Fields(strings.TrimSpace(blocks[0]))
	if len(fields) < 6 {
		t.Fatalf("cron line %q: want a schedule and a command", blocks[0])
	}
	// The command without its schedule, the directory change, and cron's
	// escaping of %.
	line := strings.Join(fields[5:], " ")
	line = regexp.MustCompile(`^cd \S+ && `).ReplaceAllString(line, "")
	line = strings.ReplaceAll(line, `\%`, "%")
	bin := buildCommands(t)
	line = strings.ReplaceAll(line, "bin/", bin+"/") + " --sim clean"

	const rows = 20
	var data strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&data, `{"id":%d,"customer":"Ada","plan":"pro","order_id":"ORD-%05d","subject":"Charged twice","body":"Refund me, ticket %d."}`+"\n", i, i, i)
	}
	work := t.TempDir()
	for name, body := range map[string]string{"s.json": demoSchema, "t.txt": demoTemplate, "data.jsonl": data.String()} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dsn, _ := storetest.MissingDB(t)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0",
		"FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the cron line exits with %v:\n%s\n%s", err, line, out)
	}
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The batch the line names, as its shell expands it.
	expr := regexp.MustCompile(`--batch ((?:\$\([^)]*\)|[^\s$])+)`).FindStringSubmatch(line)
	if expr == nil {
		t.Fatalf("the cron line names no --batch: %s", line)
	}
	name, err := exec.Command("sh", "-c", "echo "+expr[1]).Output()
	if err != nil {
		t.Fatal(err)
	}
	batch := strings.TrimSpace(string(name))
	p, err := st.Progress(context.Background(), batch)
	if err != nil || p.Total != rows || p.Queued != 0 {
		t.Fatalf("ledger after the cron line: %+v %v; want %d jobs, all final\n%s", p, err, rows, out)
	}
}

// worker --help names the subcommands and every environment variable of
// the table in docs/configuration.md.
func TestHelpNamesTheREADMEVariables(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := out.String()
	table := doc(t, "docs/configuration.md")
	start := strings.Index(table, "## Environment variables")
	if start < 0 {
		t.Fatal("docs/configuration.md has no Environment variables section")
	}
	table = table[start:]
	if end := strings.Index(table[2:], "\n## "); end >= 0 {
		table = table[:end+2]
	}
	vars := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\|[^|]*\\| (.*)\\|$").FindAllStringSubmatch(table, -1)
	if len(vars) < 10 {
		t.Fatalf("found %d variables in docs/configuration.md's environment table", len(vars))
	}
	for _, v := range vars {
		if strings.HasPrefix(v[2], "`report") {
			// Another command's variable: TestConfigurationDoc checks
			// that its help names it.
			continue
		}
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
