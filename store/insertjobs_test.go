package store_test

import (
	"context"
	"encoding/json"
	"testing"
)

// InsertJobs copies new jobs straight in, and a chunk holding jobs the
// ledger has already (a rerun) inserts only the others, keeping what the
// ledger holds; both ways store the same row: the schema hash, or NULL
// for none, the input row as a JSON value, a prompt with a NUL cleaned.
func TestInsertJobsSkipsHeldJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, hash := setup(t, "ij", 0)
	first := newJobs("ij", hash, 3)
	first[1].SchemaHash = ""
	first[2].Prompt = "nul\x00here"
	if n, err := s.InsertJobs(ctx, first); err != nil || n != 3 {
		t.Fatalf("InsertJobs: %d, %v; want 3", n, err)
	}
	again := newJobs("ij", hash, 5)
	again[0].Prompt = "changed"
	again[4].SchemaHash = ""
	again[4].Metadata = json.RawMessage(`{"b": [1, 2.50], "a": "x"}`)
	if n, err := s.InsertJobs(ctx, again); err != nil || n != 2 {
		t.Fatalf("InsertJobs of 3 held and 2 new: %d, %v; want 2", n, err)
	}
	for i, want := range []struct {
		prompt, hash, meta string
	}{
		{"extract row 1", hash, `{"row": 1}`},
		{"extract row 2", "", `{"row": 2}`},
		{"nul\uFFFDhere", hash, `{"row": 3}`},
		{"extract row 4", hash, `{"row": 4}`},
		{"extract row 5", "", `{"a": "x", "b": [1, 2.50]}`},
	} {
		j, _, err := s.Job(ctx, jobID("ij", i+1))
		if err != nil {
			t.Fatal(err)
		}
		if j.Prompt != want.prompt || j.SchemaHash != want.hash || string(j.Metadata) != want.meta || j.Published {
			t.Errorf("job %d: prompt %q, hash %q, row %s, published %v; want %q, %q, %s, false",
				i+1, j.Prompt, j.SchemaHash, j.Metadata, j.Published, want.prompt, want.hash, want.meta)
		}
	}
}
