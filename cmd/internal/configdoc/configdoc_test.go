package configdoc

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/llm"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the commands' --help")

// docPath is docs/configuration.md, from this package's directory.
var docPath = filepath.Join("..", "..", "..", "docs", "configuration.md")

// buildCommands builds every command of cmd/ into a directory of the test.
func buildCommands(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var pkgs []string
	for _, c := range Commands {
		pkgs = append(pkgs, "github.com/fixpoint-dev/fixpoint/cmd/"+c.Name)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// docs/configuration.md is what the commands' --help print today; with
// -update the test writes it instead.
func TestConfigurationDoc(t *testing.T) {
	bin := buildCommands(t)
	ctx := context.Background()
	helps, err := Collect(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Commands {
		if !c.ListsSubcommands {
			continue
		}
		missing, err := Discover(ctx, bin, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("%s's help names subcommands configdoc.Commands lacks: %v", c.Name, missing)
		}
	}

	// The environment table and the help texts name the same variables.
	named := map[string][]string{}
	for _, h := range helps {
		for _, v := range EnvNamed(h.Text) {
			named[v] = append(named[v], strings.Join(h.Args, " "))
		}
	}
	var table []string
	for _, e := range Env {
		table = append(table, e.Name)
		if _, ok := named[e.Name]; !ok {
			t.Errorf("configdoc.Env lists %s, which no command's --help names", e.Name)
		}
	}
	for v, where := range named {
		if !slices.Contains(table, v) {
			t.Errorf("%s --help names %s, which configdoc.Env lacks", strings.Join(where, ", "), v)
		}
	}

	got := Render(helps)
	if *update {
		if err := os.WriteFile(docPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", docPath)
		return
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (run: go test ./cmd/internal/configdoc -run TestConfigurationDoc -update)", err)
	}
	if got != string(want) {
		t.Errorf("docs/configuration.md differs from the commands' --help; run make docs "+
			"(go test ./cmd/internal/configdoc -run TestConfigurationDoc -update)\n--- docs/configuration.md\n+++ generated\n%s",
			lineDiff(string(want), got))
	}
}

func TestEnvNamed(t *testing.T) {
	t.Parallel()
	text := `Usage: x [flags]

Flags:
  -database-url string
    	Postgres URL of the ledger (env DATABASE_URL) (default "postgres://")

Environment:
  NATS_URL              NATS server; empty means the embedded queue, the one
                        a worker without NATS_URL serves (NOT_A_NAME)
  FIXPOINT_RPM, FIXPOINT_TPM
                        budgets
Exit status: 0 done.
  AFTER_THE_SECTION     not listed
`
	got := EnvNamed(text)
	want := []string{"DATABASE_URL", "FIXPOINT_RPM", "FIXPOINT_TPM", "NATS_URL"}
	if !slices.Equal(got, want) {
		t.Errorf("EnvNamed = %v, want %v", got, want)
	}
}

func TestUsageLine(t *testing.T) {
	t.Parallel()
	text := `Usage: enqueue --batch NAME [flags] DATA.jsonl
       enqueue requeue --batch NAME
       enqueue cancel --batch NAME
  enqueue waves [BATCH]         per-wave figures
  enqueue cap
enqueue writes the rows to the queue.
`
	var got []string
	for _, m := range usageLine("enqueue").FindAllStringSubmatch(text, -1) {
		got = append(got, m[1])
	}
	want := []string{"requeue", "cancel", "waves", "cap"}
	if !slices.Equal(got, want) {
		t.Errorf("usage lines name %v, want %v", got, want)
	}
}

func TestLineDiff(t *testing.T) {
	t.Parallel()
	got := lineDiff("a\nb\nc\nd\n", "a\nc\nd\ne\n")
	want := "@@ line 2\n-b\n@@ line 5\n+e\n"
	if got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
}

// lineDiff is a line diff of a and b (longest common subsequence): the
// lines only a has with "-", only b has with "+", each run of changes
// after "@@ line N", N its line in a.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	inHunk := false
	hunk := func(i int) {
		if !inHunk {
			fmt.Fprintf(&out, "@@ line %d\n", i+1)
			inHunk = true
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j, inHunk = i+1, j+1, false
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			hunk(i)
			fmt.Fprintf(&out, "+%s\n", y[j])
			j++
		default:
			hunk(i)
			fmt.Fprintf(&out, "-%s\n", x[i])
			i++
		}
	}
	return out.String()
}

// Every row of the provider table reaches the page: its variables in the
// environment table and a row of the providers table; and the providers
// page (docs/providers.md, written by hand) has a row of it too.
func TestEveryProviderReachesTheDoc(t *testing.T) {
	t.Parallel()
	page := Render(nil)
	guide, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "providers.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range llm.Providers() {
		if !strings.Contains(string(guide), "| `"+p.Name+"` | "+string(p.Wire)+" | `"+p.BaseURLDefault+"` |") {
			t.Errorf("docs/providers.md's table has no row of %s (%s, %s)", p.Name, p.Wire, p.BaseURLDefault)
		}
		for _, v := range []string{p.BaseURLEnv, p.KeyEnv} {
			if v != "" && !strings.Contains(page, "| `"+v+"` |") {
				t.Errorf("the environment table lacks %s's %s", p.Name, v)
			}
		}
		if !strings.Contains(page, "| `"+p.Name+"` | "+string(p.Wire)+" | `"+p.BaseURLDefault+"` |") {
			t.Errorf("the providers table lacks %s", p.Name)
		}
	}
}
