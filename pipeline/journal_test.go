package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// journalFiles lists the journal segments in dir.
func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, journalGlob))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// ledgerWithJobs is a new ledger holding batch and its queued jobs ids.
func ledgerWithJobs(t *testing.T, batch string, ids ...string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if err := st.PutBatch(ctx, store.BatchParams{Name: batch, Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]store.NewJob, len(ids))
	for i, id := range ids {
		jobs[i] = store.NewJob{ID: id, Batch: batch, RowNo: i + 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"}
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	return st
}

// paidCall is a reply of job id's delivery, attempt no.
func paidCall(id string, no int) store.Interruption {
	return store.Interruption{JobID: id, Run: 1, Delivery: 1, Attempts: []store.Attempt{{No: no, Raw: `{"x":1}`, Class: "shape",
		TokensIn: 100, TokensOut: 10, CostUSD: 0.001, Model: "m", FinishReason: "stop",
		StartedAt: time.Date(2026, 1, 1, 0, 0, no, 0, time.UTC), Errors: json.RawMessage(`[]`)}}}
}

// The journal keeps a delivery's replies until it ends, across segments,
// and removes a segment once nothing in it is live; what a dead worker's
// segment holds, the next start records as crashed calls, once; a segment
// of a running worker is left alone.
func TestJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st := ledgerWithJobs(t, "jn", "jn:1", "jn:2")

	j := newJournal(dir, log)
	j.max = 2
	one, two := journalKey("jn:1", 1), journalKey("jn:2", 1)
	j.add(one, paidCall("jn:1", 1))
	j.add(one, paidCall("jn:1", 2))
	j.add(one, paidCall("jn:1", 3)) // a second segment
	j.add(two, paidCall("jn:2", 1))
	if got := journalFiles(t, dir); len(got) != 2 {
		t.Fatalf("%d segments, want 2", len(got))
	}
	// A live segment is another worker's: not replayed.
	if n, err := replayJournals(ctx, dir, st, log); n != 0 || err != nil || len(journalFiles(t, dir)) != 2 {
		t.Fatalf("replay while the worker runs: %d recorded (%v), %d segments left; want none recorded, both kept", n, err, len(journalFiles(t, dir)))
	}
	// Job 1's delivery ends: its result is committed, then the first
	// segment goes (the second still holds job 2's live reply).
	res := store.Result{JobID: "jn:1", Status: fixpoint.StatusInvalid, Attempts: 3, Calls: 3, FinalClass: "shape", Deliveries: 1}
	for no := 1; no <= 3; no++ {
		a := paidCall("jn:1", no).Attempts[0]
		res.AttemptRows = append(res.AttemptRows, a)
		res.TokensIn, res.TokensOut, res.CostUSD = res.TokensIn+a.TokensIn, res.TokensOut+a.TokensOut, res.CostUSD+a.CostUSD
	}
	if _, err := st.SaveResults(ctx, []store.Result{res}); err != nil {
		t.Fatal(err)
	}
	j.done(one)
	if got := journalFiles(t, dir); len(got) != 1 {
		t.Fatalf("after job 1's delivery ended: %d segments, want 1", len(got))
	}
	// The worker dies: its file stays, unlocked.
	j.cur.f.Close()
	for i, want := range []int{1, 0} {
		n, err := replayJournals(ctx, dir, st, log)
		if err != nil || n != want {
			t.Fatalf("replay %d: %d recorded (%v), want %d", i+1, n, err, want)
		}
	}
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("after the replay: %v left, want none", got)
	}
	if c, err := st.Counts(ctx, "jn"); err != nil || c.InterruptedRows != 1 {
		t.Errorf("crashed calls recorded: %d (%v), want job 2's 1", c.InterruptedRows, err)
	}

	// A worker that stops with every delivery ended leaves no file.
	j2 := newJournal(dir, log)
	j2.add(one, paidCall("jn:1", 4))
	j2.done(one)
	j2.close()
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("after a clean stop: %v left, want none", got)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// sentCall is job id's call no of delivery 1 as it goes out: what
// repair.Step.Outstanding says of it.
func sentCall(id string, no int) store.Interruption {
	return store.Interruption{JobID: id, Run: 1, Delivery: 1, Attempts: []store.Attempt{{No: no, Class: "provider",
		ProviderClass: "in_flight", ProviderError: "no reply seen", Model: "m",
		StartedAt: time.Date(2026, 1, 1, 0, 1, no, 0, time.UTC), Errors: json.RawMessage(`[]`)}}}
}

// A call the worker sent is in the journal from then on: with no outcome
// when the worker dies (its reply in flight, billed or not), the next start
// records it as a crashed call with no reply; one whose outcome came
// (a paid reply, or an error before any) is not. A call's outcome goes to
// the segment its sent line is in, so a segment read alone tells the two
// apart.
func TestJournalCallsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st := ledgerWithJobs(t, "jf", "jf:1", "jf:2", "jf:3")

	j := newJournal(dir, log)
	j.max = 3
	one, two, three := journalKey("jf:1", 1), journalKey("jf:2", 1), journalKey("jf:3", 1)
	// Job 1: a call that failed unpaid, then one whose reply came.
	j.sent(one, sentCall("jf:1", 1))
	j.ended(one, "no:1", store.Interruption{JobID: "jf:1", Run: 1, Delivery: 1})
	j.sent(one, sentCall("jf:1", 2))
	// Job 2 goes out in the second segment before job 1's reply comes:
	// that reply still goes to the first.
	j.sent(two, sentCall("jf:2", 1))
	j.add(one, paidCall("jf:1", 2))
	// Job 3: a reply, then a call still in flight at the kill.
	j.sent(three, sentCall("jf:3", 1))
	j.add(three, paidCall("jf:3", 1))
	j.sent(three, sentCall("jf:3", 2))
	files := journalFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("%d segments, want the lines spread over several", len(files))
	}
	first, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(first), "\n"); n != 4 {
		t.Errorf("the first segment has %d lines, want job 1's 4 (its reply with its sent line):\n%s", n, first)
	}
	// The worker dies.
	j.mu.Lock()
	for _, seg := range j.open {
		for _, s := range seg {
			s.f.Close()
		}
	}
	j.mu.Unlock()
	n, err := replayJournals(ctx, dir, st, log)
	if err != nil || n != 4 {
		t.Fatalf("replay: %d recorded (%v), want 4: job 1's reply, job 2's call in flight, job 3's reply and call in flight", n, err)
	}
	for _, c := range []struct {
		id          string
		calls, paid int
	}{{"jf:1", 1, 1}, {"jf:2", 1, 0}, {"jf:3", 2, 1}} {
		got, err := st.JobInterrupted(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Reason != store.InterruptCrashed || got[0].Calls != c.calls || got[0].Paid != c.paid {
			t.Errorf("job %s: crashed calls %+v, want %d calls, %d paid", c.id, got, c.calls, c.paid)
		}
	}
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("after the replay: %v left, want none", got)
	}
}

// BenchmarkJournalAdd is the cost of keeping one paid reply on disk: a
// JSON line and a write, no sync.
func BenchmarkJournalAdd(b *testing.B) {
	j := newJournal(b.TempDir(), slog.New(slog.DiscardHandler))
	in := paidCall("jn:1", 1)
	in.Attempts[0].Raw = strings.Repeat(`{"category": "billing"} `, 43) // a 1 KiB reply
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := journalKey("jn:1", i)
		j.add(key, in)
		j.done(key)
	}
	j.close()
}

// A spill file a worker still writes (stopping while the ledger is down)
// is locked: a worker starting on the same directory leaves it alone (it
// wrote it and removed it, and the stopping worker's later records went to
// a file with no name: 66 paid replies without a row). Once its worker has
// closed it, the next start writes it.
func TestSpillFileOfARunningWorkerIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st := ledgerWithJobs(t, "sp", "sp:1")
	in := paidCall("sp:1", 1)
	in.Reason = store.InterruptShutdown
	s := &spill{dir: dir, log: log}
	if !s.add(spillRecord{Interrupted: &in}) {
		t.Fatal("spill did not keep the record")
	}
	if n, err := replaySpill(ctx, dir, st, log); n != 0 || err != nil {
		t.Fatalf("replay while its worker writes it: %d written (%v), want none", n, err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, spillGlob)); len(files) != 1 {
		t.Fatalf("spill files %v after the replay, want the running worker's one kept", files)
	}
	s.close()
	if n, err := replaySpill(ctx, dir, st, log); n != 1 || err != nil {
		t.Fatalf("replay after its worker stopped: %d written (%v), want 1", n, err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, spillGlob)); len(files) != 0 {
		t.Errorf("spill files %v after the replay, want none", files)
	}
}

// A dead worker's journal holding a reply the ledger refuses (a cost
// beyond its column, a reply's errors jsonb cannot hold) is recorded as
// the ledger can take it, the others as they are: the refusal failed the
// whole segment, which was kept and refused again at every start, none of
// its replies recorded.
func TestJournalReplaySalvagesRefusedCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st := ledgerWithJobs(t, "jr", "jr:1", "jr:2", "jr:3")

	j := newJournal(dir, log)
	costly := paidCall("jr:1", 1)
	costly.Attempts[0].CostUSD = 5e10 // beyond numeric(18, 8): salvaged with its text
	j.add(journalKey("jr:1", 1), costly)
	j.add(journalKey("jr:2", 1), paidCall("jr:2", 1))
	unholdable := paidCall("jr:3", 1)
	unholdable.Attempts[0].Errors = json.RawMessage(`[1e200000]`) // beyond jsonb: kept with its counts only
	j.add(journalKey("jr:3", 1), unholdable)
	j.cur.f.Close() // the worker dies

	for i, want := range []int{3, 0} {
		n, err := replayJournals(ctx, dir, st, log)
		if err != nil || n != want {
			t.Fatalf("replay %d: %d recorded (%v), want %d", i+1, n, err, want)
		}
	}
	if got := journalFiles(t, dir); len(got) != 0 {
		t.Errorf("after the replay: %v left, want none", got)
	}
	for _, c := range []struct {
		id       string
		min, max float64
	}{{"jr:1", store.MaxCostUSD - 1, store.MaxCostUSD}, {"jr:2", 0.001, 0.001}, {"jr:3", 0.001, 0.001}} {
		got, err := st.JobInterrupted(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Reason != store.InterruptCrashed || got[0].Calls != 1 || got[0].Paid != 1 || got[0].CostUSD < c.min || got[0].CostUSD > c.max {
			t.Errorf("job %s: crashed calls %+v; want its one paid call, costing $%v to $%v", c.id, got, c.min, c.max)
		}
	}
	if got, err := st.JobInterrupted(ctx, "jr:3"); err == nil && len(got) == 1 && !strings.Contains(got[0].LastError, "counts only") {
		t.Errorf("job jr:3: provider error %q; want it to say the row keeps its counts only", got[0].LastError)
	}
}

// A document job has several calls in flight at once, numbered by the
// Machine after the attempts recorded: each call's outcome ends only its
// own sent line (paired by request), so a worker killed with three chunk
// calls out, the third answered first (and recorded as attempt 1), leaves
// a row for each: the paid reply and the two in flight, none dropped for
// sharing a number. A line of the old format with no call named still
// ends the delivery's call in flight.
func TestJournalDocumentCallsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st := ledgerWithJobs(t, "jd", "jd:1", "jd:2")

	j := newJournal(dir, log)
	doc, old := journalKey("jd:1", 1), journalKey("jd:2", 1)
	for no := 1; no <= 3; no++ {
		in := sentCall("jd:1", no)
		in.Attempts[0].RequestHash = fmt.Sprintf("chunk-%d", no)
		j.sent(doc, in)
	}
	paid := paidCall("jd:1", 1)
	paid.Attempts[0].RequestHash = "chunk-3"
	j.add(doc, paid)
	j.sent(old, sentCall("jd:2", 1))
	j.write(old, journalLine{Interruption: store.Interruption{JobID: "jd:2", Run: 1, Delivery: 1}, Ended: true})
	j.mu.Lock()
	for _, seg := range j.open {
		for _, s := range seg {
			s.f.Close()
		}
	}
	j.mu.Unlock()
	n, err := replayJournals(ctx, dir, st, log)
	if err != nil || n != 3 {
		t.Fatalf("replay: %d recorded (%v), want 3: the paid chunk call and the two in flight", n, err)
	}
	got, err := st.JobInterrupted(ctx, "jd:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Calls != 3 || got[0].Paid != 1 {
		t.Errorf("document job: crashed calls %+v, want 3 calls, 1 paid", got)
	}
	if got, err := st.JobInterrupted(ctx, "jd:2"); err != nil || len(got) != 0 {
		t.Errorf("old-format job: crashed calls %+v (%v), want none: its call ended unpaid", got, err)
	}
}
