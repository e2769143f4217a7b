package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/sim"
)

func TestDocsWritesTheDataset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"docs", "--n", "3", "--chars", "50000", "--seed", "2", "--langs", "en,ja", "--out", dir}
	if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if string(read("schema.json")) != sim.DocumentSchema || string(read("template.txt")) != sim.DocumentTemplate {
		t.Error("schema.json or template.txt is not the simulator's")
	}
	var rows []docRow
	sc := bufio.NewScanner(bytes.NewReader(read("dataset.jsonl")))
	for sc.Scan() {
		var r docRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("row %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	wantLangs := []string{"en", "ja", "en"}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, r := range rows {
		if r.Lang != wantLangs[i] || filepath.IsAbs(r.Path) {
			t.Errorf("row %d = %+v, want language %s and a path relative to the directory", i, r, wantLangs[i])
		}
		want, err := sim.NewDocument(2, i, r.Lang, 50_000)
		if err != nil {
			t.Fatal(err)
		}
		if string(read(r.Path)) != want.Text {
			t.Errorf("%s is not document %d", r.Path, i)
		}
		var truth docTruth
		if err := json.Unmarshal(read(filepath.Join("truth", r.ID+".json")), &truth); err != nil {
			t.Fatal(err)
		}
		if truth.ID != r.ID || !reflect.DeepEqual(truth.Truth, want.Truth) || !reflect.DeepEqual(truth.Places, want.Places) {
			t.Errorf("truth/%s.json is not document %d's truth", r.ID, i)
		}
	}

	// The same flags write the same bytes.
	again := t.TempDir()
	args[len(args)-1] = again
	if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dataset.jsonl", "docs/doc-0002.md", "truth/doc-0003.json"} {
		b, err := os.ReadFile(filepath.Join(again, name))
		if err != nil || !bytes.Equal(b, read(name)) {
			t.Errorf("%s differs between two runs with the same flags (%v)", name, err)
		}
	}
}

func TestDocsBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
	}{
		{"no out", []string{"docs"}},
		{"no documents", []string{"docs", "--out", dir, "--n", "0"}},
		{"too many documents", []string{"docs", "--out", dir, "--n", "1000000"}},
		{"too short", []string{"docs", "--out", dir, "--chars", "1000"}},
		{"too long", []string{"docs", "--out", dir, "--chars", "600000"}},
		{"unknown language", []string{"docs", "--out", dir, "--langs", "en,xx"}},
		{"unknown flag", []string{"docs", "--out", dir, "--nope"}},
		{"extra argument", []string{"docs", "--out", dir, "more"}},
		{"serve flag", []string{"docs", "--out", dir, "--preset", "messy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run(%v) = %v, want errUsage", tc.args, err)
			}
			if got := exitCode(err, io.Discard); got != 2 {
				t.Errorf("exit code = %d, want 2", got)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("bad flags wrote %d entries", len(entries))
	}
}

func TestDocsHelp(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	err := run(context.Background(), []string{"docs", "--help"}, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) || exitCode(err, io.Discard) != 0 {
		t.Fatalf("docs --help = %v, want flag.ErrHelp and exit 0", err)
	}
	for _, want := range []string{"-n int", "-chars int", "-seed uint", "-out string", "-langs string", "dataset.jsonl", "schema.json", "template.txt", "truth/"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("docs --help lacks %q", want)
		}
	}
	var top strings.Builder
	_ = run(context.Background(), []string{"--help"}, io.Discard, &top)
	if !strings.Contains(top.String(), "simllm docs") {
		t.Error("simllm --help does not name simllm docs")
	}
}

func TestMaxListItemsFlag(t *testing.T) {
	t.Parallel()
	f := newSimFlags(io.Discard)
	if err := f.fs.Parse([]string{"--preset", "messy"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config()
	if err != nil || cfg.MaxListItems != 30 {
		t.Fatalf("messy: MaxListItems = %d (%v), want the preset's 30", cfg.MaxListItems, err)
	}
	f = newSimFlags(io.Discard)
	if err := f.fs.Parse([]string{"--preset", "messy", "--max-list-items", "0"}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ = f.config(); cfg.MaxListItems != 0 {
		t.Errorf("--max-list-items 0: MaxListItems = %d, want 0", cfg.MaxListItems)
	}
	if err := run(context.Background(), []string{"--max-list-items", "-2"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("--max-list-items -2 = %v, want errUsage", err)
	}
}
