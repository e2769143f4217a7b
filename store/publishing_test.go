package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// published returns the ids of the batch's jobs marked published, of the
// first n.
func published(t *testing.T, s *store.Store, batch string, n int) []string {
	t.Helper()
	var ids []string
	for i := 1; i <= n; i++ {
		j, _, err := s.Job(context.Background(), jobID(batch, i))
		if err != nil {
			t.Fatal(err)
		}
		if j.Published {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// A chunk recorded as published keeps its jobs published once settled,
// but for those the queue did not take; a chunk holding a job the ledger
// has records the new ones unpublished, with no chunk to settle.
func TestInsertJobsPublishingSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, hash := setup(t, "ps", 0)
	token, err := s.StartRecording(ctx, "ps", "sha")
	if err != nil {
		t.Fatal(err)
	}
	n, pc, err := s.InsertJobsPublishing(ctx, token, newJobs("ps", hash, 3))
	if err != nil || n != 3 || pc == 0 {
		t.Fatalf("InsertJobsPublishing: %d, chunk %d, %v; want 3 in a chunk", n, pc, err)
	}
	if got := published(t, s, "ps", 3); len(got) != 3 {
		t.Fatalf("published before settling: %v, want all 3", got)
	}
	if err := s.SettlePublishing(ctx, pc, []string{jobID("ps", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SettlePublishing(ctx, pc, nil); err != nil {
		t.Fatalf("settling twice: %v", err)
	}
	if got, want := published(t, s, "ps", 3), []string{jobID("ps", 1), jobID("ps", 3)}; !slices.Equal(got, want) {
		t.Fatalf("published after settling: %v, want %v", got, want)
	}
	if un, err := s.Unpublished(ctx, "ps", 0); err != nil || len(un) != 1 || un[0].ID != jobID("ps", 2) {
		t.Fatalf("Unpublished: %v, %v; want job 2", un, err)
	}

	n, pc, err = s.InsertJobsPublishing(ctx, token, newJobs("ps", hash, 5))
	if err != nil || n != 2 || pc != 0 {
		t.Fatalf("InsertJobsPublishing of 3 held and 2 new: %d, chunk %d, %v; want 2 with no chunk", n, pc, err)
	}
	if got := published(t, s, "ps", 5); len(got) != 2 {
		t.Fatalf("published: %v; the 2 new jobs should be unpublished", got)
	}
	if _, _, err := s.InsertJobsPublishing(ctx, "", newJobs("ps", hash, 1)); err == nil {
		t.Fatal("InsertJobsPublishing with no token: no error")
	}
}

// The chunks a run left unsettled are reclaimed once the run is gone, or
// by a run of the same dataset, never from a live run of another dataset
// nor by their own run; what the chunk held that is no longer queued
// stays as it is.
func TestReclaimPublishing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, hash := setup(t, "rp", 0)
	jobs := newJobs("rp", hash, 6)
	live, err := s.StartRecording(ctx, "rp", "live-sha")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.StartRecording(ctx, "rp", "gone-sha")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InsertJobsPublishing(ctx, live, jobs[:3]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InsertJobsPublishing(ctx, gone, jobs[3:]); err != nil {
		t.Fatal(err)
	}
	if err := s.StopRecording(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reject(ctx, store.Rejection{JobID: jobID("rp", 6), Batch: "rp", Reason: "too big"}); err != nil {
		t.Fatal(err)
	}
	// The live run's own chunk is its to settle.
	if n, err := s.ReclaimPublishing(ctx, "rp", live, "live-sha"); err != nil || n != 2 {
		t.Fatalf("reclaim by the live run: %d, %v; want the 2 queued jobs of the stopped run's chunk", n, err)
	}
	if got, want := published(t, s, "rp", 6), []string{jobID("rp", 1), jobID("rp", 2), jobID("rp", 3), jobID("rp", 6)}; !slices.Equal(got, want) {
		t.Fatalf("published: %v, want %v", got, want)
	}
	if n, err := s.ReclaimPublishing(ctx, "rp", "", ""); err != nil || n != 0 {
		t.Fatalf("reclaim of the runs gone, the live one's chunk left: %d, %v; want 0", n, err)
	}
	if n, err := s.ReclaimPublishing(ctx, "rp", "another", "live-sha"); err != nil || n != 3 {
		t.Fatalf("reclaim by another run of the live run's dataset: %d, %v; want 3", n, err)
	}
	if n, err := s.ReclaimPublishing(ctx, "rp", "another", "live-sha"); err != nil || n != 0 {
		t.Fatalf("reclaim again: %d, %v; want 0", n, err)
	}
	if p, err := s.Progress(ctx, "rp"); err != nil || p.Unpublished != 5 {
		t.Fatalf("progress: %d unpublished, %v; want 5", p.Unpublished, err)
	}
}
