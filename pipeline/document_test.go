package pipeline_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A batch of documents end to end on the simulator: enqueue stores each
// document once and publishes messages that name it by hash, the worker
// loads it and sends it in the request, the values are graded against
// it, and a job whose document the ledger lost is rejected naming it.
func TestDocumentJobsEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	dir := t.TempDir()
	other := t.TempDir()
	docA := "# Note\r\n\r\nCustomer Ada Lovelace, aged 36, is on the pro plan.  \n"
	docB := "Customer Grace Hopper, aged 45, enterprise tier."
	docC := "Customer Alan Turing, aged 41, free tier."
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{filepath.Join(dir, "docs", "a.md"): docA, filepath.Join(other, "b.txt"): docB, filepath.Join(dir, "c.txt"): docC} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.enqueueConfig("d")
	// No capital letter outside the documents: the simulator copies a
	// name from the capitalized words of the task.
	cfg.Template = "extract the customer record from the document above."
	cfg.DocumentFileField, cfg.DatasetDir = "doc", dir
	cfg.Evidence = fixpoint.EvidenceCheck
	rows := `{"id":"r1","doc":"docs/a.md"}` + "\n" + `{"id":"r2","doc":"docs/a.md"}` + "\n" +
		fmt.Sprintf(`{"id":"r3","doc":%q}`, filepath.Join(other, "b.txt")) + "\n" + `{"id":"r4","doc":"c.txt"}` + "\n"
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	if prog.Recorded != 4 || len(prog.Bad) != 0 {
		t.Fatalf("enqueue: %d recorded, bad %v; want 4, none", prog.Recorded, prog.Bad)
	}
	var docs, bytes int
	h.sqlRow([]any{&docs, &bytes}, `SELECT count(*), coalesce(sum(bytes), 0)::int FROM documents`)
	if docs != 3 || bytes != len(docA)+len(docB)+len(docC) {
		t.Fatalf("documents: %d of %d bytes; want 3 of %d (a.md shared by two rows, stored once)", docs, bytes, len(docA)+len(docB)+len(docC))
	}
	// The messages name the documents; none carries their text.
	stream, err := h.js.Stream(h.ctx, h.q.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		m, err := stream.GetMsg(h.ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		var env struct {
			JobID    string `json:"job_id"`
			Document string `json:"document"`
		}
		if err := json.Unmarshal(m.Data, &env); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"d:r1": docA, "d:r2": docA, "d:r3": docB, "d:r4": docC}[env.JobID]
		if env.Document != store.DocumentHash(want) {
			t.Errorf("message of %s names document %q, want %s", env.JobID, env.Document, store.DocumentHash(want))
		}
		if strings.Contains(string(m.Data), "Customer") {
			t.Errorf("message of %s carries the document's text: %s", env.JobID, m.Data)
		}
	}
	// The stream loses the messages: --resume publishes them again from
	// the ledger, naming the same documents.
	if err := stream.Purge(h.ctx); err != nil {
		t.Fatal(err)
	}
	if prog, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "d", Queue: h.q, Resume: true}, nil); err != nil || prog.Republished != 4 {
		t.Fatalf("resume: %d republished, %v; want 4", prog.Republished, err)
	}
	for seq := uint64(5); seq <= 8; seq++ {
		m, err := stream.GetMsg(h.ctx, seq)
		if err != nil {
			t.Fatalf("republished message %d: %v", seq, err)
		}
		if !strings.Contains(string(m.Data), `"document":"`) || strings.Contains(string(m.Data), "Customer") {
			t.Errorf("republished message %s: want the document's hash, not its text", m.Data)
		}
	}
	// The ledger loses r4's document: its job fails, the others run.
	var gone string
	h.sqlRow([]any{&gone}, `DELETE FROM documents WHERE hash = $1 RETURNING hash`, store.DocumentHash(docC))

	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("d", 4, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	for id, doc := range map[string]string{"d:r1": docA, "d:r2": docA, "d:r3": docB} {
		j, as := h.job(id)
		if j.Status != fixpoint.StatusValid || len(as) == 0 {
			t.Fatalf("job %s: %s after %d attempts (%s); want valid", id, j.Status, len(as), j.Error)
		}
		if j.DocumentHash != store.DocumentHash(doc) {
			t.Errorf("job %s: document_hash %q, want %s", id, j.DocumentHash, store.DocumentHash(doc))
		}
		a := as[len(as)-1]
		// The attempt keeps a line for the document, not its text.
		if strings.Contains(string(a.Request), "Customer") || !strings.Contains(string(a.Request), fmt.Sprintf("%d bytes", len(doc))) {
			t.Errorf("job %s: attempt request %s; want the document named by its size, not its text", id, a.Request)
		}
		var value struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(j.Value, &value); err != nil {
			t.Fatal(err)
		}
		var grades []fixpoint.Grounding
		if err := json.Unmarshal(a.Evidence, &grades); err != nil {
			t.Fatalf("job %s evidence %q: %v", id, a.Evidence, err)
		}
		graded := false
		for _, g := range grades {
			if g.Path != "/name" {
				continue
			}
			graded = true
			// The name is copied from the document: its span is there.
			runes := []rune(doc)
			if g.Grade != fixpoint.GradeExact || g.End > len(runes) || string(runes[g.Start:g.End]) != value.Name {
				t.Errorf("job %s: name %q graded %s at [%d,%d) of its document; want exact, spanning it", id, value.Name, g.Grade, g.Start, g.End)
			}
		}
		if !graded {
			t.Errorf("job %s: no grade for /name in %s", id, a.Evidence)
		}
	}
	j, _ := h.job("d:r4")
	if j.Status != fixpoint.StatusRejected || !strings.Contains(j.Error, "document "+store.DocumentHash(docC)+" is not in the ledger") {
		t.Errorf("job d:r4 of the lost document: %s (%s); want rejected naming the document", j.Status, j.Error)
	}
}
