package enqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

const docSchema = `{"type":"object","properties":{"party":{"type":"string"}},"required":["party"]}`

// docConfig is the config of a batch of documents, given in field.
func docConfig(batch string, q queue.Config) enqueue.Config {
	return enqueue.Config{Batch: batch, Schema: []byte(docSchema), Template: "name the party of contract {{.id}}.", Format: enqueue.FormatJSONL,
		IDField: "id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3}, Queue: q, MaxBadRows: -1}
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// badLines maps each bad row's line to its error.
func badLines(bad []enqueue.BadRow) map[int]string {
	out := map[int]string{}
	for _, b := range bad {
		out[b.Line] = b.Err.Error()
	}
	return out
}

// --document-field: a document shared by rows is stored once, the row is
// recorded without it, and rows whose field is no document's text (too
// big, a number, empty) are bad rows naming it. A re-run records nothing;
// a row whose document changed is a bad row saying so.
func TestEnqueueDocumentField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	js := jetStream(t)
	cfg := docConfig("field", queue.Config{Stream: "DOCFIELD", Subject: "docfield.jobs", Consumer: "docfield"})
	cfg.DocumentField, cfg.MaxDocumentBytes = "body", 64
	shared := "MASTER AGREEMENT between Acme GmbH and Zeta Ltd."
	rows := fmt.Sprintf(`{"id":"c1","body":%q}`+"\n"+`{"id":"c2","body":%q}`+"\n"+`{"id":"c3","body":"Lease: Kappa AG"}`+"\n"+
		`{"id":"c4","body":%q}`+"\n"+`{"id":"c5","body":42}`+"\n"+`{"id":"c6","body":""}`+"\n",
		shared, shared, strings.Repeat("x", 65))
	prog, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	bad := badLines(prog.Bad)
	for line, want := range map[int]string{4: "65 bytes, over --max-document-bytes 64", 5: `field "body" (--document-field) is a number`, 6: "is empty"} {
		if !strings.Contains(bad[line], want) {
			t.Errorf("line %d: bad row %q, want it to say %q", line, bad[line], want)
		}
	}
	if prog.Recorded != 3 || len(prog.Bad) != 3 {
		t.Fatalf("recorded %d, bad %v; want 3 and 3", prog.Recorded, prog.Bad)
	}
	for id, doc := range map[string]string{"field:c1": shared, "field:c2": shared, "field:c3": "Lease: Kappa AG"} {
		j, _, err := st.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.DocumentHash != store.DocumentHash(doc) {
			t.Errorf("job %s names document %q, want %s", id, j.DocumentHash, store.DocumentHash(doc))
		}
		if strings.Contains(string(j.Metadata), "body") {
			t.Errorf("job %s records its row with the document: %s", id, j.Metadata)
		}
		got, err := st.Document(ctx, j.DocumentHash)
		if err != nil || got != doc {
			t.Errorf("document of %s: %q, %v; want %q", id, got, err, doc)
		}
	}
	// Stored once: putting the three documents again stores none.
	if n, err := st.PutDocuments(ctx, []store.Document{store.NewDocument(shared), store.NewDocument(shared), store.NewDocument("Lease: Kappa AG")}); err != nil || n != 0 {
		t.Fatalf("documents stored again: %d, %v; want 0", n, err)
	}

	prog, err = enqueue.Run(ctx, js, st, cfg, strings.NewReader(rows))
	if err != nil || prog.Recorded != 0 || prog.Existing != 3 {
		t.Fatalf("re-run: recorded %d, existing %d, %v; want 0, 3", prog.Recorded, prog.Existing, err)
	}
	changed := strings.Replace(rows, "Kappa AG", "Kappa SE", 1)
	prog, err = enqueue.Run(ctx, js, st, cfg, strings.NewReader(changed))
	if err != nil {
		t.Fatal(err)
	}
	if b := badLines(prog.Bad)[3]; !strings.Contains(b, `id "c3" was enqueued in batch field before with another document`) {
		t.Errorf("a row whose document changed: %q", b)
	}
}

// --document-file-field: paths relative to the dataset's directory and
// absolute ones are read, a file shared by rows is stored once, and a
// missing file, one that is not UTF-8 text or holds a NUL, and one over
// the bound are bad rows naming the file (and the offset).
func TestEnqueueDocumentFileField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	js := jetStream(t)
	dir, elsewhere := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(dir, "docs", "a.md"):   "# Lease\n\nParty: Kappa AG\r\n",
		filepath.Join(elsewhere, "b.txt"):    "\ufeffParty: Zeta Ltd.",
		filepath.Join(dir, "latin1.txt"):     "Party: M\xfcller GmbH",
		filepath.Join(dir, "nul.txt"):        "Party: A\x00B",
		filepath.Join(dir, "big.txt"):        strings.Repeat("y", 101),
		filepath.Join(dir, "docs", "e.txt"):  "",
		filepath.Join(dir, "exactly100.txt"): strings.Repeat("z", 100),
	}
	for p, text := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := docConfig("files", queue.Config{Stream: "DOCFILES", Subject: "docfiles.jobs", Consumer: "docfiles"})
	cfg.DocumentFileField, cfg.DatasetDir, cfg.MaxDocumentBytes = "path", dir, 100
	lines := []string{
		`{"id":"f1","path":"docs/a.md"}`,
		`{"id":"f2","path":"docs/a.md"}`,
		fmt.Sprintf(`{"id":"f3","path":%q}`, filepath.Join(elsewhere, "b.txt")),
		`{"id":"f4","path":"missing.md"}`,
		`{"id":"f5","path":"latin1.txt"}`,
		`{"id":"f6","path":"nul.txt"}`,
		`{"id":"f7","path":"big.txt"}`,
		`{"id":"f8","path":"docs/e.txt"}`,
		`{"id":"f9","path":"exactly100.txt"}`,
		`{"id":"f10","path":7}`,
	}
	prog, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	bad := badLines(prog.Bad)
	for line, want := range map[int]string{
		4:  "document file " + filepath.Join(dir, "missing.md") + " does not exist",
		5:  "document file " + filepath.Join(dir, "latin1.txt") + " is not UTF-8 text: byte 0xfc at offset 8",
		6:  "document file " + filepath.Join(dir, "nul.txt") + " holds a NUL byte at offset 8",
		7:  "document file " + filepath.Join(dir, "big.txt") + " is 101 bytes, over --max-document-bytes 100",
		8:  "is empty",
		10: `field "path" (--document-file-field) is a number, not a file's path`,
	} {
		if !strings.Contains(bad[line], want) {
			t.Errorf("line %d: bad row %q, want it to say %q", line, bad[line], want)
		}
	}
	if prog.Recorded != 4 || len(prog.Bad) != 6 {
		t.Fatalf("recorded %d, bad %v; want 4 and 6", prog.Recorded, prog.Bad)
	}
	for id, p := range map[string]string{"files:f1": filepath.Join(dir, "docs", "a.md"), "files:f2": filepath.Join(dir, "docs", "a.md"),
		"files:f3": filepath.Join(elsewhere, "b.txt"), "files:f9": filepath.Join(dir, "exactly100.txt")} {
		j, _, err := st.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Document(ctx, j.DocumentHash)
		if err != nil || got != files[p] {
			// Byte for byte: the byte order mark and the CRLF kept.
			t.Errorf("document of %s: %q, %v; want %q", id, got, err, files[p])
		}
		if !strings.Contains(string(j.Metadata), `"path"`) {
			t.Errorf("job %s: row recorded without its path: %s", id, j.Metadata)
		}
	}
	var prog2 enqueue.Progress
	if prog2, err = enqueue.Run(ctx, js, st, cfg, strings.NewReader(strings.Join(lines, "\n")+"\n")); err != nil || prog2.Recorded != 0 {
		t.Fatalf("re-run: recorded %d, %v; want 0", prog2.Recorded, err)
	}
}

// Document settings that cannot work are refused before a row is
// recorded, as ErrBadConfig: both flags, a field no row has, a template
// that reads the document's field, evidence against documents the jobs
// do not have.
func TestDocumentSettingsRefused(t *testing.T) {
	t.Parallel()
	rows := `{"id":"c1","body":"text"}` + "\n"
	for name, tc := range map[string]struct {
		mod  func(*enqueue.Config)
		want string
	}{
		"both flags": {func(c *enqueue.Config) { c.DocumentField, c.DocumentFileField = "body", "path" },
			`--document-field "body" and --document-file-field "path"`},
		"no such field": {func(c *enqueue.Config) { c.DocumentField = "bdoy" }, `--document-field "bdoy": no row of the dataset has it`},
		"no such file field": {func(c *enqueue.Config) { c.DocumentFileField = "path" },
			`--document-file-field "path": no row of the dataset has it`},
		"template reads it": {func(c *enqueue.Config) { c.DocumentField, c.Template = "body", "{{if .id}}read {{.body}}{{end}}" },
			"the template uses .body, the --document-field"},
		"evidence without documents": {func(c *enqueue.Config) { c.EvidenceSource = fixpoint.EvidenceSourceDocument },
			"evidence source document: the jobs have no document"},
		"negative bound": {func(c *enqueue.Config) { c.DocumentField, c.MaxDocumentBytes = "body", -1 }, "max document bytes -1 is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := docConfig("refused", queue.Config{})
			tc.mod(&cfg)
			_, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
			if !errors.Is(err, enqueue.ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrBadConfig saying %q", err, tc.want)
			}
		})
	}
}

// The dry run counts the distinct documents and their tokens, and each
// job's input counts its document.
func TestDryRunCountsDocuments(t *testing.T) {
	t.Parallel()
	cfg := docConfig("dry", queue.Config{})
	cfg.DocumentField = "body"
	a, b := strings.Repeat("a", 4000), strings.Repeat("b", 2000)
	rows := fmt.Sprintf(`{"id":"1","body":%q}`+"\n"+`{"id":"2","body":%q}`+"\n"+`{"id":"3","body":%q}`+"\n", a, a, b)
	rep, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 3 || rep.Documents != 2 || rep.DocumentBytes != 6000 || rep.DocumentTokens != 1500 {
		t.Fatalf("dry run: %d jobs, %d documents of %d bytes, %.0f tokens; want 3, 2, 6000, 1500", rep.Jobs, rep.Documents, rep.DocumentBytes, rep.DocumentTokens)
	}
	cfg.DocumentField = ""
	cfg.Template = "name the party of contract {{.id}}."
	plain, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// a twice and b once, a quarter of a byte each, on top of the prompt.
	if d := rep.InputTokens - plain.InputTokens; d < (8000+2000)/4/3-1 || d > (8000+2000)/4/3+1 {
		t.Errorf("input tokens a job: %.0f with documents, %.0f without; want %d more", rep.InputTokens, plain.InputTokens, (8000+2000)/4/3)
	}
}

// A job's document counts against its token budget: every call sends it.
func TestDocumentCountsAgainstTheTokenBudget(t *testing.T) {
	t.Parallel()
	cfg := docConfig("budget", queue.Config{})
	cfg.DocumentField, cfg.MaxTokens, cfg.Limits.TokenBudget = "body", 100, 1200
	rows := fmt.Sprintf(`{"id":"1","body":"short contract"}`+"\n"+`{"id":"2","body":%q}`+"\n", strings.Repeat("clause ", 800))
	rep, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := badLines(rep.Bad)
	if rep.Jobs != 1 || !strings.Contains(bad[2], "(prompt, document, system prompt and schema about") || !strings.Contains(bad[2], "over the token budget of 1200") {
		t.Fatalf("dry run: %d jobs, bad %v; want line 2 over the budget for its document", rep.Jobs, rep.Bad)
	}
}

// docLedger holds back the first chunk's documents a while, and notes any
// job recorded naming a document the ledger lacks and each document it was
// given.
type docLedger struct {
	*store.Store
	mu      sync.Mutex
	put     map[string]int // how many times each document was given
	missing []string       // jobs recorded naming a document not stored
	first   sync.Once
	jobs    chan struct{} // closed by the first chunk of jobs recorded
	jobsOne sync.Once
}

func (l *docLedger) PutDocuments(ctx context.Context, docs []store.Document) (int, error) {
	if len(docs) > 0 {
		// Until some chunk's jobs are recorded, or long enough for a
		// chunk after this one to record its jobs if it does not wait.
		l.first.Do(func() {
			select {
			case <-l.jobs:
			case <-time.After(500 * time.Millisecond):
			}
		})
	}
	l.mu.Lock()
	for _, d := range docs {
		l.put[d.Hash]++
	}
	l.mu.Unlock()
	return l.Store.PutDocuments(ctx, docs)
}

func (l *docLedger) InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error) {
	for _, j := range jobs {
		if _, err := l.Store.Document(ctx, j.DocumentHash); err != nil {
			l.mu.Lock()
			l.missing = append(l.missing, fmt.Sprintf("%s (%v)", j.ID, err))
			l.mu.Unlock()
		}
	}
	l.jobsOne.Do(func() { close(l.jobs) })
	return l.Store.InsertJobsPublishing(ctx, token, jobs)
}

// A document shared by rows in many chunks goes to the ledger once, with
// the chunk of the first row that names it, and before any job that names
// it is recorded: a chunk recorded beside the one before waits for that
// one's documents. 600 rows render on every CPU.
func TestEnqueueStoresEachDocumentOnceBeforeItsJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	js := jetStream(t)
	cfg := docConfig("shared", queue.Config{Stream: "DOCSHARED", Subject: "docshared.jobs", Consumer: "docshared"})
	cfg.DocumentField, cfg.Chunk = "body", 100
	docs := []string{"MASTER AGREEMENT between Acme GmbH and Zeta Ltd.", "Lease: Kappa AG", strings.Repeat("Clause. ", 1000)}
	var rows strings.Builder
	for i := range 600 {
		fmt.Fprintf(&rows, `{"id":"c%d","body":%q}`+"\n", i, docs[i%len(docs)])
	}
	l := &docLedger{Store: st, put: map[string]int{}, jobs: make(chan struct{})}
	prog, err := enqueue.Run(ctx, js, l, cfg, strings.NewReader(rows.String()))
	if err != nil {
		t.Fatal(err)
	}
	if prog.Recorded != 600 {
		t.Fatalf("recorded %d jobs, want 600", prog.Recorded)
	}
	if len(l.missing) > 0 {
		t.Fatalf("%d jobs recorded before their document, first %s", len(l.missing), l.missing[0])
	}
	for _, d := range docs {
		if n := l.put[store.DocumentHash(d)]; n != 1 {
			t.Errorf("document %.20q given to the ledger %d times, want once", d, n)
		}
	}
	if len(l.put) != len(docs) {
		t.Errorf("%d documents given to the ledger, want %d", len(l.put), len(docs))
	}
}

// The second pass reads a document file again, once: a file changed since
// the first pass read it stops the run before a job names it, naming the
// file; the run again records the file as it is now.
func TestEnqueueRefusesADocumentFileChangedAfterTheCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	js := jetStream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.md")
	if err := os.WriteFile(path, []byte("Party: Kappa AG"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := docConfig("changed", queue.Config{Stream: "DOCCHANGED", Subject: "docchanged.jobs", Consumer: "docchanged"})
	cfg.DocumentFileField, cfg.DatasetDir = "path", dir
	cfg.ProgressFunc = func(p enqueue.Progress) {
		if p.Phase == enqueue.PhaseCheck {
			if err := os.WriteFile(path, []byte("Party: Zeta Ltd."), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	rows := `{"id":"f1","path":"a.md"}` + "\n" + `{"id":"f2","path":"a.md"}` + "\n"
	_, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(rows))
	if want := "line 1: document file " + path + " changed after the rows were checked"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error saying %q", err, want)
	}
	if p, err := st.Progress(ctx, "changed"); err != nil || p.Total != 0 {
		t.Fatalf("after the refused run: %d jobs, %v; want none", p.Total, err)
	}

	cfg.ProgressFunc = nil
	prog, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(rows))
	if err != nil || prog.Recorded != 2 {
		t.Fatalf("run again: recorded %d, %v; want 2", prog.Recorded, err)
	}
	j, _, err := st.Job(ctx, "changed:f2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Document(ctx, j.DocumentHash); err != nil || got != "Party: Zeta Ltd." {
		t.Fatalf("document of f2: %q, %v; want the file as it is now", got, err)
	}
}

// Under parallel with a merge model, the dry run counts one merge call a
// job of two or more chunks, priced by the merge model, in the total.
func TestDryRunCountsMergeCalls(t *testing.T) {
	t.Parallel()
	cfg := docConfig("dry-merge", queue.Config{})
	cfg.DocumentField = "body"
	cfg.Limits.Strategy, cfg.Limits.ChunkTokens, cfg.Limits.ChunkOverlap = fixpoint.StrategyParallel, 500, 0
	rows := fmt.Sprintf(`{"id":"1","body":%q}`+"\n"+`{"id":"2","body":"short"}`+"\n", strings.Repeat("clause ", 800))
	without, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Limits.MergeModel = "gpt-4o"
	rep, err := enqueue.DryRun(context.Background(), nil, cfg, strings.NewReader(rows), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if without.MergeCalls != 0 || rep.MergeCalls != 1 || rep.MergeCostUSD <= 0 || !rep.PriceKnown {
		t.Fatalf("merge calls %d without a merge model, %d with (cost %v, priced %v); want 0 and 1 (the short document is one chunk)",
			without.MergeCalls, rep.MergeCalls, rep.MergeCostUSD, rep.PriceKnown)
	}
	if d := rep.CostUSD - without.CostUSD; d < rep.MergeCostUSD*0.999 || d > rep.MergeCostUSD*1.001 {
		t.Errorf("cost %v with the merge call, %v without; want the merge call's %v more", rep.CostUSD, without.CostUSD, rep.MergeCostUSD)
	}
}
