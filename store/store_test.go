package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// setup opens a store on a fresh database with one batch, one schema and
// n queued jobs (ids "<batch>-<i>", row numbers from 1).
func setup(t testing.TB, batch string, n int) (*store.Store, string) {
	t.Helper()
	s := storetest.NewStore(t)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: batch, Settings: json.RawMessage(`{"model":"sim-typical"}`), TotalJobs: n}); err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	hash, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatalf("PutSchema: %v", err)
	}
	if n > 0 {
		got, err := s.InsertJobs(ctx, newJobs(batch, hash, n))
		if err != nil {
			t.Fatalf("InsertJobs: %v", err)
		}
		if got != n {
			t.Fatalf("InsertJobs inserted %d, want %d", got, n)
		}
	}
	return s, hash
}

func jobID(batch string, i int) string { return fmt.Sprintf("%s-%d", batch, i) }

func newJobs(batch, hash string, n int) []store.NewJob {
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{
			ID: jobID(batch, i+1), Batch: batch, RowNo: i + 1, SchemaHash: hash,
			Prompt: fmt.Sprintf("extract row %d", i+1), Provider: "sim", Model: "sim-typical",
			Mode: "json", Strategy: "exact",
			Metadata: json.RawMessage(fmt.Sprintf(`{"row":%d}`, i+1)),
		}
	}
	return jobs
}

// result builds a result whose attempts are given by classes: "" is a valid
// attempt, anything else a failed one of that class. Each attempt uses 100
// tokens in, 10 out and 5 cached; the job totals are their sums.
func result(id string, tag string, classes ...string) store.Result {
	r := store.Result{JobID: id, Status: fixpoint.StatusInvalid, Attempts: len(classes), Calls: len(classes), WallMS: 100}
	for i, c := range classes {
		a := store.Attempt{
			No: i + 1, Request: json.RawMessage(`[{"role":"user","content":"x"}]`), Raw: tag,
			Class: c, Valid: c == "", FinishReason: "stop", LatencyMS: 10,
			TokensIn: 100, TokensOut: 10, TokensCached: 5, Model: "sim-typical",
			StartedAt: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC),
		}
		if c != "" {
			a.Errors = json.RawMessage(`[{"path":"/name","keyword":"required","class":"shape","message":"/name: missing"}]`)
		}
		r.AttemptRows = append(r.AttemptRows, a)
		r.TokensIn += a.TokensIn
		r.TokensOut += a.TokensOut
		r.TokensCached += a.TokensCached
		if c == "" {
			r.Status = fixpoint.StatusValid
			r.Value = json.RawMessage(fmt.Sprintf(`{"tag":%q}`, tag))
			r.FirstAttemptValid = i == 0
		} else {
			r.FinalClass = c
		}
	}
	return r
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("third Migrate (pool): %v", err)
	}
	applied, known, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	if applied != known || known < 1 {
		t.Fatalf("schema version = %d of %d, want all (>= 1) applied", applied, known)
	}
	prices, err := s.Prices(ctx)
	if err != nil {
		t.Fatalf("Prices: %v", err)
	}
	if len(prices) != 5 {
		t.Fatalf("model_prices has %d rows after repeated migrations, want the 5 seeded", len(prices))
	}
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewEmptyDB(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = store.Migrate(ctx, dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d: %v", i, err)
		}
	}
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	applied, known, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	if applied != known {
		t.Fatalf("schema version = %d, want %d", applied, known)
	}
	prices, err := s.Prices(ctx)
	if err != nil {
		t.Fatalf("Prices: %v", err)
	}
	want := map[string][3]float64{
		"gpt-4o-mini": {0.15, 0.60, 0.075}, "gpt-4o": {2.5, 10, 1.25},
		"claude-3-5-haiku-latest": {0.8, 4, 0.08}, "claude-sonnet-4": {3, 15, 0.3}, "sim-*": {0, 0, 0},
	}
	if len(prices) != len(want) {
		t.Fatalf("Prices = %d rows, want %d", len(prices), len(want))
	}
	for _, p := range prices {
		if w, ok := want[p.Model]; !ok || w != [3]float64{p.InputPerMTok, p.OutputPerMTok, p.CachedInputPerMTok} {
			t.Errorf("price %+v, want %v", p, w)
		}
	}
}

func TestPutSchema(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "schema", 0)
	ctx := context.Background()
	const canonical = `{"properties":{"a":{"type":"integer"},"b":{"items":[true,null],"type":"array"}},"type":"object"}`
	sum := sha256.Sum256([]byte(canonical))
	wantHash := hex.EncodeToString(sum[:])
	tests := []struct {
		name    string
		body    string
		wantErr error
	}{
		{name: "canonical", body: canonical},
		{name: "reordered keys", body: `{"type":"object","properties":{"b":{"type":"array","items":[true,null]},"a":{"type":"integer"}}}`},
		{name: "whitespace", body: "{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"items\": [ true, null ], \"type\": \"array\"}}\n}\n"},
		{name: "not json", body: `{"type":`, wantErr: store.ErrInvalid},
		{name: "two documents", body: `{} {}`, wantErr: store.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash, err := s.PutSchema(ctx, []byte(tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("PutSchema error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if hash != wantHash {
				t.Fatalf("hash = %s, want %s", hash, wantHash)
			}
			got, err := s.Schema(ctx, hash)
			if err != nil {
				t.Fatalf("Schema: %v", err)
			}
			if string(got) != canonical {
				t.Fatalf("Schema = %s, want %s", got, canonical)
			}
		})
	}
	if _, err := s.Schema(ctx, "0000000000000000000000000000000000000000000000000000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Schema(unknown) error = %v, want ErrNotFound", err)
	}
}

func TestInsertJobsIdempotentAndPublishing(t *testing.T) {
	t.Parallel()
	s, hash := setup(t, "ins", 5)
	ctx := context.Background()
	got, err := s.InsertJobs(ctx, newJobs("ins", hash, 7))
	if err != nil {
		t.Fatalf("InsertJobs again: %v", err)
	}
	if got != 2 {
		t.Fatalf("re-run of 7 jobs over 5 inserted %d, want 2", got)
	}
	if got, err := s.InsertJobs(ctx, newJobs("ins", hash, 7)); err != nil || got != 0 {
		t.Fatalf("third run inserted %d (err %v), want 0", got, err)
	}
	if _, err := s.InsertJobs(ctx, []store.NewJob{{ID: "", Batch: "ins"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("InsertJobs(empty id) error = %v, want ErrInvalid", err)
	}
	if _, err := s.InsertJobs(ctx, []store.NewJob{{ID: "x", Batch: "no-such-batch"}}); err == nil {
		t.Fatalf("InsertJobs into unknown batch succeeded, want a foreign key error")
	}

	if err := s.MarkPublished(ctx, []string{jobID("ins", 1), jobID("ins", 3), "unknown"}); err != nil {
		t.Fatalf("MarkPublished: %v", err)
	}
	un, err := s.Unpublished(ctx, "ins", 0)
	if err != nil {
		t.Fatalf("Unpublished: %v", err)
	}
	var ids []string
	for _, j := range un {
		ids = append(ids, j.ID)
	}
	want := []string{jobID("ins", 2), jobID("ins", 4), jobID("ins", 5), jobID("ins", 6), jobID("ins", 7)}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("Unpublished = %v, want %v", ids, want)
	}
	if un[0].Prompt != "extract row 2" || string(un[0].Metadata) != `{"row": 2}` || un[0].SchemaHash != hash {
		t.Fatalf("Unpublished[0] = %+v, want the job as inserted", un[0])
	}
	if un, err := s.Unpublished(ctx, "ins", 2); err != nil || len(un) != 2 {
		t.Fatalf("Unpublished(limit 2) = %d jobs (err %v), want 2", len(un), err)
	}

	status, final, err := s.JobFinal(ctx, jobID("ins", 1))
	if err != nil || status != fixpoint.StatusQueued || final {
		t.Fatalf("JobFinal = %q, %v, %v; want queued, false, nil", status, final, err)
	}
	if _, _, err := s.JobFinal(ctx, "unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobFinal(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("ins", 2), "x", "shape")}); err != nil {
		t.Fatal(err)
	}
	status, final, err = s.JobFinal(ctx, jobID("ins", 2))
	if err != nil || status != fixpoint.StatusInvalid || !final {
		t.Fatalf("JobFinal after save = %q, %v, %v; want invalid, true, nil", status, final, err)
	}
	st, err := s.Statuses(ctx, []string{jobID("ins", 1), jobID("ins", 2), "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{jobID("ins", 1): "queued", jobID("ins", 2): "invalid"}; fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("Statuses = %v, want %v", st, want)
	}
}

func attemptRaws(t *testing.T, s *store.Store, id string) []string {
	t.Helper()
	_, attempts, err := s.Job(context.Background(), id)
	if err != nil {
		t.Fatalf("Job(%s): %v", id, err)
	}
	var raws []string
	for _, a := range attempts {
		raws = append(raws, a.Raw)
	}
	return raws
}

func TestSaveResultsFirstFinalWins(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "race", 20)
	ctx := context.Background()
	// Two workers finish every job at once: A with 2 attempts, B with 3.
	for i := 1; i <= 20; i++ {
		id := jobID("race", i)
		a := result(id, "A", "shape", "")
		b := result(id, "B", "syntax", "semantic", "semantic")
		var wonA, wonB []bool
		var errA, errB error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; wonA, errA = s.SaveResults(ctx, []store.Result{a}) }()
		go func() { defer wg.Done(); <-start; wonB, errB = s.SaveResults(ctx, []store.Result{b}) }()
		close(start)
		wg.Wait()
		if errA != nil || errB != nil {
			t.Fatalf("SaveResults: %v, %v", errA, errB)
		}
		if wonA[0] == wonB[0] {
			t.Fatalf("job %s: won A=%v B=%v, want exactly one winner", id, wonA[0], wonB[0])
		}
		winner, n, status := "A", 2, fixpoint.StatusValid
		if wonB[0] {
			winner, n, status = "B", 3, fixpoint.StatusInvalid
		}
		raws := attemptRaws(t, s, id)
		if len(raws) != n {
			t.Fatalf("job %s: %d attempt rows, want the winner %s's %d", id, len(raws), winner, n)
		}
		for _, r := range raws {
			if r != winner {
				t.Fatalf("job %s: attempt from %s stored, winner was %s", id, r, winner)
			}
		}
		job, _, err := s.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != status || job.Attempts != n {
			t.Fatalf("job %s = status %s attempts %d, want the winner's %s %d", id, job.Status, job.Attempts, status, n)
		}
	}

	// A later redelivery loses and adds nothing; so does a duplicate in one slice.
	id := jobID("race", 1)
	before := attemptRaws(t, s, id)
	won, err := s.SaveResults(ctx, []store.Result{result(id, "C", "")})
	if err != nil || won[0] {
		t.Fatalf("late SaveResults won=%v err=%v, want false, nil", won, err)
	}
	if got := attemptRaws(t, s, id); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("attempts after losing save = %v, want %v", got, before)
	}
	won, err = s.SaveResults(ctx, []store.Result{result(jobID("race", 2), "C", ""), result("race-new", "D", ""), result("race-new", "E", "")})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(won) != "[false true false]" {
		t.Fatalf("won = %v, want [false true false]", won)
	}
	if got := attemptRaws(t, s, "race-new"); fmt.Sprint(got) != "[D]" {
		t.Fatalf("race-new attempts = %v, want [D] from the first result in the slice", got)
	}
}

func TestSaveResultsBatch(t *testing.T) {
	t.Parallel()
	const n = 500
	s, _ := setup(t, "bulk", n)
	ctx := context.Background()
	results := make([]store.Result, n)
	for i := range results {
		results[i] = result(jobID("bulk", i+1), "x", "syntax", "shape", "")
		results[i].CostUSD = 0.001 // the sum of its attempts' (I5 checks)
		for k := range results[i].AttemptRows {
			results[i].AttemptRows[k].CostUSD = 0.001 / 4
		}
		results[i].AttemptRows[0].CostUSD = 0.0005
	}
	won, err := s.SaveResults(ctx, results)
	if err != nil {
		t.Fatalf("SaveResults: %v", err)
	}
	for i, w := range won {
		if !w {
			t.Fatalf("won[%d] = false on first save", i)
		}
	}
	check := func() {
		t.Helper()
		c, err := s.Counts(ctx, "bulk")
		if err != nil {
			t.Fatal(err)
		}
		want := store.Counts{
			Jobs: n, Final: n, AttemptRows: 3 * n,
			JobTokensIn: 300 * n, JobTokensOut: 30 * n, JobTokensCached: 15 * n,
			AttemptTokensIn: 300 * n, AttemptTokensOut: 30 * n, AttemptTokensCached: 15 * n,
			Calls: 3 * n,
		}
		if c != want {
			t.Fatalf("Counts = %+v, want %+v", c, want)
		}
	}
	check()
	won, err = s.SaveResults(ctx, results)
	if err != nil {
		t.Fatalf("SaveResults again: %v", err)
	}
	for i, w := range won {
		if w {
			t.Fatalf("won[%d] = true on redelivery", i)
		}
	}
	check()
	p, err := s.Progress(ctx, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	if p != (store.Progress{Total: n, Valid: n}) || !p.Done() {
		t.Fatalf("Progress = %+v, want all %d valid", p, n)
	}
}

func TestSaveResultsMissingJobRow(t *testing.T) {
	t.Parallel()
	s, hash := setup(t, "missing", 0)
	ctx := context.Background()
	withJob := result("m-1", "x", "")
	withJob.Job = &store.NewJob{ID: "m-1", Batch: "missing-new", RowNo: 7, SchemaHash: hash, Prompt: "p", Model: "sim-typical", Metadata: json.RawMessage(`{"k":"v"}`)}
	bare := result("m-2", "y", "refusal")
	won, err := s.SaveResults(ctx, []store.Result{withJob, bare})
	if err != nil {
		t.Fatalf("SaveResults: %v", err)
	}
	if !won[0] || !won[1] {
		t.Fatalf("won = %v, want both", won)
	}
	j, attempts, err := s.Job(ctx, "m-1")
	if err != nil {
		t.Fatal(err)
	}
	if j.Batch != "missing-new" || j.RowNo != 7 || j.SchemaHash != hash || string(j.Metadata) != `{"k": "v"}` || j.Status != fixpoint.StatusValid || len(attempts) != 1 {
		t.Fatalf("job m-1 = %+v with %d attempts, want the Job fields, valid, 1 attempt", j, len(attempts))
	}
	if _, err := s.Batch(ctx, "missing-new"); err != nil {
		t.Fatalf("batch of a saved job not created: %v", err)
	}
	j, _, err = s.Job(ctx, "m-2")
	if err != nil {
		t.Fatal(err)
	}
	if j.Batch != "" || j.Status != fixpoint.StatusInvalid || j.FinalClass != "refusal" {
		t.Fatalf("bare job m-2 = %+v, want no batch, invalid, refusal", j)
	}
	_, err = s.SaveResults(ctx, []store.Result{{JobID: "m-3", Status: fixpoint.StatusQueued}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SaveResults(queued) error = %v, want ErrInvalid", err)
	}
	bad := result("m-4", "x", "")
	bad.Value = json.RawMessage(`{"a":`)
	if _, err := s.SaveResults(ctx, []store.Result{bad}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SaveResults(bad value) error = %v, want ErrInvalid", err)
	}
	bad = result("m-5", "x", "")
	bad.AttemptRows = []store.Attempt{{No: 1}, {No: 2, Errors: json.RawMessage(`[{"path":`)}}
	_, err = s.SaveResults(ctx, []store.Result{bad})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "job m-5: attempt 2 errors is not valid JSON") {
		t.Fatalf("SaveResults(bad attempt errors) error = %v, want ErrInvalid naming job m-5, attempt 2 and its errors", err)
	}
}

func TestJobRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "rt", 1)
	ctx := context.Background()
	started := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	r := store.Result{
		JobID: jobID("rt", 1), Status: fixpoint.StatusValid, Value: json.RawMessage(`{"a":1}`),
		Attempts: 1, Calls: 2, FirstAttemptValid: true, RepairedLocally: true,
		TokensIn: 11, TokensOut: 22, TokensCached: 3, CostUSD: 0.125,
		StartedAt: started, FinishedAt: started.Add(1500 * time.Millisecond), WallMS: 1500, Deliveries: 2,
		AttemptRows: []store.Attempt{{
			No: 1, Request: json.RawMessage(`[{"role":"user","content":"hi"}]`), RequestHash: "abc",
			Raw: "```json\n{\"a\":1,}\n```", Source: "fence", Repairs: json.RawMessage(`["trailing_comma"]`),
			Errors: json.RawMessage(`[]`), Valid: true, RepairedLocally: true, FinishReason: "stop",
			LatencyMS: 420, TokensIn: 11, TokensOut: 22, TokensCached: 3, TransportRetries: 1,
			RetryClasses: json.RawMessage(`["rate_limit"]`), ProviderStatus: 200, Model: "sim-typical",
			RequestID: "req-1", StartedAt: started, CostUSD: 0.125, Feedback: "fix it", PriceBasis: "batch",
			TokensCacheWrite: 2, Coerced: 2, PatchOutcome: "applied",
		}},
	}
	if _, err := s.SaveResults(ctx, []store.Result{r}); err != nil {
		t.Fatal(err)
	}
	j, attempts, err := s.Job(ctx, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Calls != 2 || !j.RepairedLocally || j.CostUSD != 0.125 || j.WallMS != 1500 || j.Deliveries != 2 ||
		!j.StartedAt.Equal(started) || !j.FinishedAt.Equal(r.FinishedAt) || string(j.Value) != `{"a": 1}` {
		t.Fatalf("job = %+v, want the saved result's fields", j)
	}
	if len(attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(attempts))
	}
	a := attempts[0]
	want := r.AttemptRows[0]
	// jsonb normalizes whitespace; compare the JSON fields as jsonb prints them.
	want.Request = json.RawMessage(`[{"role": "user", "content": "hi"}]`)
	want.Repairs = json.RawMessage(`["trailing_comma"]`)
	want.RetryClasses = json.RawMessage(`["rate_limit"]`)
	if fmt.Sprintf("%+v", stripTime(a)) != fmt.Sprintf("%+v", stripTime(want)) || !a.StartedAt.Equal(started) {
		t.Fatalf("attempt =\n%+v\nwant\n%+v", a, want)
	}
	if _, _, err := s.Job(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Job(nope) error = %v, want ErrNotFound", err)
	}
}

// TestFlexAttemptRoundTrip: a flex job's attempts keep their basis and
// the tier the provider served, flex or default (a fallback); a call
// asked for no tier reads back with none.
func TestFlexAttemptRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "flexrt", 1)
	ctx := context.Background()
	r := result(jobID("flexrt", 1), "x", "")
	r.AttemptRows = []store.Attempt{
		{No: 1, Errors: json.RawMessage(`[]`), PriceBasis: "flex", ServiceTier: "flex", CostUSD: 0.5},
		{No: 2, Errors: json.RawMessage(`[]`), PriceBasis: "realtime", ServiceTier: "default", CostUSD: 1},
		{No: 3, Errors: json.RawMessage(`[]`), PriceBasis: "realtime"},
	}
	if _, err := s.SaveResults(ctx, []store.Result{r}); err != nil {
		t.Fatal(err)
	}
	_, attempts, err := s.Job(ctx, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range attempts {
		got = append(got, a.PriceBasis+"/"+a.ServiceTier)
	}
	if want := []string{"flex/flex", "realtime/default", "realtime/"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("basis/tier = %v, want %v", got, want)
	}
}

func stripTime(a store.Attempt) store.Attempt {
	a.StartedAt = time.Time{}
	return a
}

func TestReject(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "rej", 3)
	ctx := context.Background()
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("rej", 1), "x", "")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		r           store.Rejection
		wantChanged bool
		wantStatus  fixpoint.Status
		wantErr     error
	}{
		{name: "valid row is kept", r: store.Rejection{JobID: jobID("rej", 1), Batch: "rej", Reason: "late", Status: fixpoint.StatusDead}, wantStatus: fixpoint.StatusValid},
		{name: "queued row is rejected", r: store.Rejection{JobID: jobID("rej", 2), Batch: "rej", Reason: "bad template"}, wantChanged: true, wantStatus: fixpoint.StatusRejected},
		{name: "queued row is dead", r: store.Rejection{JobID: jobID("rej", 3), Batch: "rej", Reason: "max deliveries", Status: fixpoint.StatusDead}, wantChanged: true, wantStatus: fixpoint.StatusDead},
		{name: "missing row is inserted", r: store.Rejection{JobID: "rej-99", Batch: "rej-other", Reason: "poison", Payload: []byte("\x00garbage")}, wantChanged: true, wantStatus: fixpoint.StatusRejected},
		{name: "missing row without batch", r: store.Rejection{JobID: "orphan", Reason: "unparseable"}, wantChanged: true, wantStatus: fixpoint.StatusRejected},
		{name: "bad status", r: store.Rejection{JobID: "x", Status: fixpoint.StatusValid}, wantErr: store.ErrInvalid},
		{name: "empty id", r: store.Rejection{Reason: "x"}, wantErr: store.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed, err := s.Reject(ctx, tt.r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Reject error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if changed != tt.wantChanged {
				t.Fatalf("changed = %v, want %v", changed, tt.wantChanged)
			}
			j, _, err := s.Job(ctx, tt.r.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != tt.wantStatus {
				t.Fatalf("status = %s, want %s", j.Status, tt.wantStatus)
			}
			if tt.wantChanged && (j.Error != tt.r.Reason || string(j.Payload) != string(tt.r.Payload)) {
				t.Fatalf("job = error %q payload %q, want %q %q", j.Error, j.Payload, tt.r.Reason, tt.r.Payload)
			}
			// A rejection is final too: a second one changes nothing.
			if again, err := s.Reject(ctx, tt.r); err != nil || again {
				t.Fatalf("second Reject changed=%v err=%v, want false, nil", again, err)
			}
		})
	}
	// A rejected job cannot later be saved as a result.
	won, err := s.SaveResults(ctx, []store.Result{result(jobID("rej", 2), "x", "")})
	if err != nil || won[0] {
		t.Fatalf("SaveResults after Reject won=%v err=%v, want false", won, err)
	}
}

func TestExportStreamsAllRows(t *testing.T) {
	t.Parallel()
	const n = 1200
	s, _ := setup(t, "exp", n)
	ctx := context.Background()
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("exp", 2), "v", "")}); err != nil {
		t.Fatal(err)
	}
	var got int
	err := s.Export(ctx, "exp", func(r store.ExportRow) error {
		got++
		if r.RowNo != got || r.ID != jobID("exp", got) || string(r.Metadata) != fmt.Sprintf(`{"row": %d}`, got) {
			return fmt.Errorf("row %d = %+v", got, r)
		}
		switch {
		case got == 2 && (r.Status != fixpoint.StatusValid || string(r.Value) != `{"tag": "v"}`):
			return fmt.Errorf("row 2 = %+v, want valid with value", r)
		case got != 2 && (r.Status != fixpoint.StatusQueued || r.Value != nil):
			return fmt.Errorf("row %d = %+v, want queued without value", got, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if got != n {
		t.Fatalf("Export streamed %d rows, want %d", got, n)
	}
	stop := errors.New("stop")
	calls := 0
	err = s.Export(ctx, "exp", func(store.ExportRow) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Export with failing fn: err=%v calls=%d, want stop after 1", err, calls)
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "admin shutdown", err: &pgconn.PgError{Code: "57P01"}, want: true},
		{name: "cannot connect now", err: &pgconn.PgError{Code: "57P03"}, want: true},
		{name: "connection failure", err: fmt.Errorf("save: %w", &pgconn.PgError{Code: "08006"}), want: true},
		{name: "serialization failure", err: &pgconn.PgError{Code: "40001"}, want: true},
		{name: "deadlock", err: &pgconn.PgError{Code: "40P01"}, want: true},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, want: true},
		{name: "unique violation", err: &pgconn.PgError{Code: "23505"}, want: false},
		{name: "check violation", err: &pgconn.PgError{Code: "23514"}, want: false},
		{name: "syntax error", err: &pgconn.PgError{Code: "42601"}, want: false},
		{name: "unexpected eof", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), want: true},
		{name: "canceled", err: fmt.Errorf("x: %w", context.Canceled), want: false},
		{name: "deadline", err: context.DeadlineExceeded, want: false},
		{name: "invalid argument", err: store.ErrInvalid, want: false},
		{name: "not found", err: store.ErrNotFound, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := store.IsTransient(tt.err); got != tt.want {
				t.Fatalf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestIsTransientUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Nothing listens on port 1.
	_, err := store.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", nil)
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if !store.IsTransient(err) {
		t.Fatalf("IsTransient(%v) = false, want true for a refused connection", err)
	}
}

// TestSaveResultsSurvivesTerminatedBackend kills the pooled connection's
// backend (as a Postgres restart would) right before a save: the save must
// retry on a fresh connection and succeed.
func TestSaveResultsSurvivesTerminatedBackend(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	var retries atomic.Int32
	var lastErr atomic.Value
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 1, RetryInitial: time.Millisecond,
		RetryNotifyFunc: func(err error, _ time.Duration) { retries.Add(1); lastErr.Store(err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "kill"}); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i := 1; i <= 3; i++ {
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		var killed int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&killed)
		if err != nil || killed != 1 {
			t.Fatalf("terminated %d backends (err %v), want the pool's 1", killed, err)
		}
		r := result(fmt.Sprintf("kill-%d", i), "x", "")
		r.Job = &store.NewJob{ID: r.JobID, Batch: "kill"}
		won, err := s.SaveResults(ctx, []store.Result{r})
		if err != nil || !won[0] {
			t.Fatalf("SaveResults after terminate: won=%v err=%v", won, err)
		}
	}
	if retries.Load() == 0 {
		t.Fatalf("no retry observed: the terminated connection was never used")
	}
	if err, _ := lastErr.Load().(error); !store.IsTransient(err) {
		t.Fatalf("retried error %v is not transient", err)
	}
	p, err := s.Progress(ctx, "kill")
	if err != nil || p.Valid != 3 {
		t.Fatalf("Progress = %+v (err %v), want 3 valid", p, err)
	}
}

func TestOpenConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     *store.Config
		wantErr error
	}{
		{name: "negative conns", cfg: &store.Config{MaxConns: -1}, wantErr: store.ErrConfig},
		{name: "min over max", cfg: &store.Config{MaxConns: 2, MinConns: 3}, wantErr: store.ErrConfig},
		{name: "negative timeout", cfg: &store.Config{StatementTimeout: -time.Second}, wantErr: store.ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := store.Open(context.Background(), storetest.DefaultURL, tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	c := (*store.Config)(nil).WithDefaults()
	if c.MaxConns != store.MaxConnsDefault || c.RetryMaxElapsed != store.RetryMaxElapsedDefault {
		t.Fatalf("defaults = %+v", c)
	}
}

// Replies may hold NUL bytes, invalid UTF-8 or a \u0000 escape, which text
// and jsonb columns reject; the save must store them (as U+FFFD) rather than
// fail the whole slice.
func TestSaveResultsUnstorableText(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "nul", 2)
	ctx := context.Background()
	r := result(jobID("nul", 1), "a\x00b\xffc", "")
	r.Value = json.RawMessage(`{"k\u0000":"v\u0000","n":[1.50,"\\u0000"]}`)
	r.Error = "e\x00"
	ok := result(jobID("nul", 2), "fine", "")
	won, err := s.SaveResults(ctx, []store.Result{r, ok})
	if err != nil || !won[0] || !won[1] {
		t.Fatalf("SaveResults won=%v err=%v, want both saved", won, err)
	}
	j, attempts, err := s.Job(ctx, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if attempts[0].Raw != "a\uFFFDb\uFFFDc" || j.Error != "e\uFFFD" {
		t.Fatalf("raw %q error %q, want NUL and invalid bytes replaced by U+FFFD", attempts[0].Raw, j.Error)
	}
	if want := `{"n": [1.50, "\\u0000"], "k�": "v�"}`; string(j.Value) != want {
		t.Fatalf("value = %s, want %s", j.Value, want)
	}
}

// Two workers saving overlapping slices in opposite orders must not
// deadlock (rows are locked in id order) and each job has one winner.
func TestSaveResultsOverlappingSlicesNoDeadlock(t *testing.T) {
	t.Parallel()
	const n = 100
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	var deadlocks atomic.Int32
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 4, RetryNotifyFunc: func(err error, _ time.Duration) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			deadlocks.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "dl"}); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		jobs := newJobs(fmt.Sprintf("dl%d", round), "", n)
		for i := range jobs {
			jobs[i].Batch = "dl"
		}
		if _, err := s.InsertJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		fwd := make([]store.Result, n)
		rev := make([]store.Result, n)
		for i, j := range jobs {
			fwd[i] = result(j.ID, "F", "shape", "")
			rev[n-1-i] = result(j.ID, "R", "")
		}
		var wonF, wonR []bool
		var errF, errR error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); wonF, errF = s.SaveResults(ctx, fwd) }()
		go func() { defer wg.Done(); wonR, errR = s.SaveResults(ctx, rev) }()
		wg.Wait()
		if errF != nil || errR != nil {
			t.Fatalf("round %d: SaveResults: %v, %v", round, errF, errR)
		}
		for i := range n {
			if wonF[i] == wonR[n-1-i] {
				t.Fatalf("round %d job %d: won F=%v R=%v, want exactly one", round, i, wonF[i], wonR[n-1-i])
			}
		}
	}
	if d := deadlocks.Load(); d != 0 {
		t.Fatalf("%d deadlocks retried, want none", d)
	}
	c, err := s.Counts(ctx, "dl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Final != 5*n || c.AttemptsMismatch != 0 || c.JobTokensIn != c.AttemptTokensIn {
		t.Fatalf("Counts = %+v, want %d final jobs whose attempts match the winners'", c, 5*n)
	}
}

// Every migration is reversible: down to 0 leaves no ledger table, and up
// again restores the full schema.
func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	count := func() int {
		t.Helper()
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace
			AND relname IN ('batches', 'schemas', 'jobs', 'attempts', 'model_prices', 'system_prompts',
			                'batch_summary', 'failure_classes', 'repair_effectiveness', 'error_paths', 'attempt_requests')`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(); got != 11 {
		t.Fatalf("%d ledger relations after migrate, want 11", got)
	}
	if err := store.MigrateTo(ctx, dsn, 0); err != nil {
		t.Fatalf("MigrateTo(0): %v", err)
	}
	if got := count(); got != 0 {
		t.Fatalf("%d ledger relations after migrating down, want 0", got)
	}
	// Nothing else is left either: every table, view and sequence but
	// tern's version table is gone.
	var left []string
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace
		AND relkind IN ('r', 'v', 'S', 'm') AND 'public.' || relname <> $1 ORDER BY 1`, store.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(left) > 0 {
		t.Fatalf("after migrating down, left: %v (%v); want nothing", left, err)
	}
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate up again: %v", err)
	}
	if got := count(); got != 11 {
		t.Fatalf("%d ledger relations after migrating up again, want 11", got)
	}
}

// A ledger made by a build before the baseline (its version in the table
// those builds used) is refused by Migrate, MigrateTo and SchemaVersion
// with one clear error, and left as it is: never half migrated.
func TestUnreleasedLedgerIsRefused(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewEmptyDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE fixpoint_schema_version (version int4 NOT NULL);
		INSERT INTO fixpoint_schema_version VALUES (21);
		CREATE TABLE batches (name text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnreleasedLedger) || !strings.Contains(err.Error(), "unreleased build") ||
			!strings.Contains(err.Error(), "must be recreated") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want ErrUnreleasedLedger, one line", what, err)
		}
	}
	check("Migrate", store.Migrate(ctx, dsn))
	check("MigrateTo(1)", store.MigrateTo(ctx, dsn, 1))
	check("MigrateTo(0)", store.MigrateTo(ctx, dsn, 0))
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("Store.Migrate", s.Migrate(ctx))
	_, _, err = s.SchemaVersion(ctx)
	check("SchemaVersion", err)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || strings.Join(tables, " ") != "batches fixpoint_schema_version" {
		t.Errorf("tables after the refusals: %v (%v); want the two it had", tables, err)
	}
}

// An attempt number a result repeats (or a zero number that falls on an
// explicit one) keeps its first row: the save does not fail the batch it is
// in, which would hold every other job of that batch back.
func TestSaveResultsRepeatedAttemptNumbers(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "dupno", 2)
	ctx := context.Background()
	r := result(jobID("dupno", 1), "first", "shape", "")
	r.AttemptRows = append(r.AttemptRows, r.AttemptRows[0]) // No 1 again
	r.AttemptRows[2].Raw = "repeat"
	r.AttemptRows = append(r.AttemptRows, store.Attempt{Raw: "zero"}) // No 0 at position 4: becomes 4
	other := result(jobID("dupno", 2), "other", "")
	won, err := s.SaveResults(ctx, []store.Result{r, other})
	if err != nil {
		t.Fatalf("SaveResults: %v", err)
	}
	if !won[0] || !won[1] {
		t.Fatalf("won = %v, want both", won)
	}
	_, attempts, err := s.Job(ctx, jobID("dupno", 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range attempts {
		got = append(got, fmt.Sprintf("%d:%s", a.No, a.Raw))
	}
	if want := []string{"1:first", "2:first", "4:zero"}; !slices.Equal(got, want) {
		t.Fatalf("attempts %v, want %v", got, want)
	}
}

func TestIsRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("save: %w", store.ErrInvalid), true},
		{&pgconn.PgError{Code: "22003"}, true}, // numeric out of range
		{&pgconn.PgError{Code: "23505"}, true},
		{&pgconn.PgError{Code: "54001"}, true}, // stack depth
		{&pgconn.PgError{Code: "57P01"}, false},
		{&pgconn.PgError{Code: "08006"}, false},
		{&pgconn.PgError{Code: ""}, false},
		{context.DeadlineExceeded, false},
		{io.ErrUnexpectedEOF, false},
	} {
		if got := store.IsRefused(tt.err); got != tt.want {
			t.Errorf("IsRefused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A value Postgres cannot store (a number beyond numeric's range) is refused
// as such, and nothing of its batch is written.
func TestSaveResultsRefusedValue(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "refuse", 2)
	ctx := context.Background()
	bad := result(jobID("refuse", 1), "x", "")
	bad.Value = json.RawMessage(`{"n":1e200000}`)
	good := result(jobID("refuse", 2), "y", "")
	_, err := s.SaveResults(ctx, []store.Result{good, bad})
	if err == nil || !store.IsRefused(err) {
		t.Fatalf("SaveResults with an unstorable value: %v, want an error IsRefused reports", err)
	}
	if j, _, err := s.Job(ctx, jobID("refuse", 2)); err != nil || j.Status != fixpoint.StatusQueued {
		t.Fatalf("job saved beside the refused one: %+v, %v; want still queued", j, err)
	}
	if won, err := s.SaveResults(ctx, []store.Result{good}); err != nil || !won[0] {
		t.Fatalf("saving the good result alone: %v, %v", won, err)
	}
}

// A database URL that names no database is refused: Postgres would use the
// user's name, and the ledger was built in the "postgres" database.
func TestOpenNeedsADatabaseName(t *testing.T) {
	// Port 1: should the check miss, nothing is there to be migrated.
	for _, dsn := range []string{"postgres://postgres@127.0.0.1:1/?sslmode=disable", "postgres://postgres@127.0.0.1:1", "host=127.0.0.1 port=1 user=postgres"} {
		if _, err := store.Open(context.Background(), dsn, nil); !errors.Is(err, store.ErrBadURL) || !strings.Contains(err.Error(), "names no database") {
			t.Errorf("Open(%q) = %v, want ErrBadURL naming the missing database", dsn, err)
		}
		if err := store.Migrate(context.Background(), dsn); !errors.Is(err, store.ErrBadURL) {
			t.Errorf("Migrate(%q) = %v, want ErrBadURL", dsn, err)
		}
	}
}
