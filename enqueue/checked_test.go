package enqueue

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// The jobs kept between the passes read back as written, in order: a
// prompt and a document longer than the file's buffers, empty and
// non-ASCII fields.
func TestCheckedJobsReadBackAsWritten(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	c, err := newCheckedJobs()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	want := []checkedJob{
		{line: 2, rows: 1, id: "b:1", prompt: "Résumé ✓ " + strings.Repeat("x", 600<<10), source: "", metadata: []byte(`{"a":"é"}`)},
		{line: 3, rows: 2, id: "b:2", prompt: "p", source: "Ada Park\nORD-00001", metadata: []byte(`{}`)},
		{line: 300000, rows: 299999, id: "b:" + strings.Repeat("9", IDMaxBytes), prompt: "q", source: "s", metadata: []byte(`{"n":1}`)},
		// A document's text, once, then its hash alone; a document file.
		{line: 300001, rows: 300000, id: "b:d1", prompt: "p", metadata: []byte(`{}`), docHash: "h1", docText: "\ufeffClause ✓\r\n" + strings.Repeat("y", 600<<10)},
		{line: 300002, rows: 300001, id: "b:d2", prompt: "p", metadata: []byte(`{}`), docHash: "h1"},
		{line: 300003, rows: 300002, id: "b:d3", prompt: "p", metadata: []byte(`{}`), docHash: "h2", docPath: "/data/docs/é.md"},
	}
	for i := range want {
		if err := c.add(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.rewind(); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := c.next()
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if got.docHash != w.docHash || got.docPath != w.docPath || got.docText != w.docText {
			t.Fatalf("job %d read back with document %q, file %q, text %.20q (%d bytes); want %q, %q, %.20q (%d bytes)",
				i, got.docHash, got.docPath, got.docText, len(got.docText), w.docHash, w.docPath, w.docText, len(w.docText))
		}
		if got.line != w.line || got.rows != w.rows || got.id != w.id || got.prompt != w.prompt || got.source != w.source || string(got.metadata) != string(w.metadata) {
			t.Fatalf("job %d read back as line %d, rows %d, id %.20q, prompt %.20q (%d bytes), source %q, row %s; want line %d, rows %d, id %.20q, prompt %.20q (%d bytes), source %q, row %s",
				i, got.line, got.rows, got.id, got.prompt, len(got.prompt), got.source, got.metadata, w.line, w.rows, w.id, w.prompt, len(w.prompt), w.source, w.metadata)
		}
	}
	if _, err := c.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last job: %v, want io.EOF", err)
	}
}

// The file is gone from the directory as soon as it is made: a run killed
// leaves nothing in $TMPDIR.
func TestCheckedJobsLeaveNoFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	c, err := newCheckedJobs()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.add(&checkedJob{line: 1, rows: 1, id: "b:1", prompt: "p", metadata: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if len(entries) != 0 {
		t.Fatalf("$TMPDIR holds %s while the jobs are kept; want nothing", entries[0].Name())
	}
}
