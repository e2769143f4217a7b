package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// Documents are stored once by the hash of their bytes, read back byte for
// byte, and refused when the ledger could not keep them as they are.
func TestPutDocuments(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	ctx := context.Background()
	a, b := store.NewDocument("\ufeffParty: Acme GmbH\r\n\ttrailing  "), store.NewDocument("Party: 株式会社ゼータ")
	n, err := s.PutDocuments(ctx, []store.Document{a, b, a})
	if err != nil || n != 2 {
		t.Fatalf("PutDocuments(a, b, a) = %d, %v; want 2", n, err)
	}
	if n, err = s.PutDocuments(ctx, []store.Document{b, a}); err != nil || n != 0 {
		t.Fatalf("PutDocuments again = %d, %v; want 0", n, err)
	}
	for _, d := range []store.Document{a, b} {
		got, err := s.Document(ctx, d.Hash)
		if err != nil || got != d.Body {
			t.Errorf("Document(%s) = %q, %v; want %q", d.Hash, got, err, d.Body)
		}
	}
	if _, err := s.Document(ctx, store.DocumentHash("never stored")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a document never stored: %v, want ErrNotFound", err)
	}
	for name, d := range map[string]store.Document{
		"wrong hash": {Hash: a.Hash, Body: "Party: Zeta Ltd."},
		"NUL":        store.NewDocument("Party: A\x00B"),
		"not UTF-8":  store.NewDocument("Party: M\xfcller"),
	} {
		if _, err := s.PutDocuments(ctx, []store.Document{d}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A job names its document; a job of none names none.
	if err := s.PutBatch(ctx, store.BatchParams{Name: "docs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, []store.NewJob{{ID: "docs:1", Batch: "docs", RowNo: 1, Prompt: "p", DocumentHash: a.Hash},
		{ID: "docs:2", Batch: "docs", RowNo: 2, Prompt: "p"}}); err != nil {
		t.Fatal(err)
	}
	held, err := s.HeldJobs(ctx, []store.NewJob{{ID: "docs:1", Batch: "docs", Prompt: "p", DocumentHash: b.Hash}, {ID: "docs:2", Batch: "docs", Prompt: "p"}})
	if err != nil || len(held) != 2 {
		t.Fatalf("HeldJobs: %+v, %v", held, err)
	}
	if !held[0].Document || held[1].Document || !held[0].Differs("docs") || held[1].Differs("docs") {
		t.Errorf("HeldJobs: %+v; want docs:1's document to differ, docs:2 the same", held)
	}
	j, _, err := s.Job(ctx, "docs:1")
	if err != nil || j.DocumentHash != a.Hash {
		t.Errorf("Job(docs:1) document %q, %v; want %s", j.DocumentHash, err, a.Hash)
	}
}
