package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint/sim"
)

// docsMaxN bounds --n: a dataset of more documents than this is a typo.
const docsMaxN = 100_000

// docsFlags are the flags of simllm docs.
type docsFlags struct {
	fs      *flag.FlagSet
	n       int
	chars   int
	seed    uint64
	out     string
	langs   string
	langSet []string
}

func newDocsFlags(stderr io.Writer) *docsFlags {
	f := &docsFlags{fs: flag.NewFlagSet("simllm docs", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.IntVar(&f.n, "n", 200, fmt.Sprintf("number of documents (1 to %d)", docsMaxN))
	fs.IntVar(&f.chars, "chars", 120_000, fmt.Sprintf("length of each document in characters (code points), %d to %d; about 4 characters a token in English", sim.DocumentMinChars, sim.DocumentMaxChars))
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the documents: the same seed, --n, --chars and --langs write the same files")
	fs.StringVar(&f.out, "out", "", "directory to write into (created if missing; files of the same names are replaced); required")
	fs.StringVar(&f.langs, "langs", strings.Join(sim.DocumentLangs(), ","), "languages, comma-separated, taken in turn: document i is in language i mod their number (ja is written without spaces between words)")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, `Usage: simllm docs --out DIR [flags]

Writes simulated long documents for the long-document strategies and their
bench: framework agreements whose parties, effective date, governing law,
termination notice period, total amount and currency are planted across the
text (the parties and the date on the first page, the governing law in the
last paragraph), with %d subsidiaries (name, country, ownership percent) in
lists spread over every section, between numbered sections of filler.

Into DIR:
  docs/doc-NNNN.md       each document, Markdown
  dataset.jsonl          one row per document: {"id", "path" (relative to DIR), "lang"}
  schema.json            the JSON Schema the fields and the list match (the list keyed by name)
  template.txt           a prompt template (the document itself goes beside the prompt)
  truth/doc-NNNN.json    each document's ground truth ("truth", an instance of the
                         schema) and where each value is written ("places": JSON
                         pointer, code point span), for scoring recall

The simulator (simllm, worker --sim) answers a request with this schema from
the planted fields and subsidiaries its text holds whole, with its preset's
faults; see "Long documents" in docs/development.md.

Exit status: 0 written, 1 an error writing, 2 bad usage.

Flags:
`, sim.DocumentItems)
		fs.PrintDefaults()
	}
	return f
}

// check validates the flags, naming the one at fault.
func (f *docsFlags) check() error {
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, f.fs.Args())
	}
	if f.out == "" {
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	if f.n < 1 || f.n > docsMaxN {
		return fmt.Errorf("%w: --n %d, want 1 to %d", errUsage, f.n, docsMaxN)
	}
	if f.chars < sim.DocumentMinChars || f.chars > sim.DocumentMaxChars {
		return fmt.Errorf("%w: --chars %d, want %d to %d", errUsage, f.chars, sim.DocumentMinChars, sim.DocumentMaxChars)
	}
	for _, l := range strings.Split(f.langs, ",") {
		l = strings.TrimSpace(l)
		if !slices.Contains(sim.DocumentLangs(), l) {
			return fmt.Errorf("%w: --langs: %q is not one of %v", errUsage, l, sim.DocumentLangs())
		}
		f.langSet = append(f.langSet, l)
	}
	return nil
}

// docRow is one row of dataset.jsonl.
type docRow struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	Lang string `json:"lang"`
}

// docTruth is one file of truth/.
type docTruth struct {
	ID     string            `json:"id"`
	Lang   string            `json:"lang"`
	Chars  int               `json:"chars"`
	Truth  sim.DocumentTruth `json:"truth"`
	Places []sim.Place       `json:"places"`
}

// runDocs writes the documents the flags ask for.
func runDocs(args []string, stdout, stderr io.Writer) error {
	f := newDocsFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := f.check(); err != nil {
		return err
	}
	for _, d := range []string{"docs", "truth"} {
		if err := os.MkdirAll(filepath.Join(f.out, d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	var rows strings.Builder
	enc := json.NewEncoder(&rows)
	enc.SetEscapeHTML(false)
	for i := range f.n {
		lang := f.langSet[i%len(f.langSet)]
		d, err := sim.NewDocument(f.seed, i, lang, f.chars)
		if err != nil {
			return fmt.Errorf("write document %d: %w", i+1, err)
		}
		id := fmt.Sprintf("doc-%04d", i+1)
		path := "docs/" + id + ".md"
		if err := os.WriteFile(filepath.Join(f.out, path), []byte(d.Text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		truth, err := json.Marshal(docTruth{ID: id, Lang: lang, Chars: f.chars, Truth: d.Truth, Places: d.Places})
		if err != nil {
			return fmt.Errorf("encode the truth of %s: %w", id, err)
		}
		if err := os.WriteFile(filepath.Join(f.out, "truth", id+".json"), append(truth, '\n'), 0o644); err != nil {
			return fmt.Errorf("write the truth of %s: %w", id, err)
		}
		if err := enc.Encode(docRow{ID: id, Path: path, Lang: lang}); err != nil {
			return fmt.Errorf("encode row %s: %w", id, err)
		}
	}
	for name, body := range map[string]string{"dataset.jsonl": rows.String(), "schema.json": sim.DocumentSchema, "template.txt": sim.DocumentTemplate} {
		if err := os.WriteFile(filepath.Join(f.out, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	fmt.Fprintf(stdout, "wrote %d documents of %d characters (seed %d, %s) to %s\n", f.n, f.chars, f.seed, strings.Join(f.langSet, ","), f.out)
	return nil
}
