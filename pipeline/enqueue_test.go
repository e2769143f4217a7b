package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// rowsJSONL renders rows of {"id": id, "text": text} as JSONL; an id that
// is not a string is written as given (a number).
func rowsJSONL(rows ...[2]string) string {
	var b strings.Builder
	for _, r := range rows {
		id := r[0]
		if !strings.HasPrefix(id, "=") {
			id = fmt.Sprintf("%q", id)
		} else {
			id = id[1:]
		}
		fmt.Fprintf(&b, `{"id":%s,"text":%q}`+"\n", id, r[1])
	}
	return b.String()
}

// Finding 2: a row whose message would pass the queue's size limit is a bad
// row like any other (line, size, limit); the rest of the batch is
// enqueued, and nothing stays in the ledger that blocks a re-run or a
// resume. The message does not carry the input row: the ledger has it.
func TestEnqueueRowTooBigForTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{Queue: queue.Config{MaxMsgSize: 64 << 10}})
	big := strings.Repeat("x", 100<<10)
	data := rowsJSONL([2]string{"a", "one"}, [2]string{"b", big}, [2]string{"c", "three"})

	t.Run("default limit: nothing enqueued", func(t *testing.T) {
		cfg := h.enqueueConfig("big0")
		_, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data))
		if !errors.Is(err, enqueue.ErrTooManyBadRows) {
			t.Fatalf("Enqueue: %v, want ErrTooManyBadRows", err)
		}
		if _, err := h.st.Batch(h.ctx, "big0"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("batch recorded although nothing was enqueued: %v", err)
		}
	})
	t.Run("skipped as a bad row", func(t *testing.T) {
		cfg := h.enqueueConfig("big")
		cfg.MaxBadRows = -1
		for run := 1; run <= 2; run++ {
			prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data))
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			if len(prog.Bad) != 1 || prog.Bad[0].Line != 2 {
				t.Fatalf("run %d: bad rows %v, want line 2", run, prog.Bad)
			}
			msg := prog.Bad[0].Error()
			for _, want := range []string{"line 2", "bytes", fmt.Sprint(64 << 10)} {
				if !strings.Contains(msg, want) {
					t.Errorf("bad row %q does not name %q", msg, want)
				}
			}
			wantRec := 2
			if run == 2 {
				wantRec = 0
			}
			if prog.Recorded != wantRec {
				t.Errorf("run %d recorded %d jobs, want %d", run, prog.Recorded, wantRec)
			}
		}
		cfg.Resume = true
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, nil); err != nil {
			t.Fatalf("resume after a bad row: %v", err)
		}
		if c, _ := h.st.Counts(h.ctx, "big"); c.Published != 2 {
			t.Errorf("%d jobs published, want 2", c.Published)
		}
		b, err := h.st.Batch(h.ctx, "big")
		if err != nil || b.TotalJobs != 2 {
			t.Errorf("batch total_jobs %v (%v), want 2", b, err)
		}
		// The message holds the prompt, not the input row.
		s, err := h.js.Stream(h.ctx, h.q.Stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetMsg(h.ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m.Data), `"metadata"`) {
			t.Errorf("the job message carries the input row: %s", m.Data)
		}
	})
}

// Finding 3: with the default --max-bad-rows 0, a bad row on line 2 stops
// the run before line 1 is recorded or published.
func TestEnqueueChecksEveryRowFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("half")
	data := rowsJSONL([2]string{"a", "one"}) + "not json\n" + rowsJSONL([2]string{"c", "three"})
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data))
	if !errors.Is(err, enqueue.ErrTooManyBadRows) || len(prog.Bad) != 1 || prog.Bad[0].Line != 2 {
		t.Fatalf("Enqueue: %v, bad %v; want ErrTooManyBadRows for line 2", err, prog.Bad)
	}
	if !strings.Contains(err.Error(), ": 1 bad row, over --max-bad-rows 0") {
		t.Errorf("Enqueue: %q, want it to say 1 bad row, over --max-bad-rows 0", err)
	}
	if got := h.streamMsgs(); got != 0 {
		t.Errorf("%d messages published before the bad row stopped the run", got)
	}
	if p := h.progress("half"); p.Total != 0 {
		t.Errorf("%d jobs recorded before the bad row stopped the run", p.Total)
	}
}

// Finding 4: a repeated id with other content is a bad row (1 and "1" are
// the same id); a repeated identical row is skipped; ids that differ only
// in a newline and a space stay two jobs, both run to the end.
func TestEnqueueDuplicateAndCollidingIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	t.Run("repeats", func(t *testing.T) {
		cfg := h.enqueueConfig("dup")
		cfg.MaxBadRows = -1
		data := rowsJSONL([2]string{"a", "one"}, [2]string{"a", "other"}, [2]string{"=1", "n"}, [2]string{"1", "s"},
			[2]string{"b", "same"}, [2]string{"b", "same"})
		prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		for _, b := range prog.Bad {
			lines = append(lines, b.Line)
		}
		if !equalInts(lines, []int{2, 4}) || !strings.Contains(prog.Bad[0].Error(), "repeats line 1") ||
			!strings.Contains(prog.Bad[1].Error(), "repeats line 3") {
			t.Errorf("bad rows %v, want lines 2 and 4 naming the lines they repeat", prog.Bad)
		}
		if prog.Repeated != 1 || prog.Recorded != 3 {
			t.Errorf("repeated %d, recorded %d; want 1 identical repeat skipped, 3 jobs", prog.Repeated, prog.Recorded)
		}
		// The batch remembers what it is short of.
		if n, err := h.st.BadRows(h.ctx, "dup"); err != nil || n != 2 {
			t.Errorf("BadRows = %d, %v; want the 2 bad rows left out", n, err)
		}
		// A row its template cannot render is missing until a fixed file
		// records it.
		withBad := rowsJSONL([2]string{"c", "fine"}) + `{"id":"d"}` + "\n"
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(withBad)); err != nil {
			t.Fatal(err)
		}
		if n, err := h.st.BadRows(h.ctx, "dup"); err != nil || n != 3 {
			t.Errorf("BadRows = %d, %v; want 3 with the row that does not render", n, err)
		}
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rowsJSONL([2]string{"c", "fine"}, [2]string{"d", "fixed"}))); err != nil {
			t.Fatal(err)
		}
		if n, err := h.st.BadRows(h.ctx, "dup"); err != nil || n != 2 {
			t.Errorf("BadRows = %d, %v; want 2 once the fixed file recorded row d", n, err)
		}
	})
	t.Run("newline and space", func(t *testing.T) {
		cfg := h.enqueueConfig("ws")
		data := rowsJSONL([2]string{"x\ny", "one"}, [2]string{"x y", "two"}, [2]string{"x%0Ay", "three"}, [2]string{"x#y", "four"})
		prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data))
		if err != nil || prog.Published != 4 || prog.Duplicates != 0 {
			t.Fatalf("Enqueue: %+v, %v; want 4 published, no duplicate", prog, err)
		}
		rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
		h.waitDone("ws", 4, 30*time.Second)
		rw.stop(t, 20*time.Second)
		for _, id := range []string{"ws:x\ny", "ws:x y", "ws:x%0Ay", "ws:x#y"} {
			if j, _ := h.job(id); j.Status != fixpoint.StatusValid {
				t.Errorf("job %q is %s, want valid", id, j.Status)
			}
		}
	})
}

// A batch keeps the rows it was first given: a re-run whose row under a
// known id has other content names the row as bad, before anything is
// recorded, instead of skipping it silently; so does a file with a line
// inserted when ids are line numbers. The same file again, and new rows,
// are fine. (Compared in chunks of 2 rows, reported in line order.)
func TestEnqueueRerunWithChangedRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	first := rowsJSONL([2]string{"a", "teh screen"}, [2]string{"b", "battery died"}, [2]string{"c", "ok"})
	t.Run("id field", func(t *testing.T) {
		cfg := h.enqueueConfig("rerun")
		cfg.Chunk = 2
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(first)); err != nil {
			t.Fatal(err)
		}
		if prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(first)); err != nil || prog.Existing != 3 || len(prog.Bad) != 0 {
			t.Fatalf("the same file again: %+v %v, want 3 already enqueued", prog, err)
		}
		changed := rowsJSONL([2]string{"d", "new"}, [2]string{"c", "ok, edited"}, [2]string{"b", "battery died"}, [2]string{"a", "the screen"})
		prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(changed))
		if !errors.Is(err, enqueue.ErrTooManyBadRows) || len(prog.Bad) != 2 || prog.Bad[0].Line != 2 || prog.Bad[1].Line != 4 ||
			!strings.Contains(prog.Bad[0].Error(), `id "c" was enqueued in batch rerun before with another prompt`) {
			t.Fatalf("re-run with rows 2 and 4 changed: %v, bad %v; want both named", err, prog.Bad)
		}
		if !strings.Contains(err.Error(), ": 2 bad rows, over --max-bad-rows 0") {
			t.Errorf("Enqueue: %q, want it to say 2 bad rows, over --max-bad-rows 0", err)
		}
		if _, _, err := h.st.Job(h.ctx, "rerun:d"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the new row of the refused run: %v, want it not recorded", err)
		}
		cfg.MaxBadRows = -1
		prog, err = enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(changed))
		if err != nil || prog.Recorded != 1 || len(prog.Bad) != 2 {
			t.Fatalf("re-run accepting bad rows: %+v %v; want the new row recorded, the changed two bad", prog, err)
		}
		if j, _ := h.job("rerun:a"); j.Prompt == "" || strings.Contains(j.Prompt, "the screen") {
			t.Errorf("job a holds %q, want the content first enqueued", j.Prompt)
		}
	})
	t.Run("line numbers", func(t *testing.T) {
		cfg := h.enqueueConfig("rerun-lines")
		cfg.IDField = ""
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(first)); err != nil {
			t.Fatal(err)
		}
		inserted := rowsJSONL([2]string{"z", "inserted on top"}) + first
		prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(inserted))
		if !errors.Is(err, enqueue.ErrTooManyBadRows) || len(prog.Bad) != 3 || !strings.Contains(prog.Bad[0].Error(), "without --id-field a row's id is its line number") {
			t.Fatalf("a line inserted on top: %v, bad %v; want lines 1 to 3 bad, naming line-number ids", err, prog.Bad)
		}
	})
}

// A numeric id is one id however it is written: the same rows exported by
// another tool (1e2 for 100, 2.50 for 2.5) are the batch's jobs, not new
// ones paid for again.
func TestEnqueueNumericIDsAcrossRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("num")
	// Past 40 digits a number is canonical with an exponent.
	long := "1" + strings.Repeat("0", 46)
	first := rowsJSONL([2]string{"=1e2", "e"}, [2]string{"=2.50", "f"}, [2]string{"=7", "g"}, [2]string{"=" + long, "long"})
	if prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(first)); err != nil || prog.Recorded != 4 {
		t.Fatalf("first run: %+v %v", prog, err)
	}
	for _, id := range []string{"num:100", "num:2.5", "num:7", "num:1e46"} {
		if _, _, err := h.st.Job(h.ctx, id); err != nil {
			t.Errorf("job %s: %v", id, err)
		}
	}
	again := rowsJSONL([2]string{"=100", "e"}, [2]string{"=2.5", "f"}, [2]string{"=7.0", "g"}, [2]string{"=1e46", "long"})
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(again))
	if err != nil || prog.Existing != 4 || prog.Recorded != 0 || prog.Published != 0 {
		t.Fatalf("the rows with their ids written another way: %+v %v; want 4 already enqueued", prog, err)
	}
	// Ids that were strings stay as written: "01" is not 1, and a re-run
	// of both is two jobs already enqueued (they were taken for one).
	text := h.enqueueConfig("text")
	strs := rowsJSONL([2]string{"01", "zero one"}, [2]string{"1", "one"}, [2]string{"1.10", "ten"}, [2]string{"1.1", "one one"})
	for run := 1; run <= 2; run++ {
		prog, err := enqueue.Run(h.ctx, h.js, h.st, text, strings.NewReader(strs))
		if err != nil || prog.Recorded+prog.Existing != 4 || len(prog.Bad) != 0 {
			t.Fatalf("string ids, run %d: %+v %v; want 4 jobs", run, prog, err)
		}
	}
	csv := h.enqueueConfig("csv")
	csv.Format = enqueue.FormatCSV
	for run := 1; run <= 2; run++ {
		prog, err := enqueue.Run(h.ctx, h.js, h.st, csv, strings.NewReader("id,text\n007,bond\n7,seven\n1.1,a\n1.10,b\n"))
		if err != nil || prog.Recorded+prog.Existing != 4 || len(prog.Bad) != 0 {
			t.Fatalf("CSV ids, run %d: %+v %v; want 4 jobs, ids as written", run, prog, err)
		}
	}
}

// Finding 7: enqueue creates the stream if it is missing and never touches
// the workers' consumer or an existing stream's limits.
func TestEnqueueLeavesTheQueueAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	workers := h.q
	workers.AckWait, workers.MaxDeliver, workers.MaxAckPending, workers.Duplicates = 7*time.Second, 9, 33, 3*time.Hour
	if _, _, err := queue.Ensure(h.ctx, h.js, workers); err != nil {
		t.Fatal(err)
	}
	cfg := h.enqueueConfig("alone")
	cfg.Queue.AckWait, cfg.Queue.MaxDeliver, cfg.Queue.MaxAckPending = time.Minute, 5, 4096
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(3))); err != nil {
		t.Fatal(err)
	}
	ci := h.consumerInfo()
	if c := ci.Config; c.AckWait != 7*time.Second || c.MaxDeliver != 9 || c.MaxAckPending != 33 {
		t.Errorf("consumer after enqueue: ack wait %s, max deliver %d, max ack pending %d; want the workers' 7s, 9, 33",
			c.AckWait, c.MaxDeliver, c.MaxAckPending)
	}
	s, err := h.js.Stream(h.ctx, h.q.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if d := s.CachedInfo().Config.Duplicates; d != 3*time.Hour {
		t.Errorf("stream duplicates window after enqueue %s, want the workers' 3h", d)
	}
	// On a server without the stream, enqueue creates it (and no consumer).
	h2 := newHarness(t, harnessConfig{})
	if _, err := enqueue.Run(h2.ctx, h2.js, h2.st, h2.enqueueConfig("fresh"), strings.NewReader(dataset(2))); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.js.Consumer(h2.ctx, h2.q.Stream, h2.q.Consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("enqueue made the consumer: %v", err)
	}
	if got := h2.streamMsgs(); got != 2 {
		t.Errorf("stream holds %d messages, want 2", got)
	}
}

// Finding 13: a re-run with other settings is refused with the list of
// differences; --resume takes every setting from the batch as recorded.
func TestEnqueueSettingsDoNotDrift(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("drift")
	cfg.Chunk = 2
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(6)))
	if err != nil || prog.Published != 6 {
		t.Fatalf("first run: %+v %v", prog, err)
	}
	other := cfg
	other.Model, other.Limits.MaxAttempts = "sim-other", 5
	cheap := 0.005
	other.Cap.MaxCostUSD = &cheap // the cap is listed with the rest, not refused on its own later
	_, err = enqueue.Run(h.ctx, h.js, h.st, other, strings.NewReader(dataset(6)))
	if !errors.Is(err, enqueue.ErrSettingsChanged) || !errors.Is(err, enqueue.ErrBadConfig) {
		t.Fatalf("re-run with another model: %v, want ErrSettingsChanged", err)
	}
	other.Cap.MaxCostUSD = nil
	for _, want := range []string{"model: recorded sim-model, now sim-other", "max attempts: recorded 3, now 5", "max cost: recorded none, now $0.005"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	// With another template too, the refusal is still the settings' list,
	// not the rows' prompts differing from the recorded ones.
	other.Template = "Other: " + cfg.Template
	prog, err = enqueue.Run(h.ctx, h.js, h.st, other, strings.NewReader(dataset(6)))
	if !errors.Is(err, enqueue.ErrSettingsChanged) || !strings.Contains(err.Error(), "model: recorded sim-model, now sim-other") || len(prog.Bad) != 0 {
		t.Errorf("re-run with another template and model: %v, %d bad rows; want ErrSettingsChanged naming the model, no bad row", err, len(prog.Bad))
	}
	b, err := h.st.Batch(h.ctx, "drift")
	if err != nil {
		t.Fatal(err)
	}
	was, err := enqueue.ParseBatchSettings(b)
	if err != nil || was.Model != "sim-model" || was.Limits.MaxAttempts != 3 {
		t.Errorf("recorded settings after the refused re-run: %+v %v", was, err)
	}
	// The stream loses the jobs (finding 6); resume, with other settings
	// in its config, republishes them with the recorded ones.
	s, err := h.js.Stream(h.ctx, h.q.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(h.ctx); err != nil {
		t.Fatal(err)
	}
	res := enqueue.Config{Batch: "drift", Resume: true, Queue: h.q, Model: "sim-other", Provider: llm.ProviderAnthropic}
	prog, err = enqueue.Run(h.ctx, h.js, h.st, res, nil)
	if err != nil || prog.Republished != 6 || prog.Published != 0 {
		t.Fatalf("resume: %+v %v; want the 6 lost jobs republished", prog, err)
	}
	again, err := enqueue.Run(h.ctx, h.js, h.st, res, nil)
	if err != nil || again.Republished != 0 {
		t.Fatalf("second resume: %+v %v; want nothing republished, the stream holds every job", again, err)
	}
	m, err := s.GetMsg(h.ctx, 1, jetstream.WithGetMsgSubject(h.q.Subject))
	if err != nil {
		t.Fatal(err)
	}
	env, err := queue.DecodeEnvelope(m.Data)
	if err != nil || env.Model != "sim-model" || env.Provider != llm.ProviderOpenAI || env.Limits.MaxAttempts != 3 {
		t.Errorf("resumed job runs with %+v (%v), want the recorded sim-model on openai with 3 attempts", env, err)
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "nope", Resume: true, Queue: h.q}, nil); !errors.Is(err, enqueue.ErrNoBatch) {
		t.Errorf("resume of a batch that does not exist: %v, want ErrNoBatch", err)
	}
	// A batch whose first run recorded no job (its insert failed) has
	// nothing to resume: an error, not "0 jobs" and success.
	if err := h.st.PutBatch(h.ctx, store.BatchParams{Name: "empty", Settings: b.Settings, SchemaHash: b.SchemaHash}); err != nil {
		t.Fatal(err)
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "empty", Resume: true, Queue: h.q}, nil); !errors.Is(err, enqueue.ErrEmptyBatch) {
		t.Errorf("resume of a batch with no job: %v, want ErrEmptyBatch", err)
	}
}

// Settings that cannot work are refused before anything is recorded:
// unknown provider, mode or strategy, a template that does not parse.
func TestEnqueueRefusesBadSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	for _, tc := range []struct {
		name string
		mod  func(*enqueue.Config)
		want error
	}{
		{"provider", func(c *enqueue.Config) { c.Provider = "gemini" }, enqueue.ErrBadConfig},
		{"mode", func(c *enqueue.Config) { c.Mode = "json" }, enqueue.ErrBadConfig},
		{"strategy", func(c *enqueue.Config) { c.Limits.Strategy = "retry" }, enqueue.ErrBadConfig},
		{"template", func(c *enqueue.Config) { c.Template = "Hello {{.text" }, enqueue.ErrBadTemplate},
		{"schema", func(c *enqueue.Config) { c.Schema = []byte(`{"type": 1}`) }, enqueue.ErrBadSchema},
		{"unsatisfiable schema", func(c *enqueue.Config) { c.Schema = []byte(`{"$ref": "#"}`) }, enqueue.ErrBadSchema},
		// Every call of such a batch would be refused by the provider.
		{"negative max tokens", func(c *enqueue.Config) { c.MaxTokens = -5 }, enqueue.ErrBadConfig},
		{"temperature over 2", func(c *enqueue.Config) { t := 5.0; c.Temp = &t }, enqueue.ErrBadConfig},
		{"temperature NaN", func(c *enqueue.Config) { t := math.NaN(); c.Temp = &t }, enqueue.ErrBadConfig},
		{"negative prompt limit", func(c *enqueue.Config) { c.MaxPromptBytes = -1 }, enqueue.ErrBadConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := "refuse-" + strings.ReplaceAll(tc.name, " ", "-")
			cfg := h.enqueueConfig(batch)
			tc.mod(&cfg)
			_, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(2)))
			if !errors.Is(err, tc.want) || !errors.Is(err, enqueue.ErrBadConfig) {
				t.Fatalf("Enqueue: %v, want %v (a usage error)", err, tc.want)
			}
			if _, err := h.st.Batch(h.ctx, batch); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a batch row was created: %v", err)
			}
		})
	}
}

// Finding 5: a worker whose ledger never recorded a job refuses it loudly
// (error log, metric), never acks it and writes nothing; a worker on the
// right ledger then finishes every job.
func TestWorkerOnTheWrongLedger(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	h.enqueue("b", n)
	wrongDSN := storetest.NewDB(t)
	wrong, err := store.Open(context.Background(), wrongDSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	cfg := h.workerConfig(h.client(nil))
	cfg.ForeignDelay = 300 * time.Millisecond
	w, err := pipeline.NewWorker(h.js, wrong, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, 20*time.Second, "every job refused", func() bool {
		return metricValue(cfg.Metrics.ForeignJobs) >= n && w.Refusing() != nil
	})
	// Refusing, it pulls one job a time per ForeignDelay: the jobs keep
	// their deliveries for the right workers (a nak counts one).
	time.Sleep(5 * cfg.ForeignDelay)
	if got := metricValue(cfg.Metrics.ForeignJobs); got > n+7 {
		t.Errorf("%v deliveries refused in 5 delays, want at most one a delay after the first %d", got, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.logs.String(), "level=ERROR") || !strings.Contains(h.logs.String(), "not in this worker's ledger") {
		t.Errorf("no error line names the refusal:\n%s", h.logs.tail(20))
	}
	if got := h.sim.requests(); got != 0 {
		t.Errorf("the wrong worker made %d provider calls", got)
	}
	if p, _ := wrong.Progress(h.ctx, "b"); p.Total != 0 {
		t.Errorf("the wrong ledger holds %d jobs of the batch", p.Total)
	}
	if got := metricValue(cfg.Metrics.Dispositions.WithLabelValues("ack")); got != 0 {
		t.Errorf("the wrong worker acked %v messages", got)
	}
	if msgs := h.streamMsgs(); msgs != n {
		t.Errorf("stream holds %d messages after the wrong worker, want all %d", msgs, n)
	}
	right := h.workerConfig(h.client(nil))
	rw2 := h.startWorker(right, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw2.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// A worker whose own jobs wait in the queue behind many of another
// ledger's (enqueued with another DATABASE_URL) hands those back and runs
// its own. It paused a minute at each foreign job and then pulled one job
// a time; with more foreign jobs than a pause's worth, every probe met
// the next one, and its own batch stayed queued for minutes.
func TestForeignJobsDoNotStarveTheWorker(t *testing.T) {
	t.Parallel()
	const foreign, own = 12, 6
	h := newHarness(t, harnessConfig{})
	other := storetest.NewStore(t)
	if _, err := enqueue.Run(h.ctx, h.js, other, h.enqueueConfig("elsewhere"), strings.NewReader(dataset(foreign))); err != nil {
		t.Fatal(err)
	}
	h.enqueue("b", own)
	cfg := h.workerConfig(h.client(nil))
	cfg.ForeignDelay, cfg.Concurrency = 3*time.Second, 2
	start := time.Now()
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", own, 60*time.Second)
	if took := time.Since(start); took > 2*cfg.ForeignDelay {
		t.Errorf("its own jobs took %s behind %d foreign ones; want no pause (%s) while its ledger has jobs waiting", took, foreign, cfg.ForeignDelay)
	}
	rw.stop(t, 20*time.Second)
	if p, _ := other.Progress(h.ctx, "elsewhere"); p.Queued != foreign {
		t.Errorf("the other ledger's jobs: %+v, want all %d still queued there", p, foreign)
	}
}

// recursiveSchema cycles through items to a node that also has properties:
// describing it for the prompt used to overflow the stack and kill every
// worker that pulled such a job (issue 13, finding 1).
const recursiveSchema = `{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`

// A batch with a recursive schema runs to the end: every job final, the
// worker alive, in each wire mode.
func TestRecursiveSchemaBatch(t *testing.T) {
	t.Parallel()
	const n = 12
	for _, mode := range []fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{Sim: typical(t, 3)})
			cfg := h.enqueueConfig("rec")
			cfg.Schema, cfg.Mode = []byte(recursiveSchema), mode
			if mode == fixpoint.ModeTool {
				// A tool's input is an object: the tree goes under one.
				cfg.Schema = []byte(`{"type":"object","required":["tree"],"properties":{"tree":{"$ref":"#/$defs/node"}},` +
					`"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}}}`)
			}
			if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
				t.Fatal(err)
			}
			rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
			h.waitDone("rec", n, 60*time.Second)
			if err := rw.stop(t, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			if p := h.progress("rec"); p.Valid == 0 {
				t.Errorf("no job valid under the recursive schema: %+v", p)
			}
		})
	}
}

// A batch enqueued on another stream than the default records it: --resume
// republishes there, not into the default stream, and a re-run naming the
// default stream is refused as a change of settings.
func TestResumeUsesTheBatchStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("own")
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(5))); err != nil {
		t.Fatal(err)
	}
	s, err := h.js.Stream(h.ctx, h.q.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(h.ctx); err != nil {
		t.Fatal(err)
	}
	// The flags' defaults, as `enqueue --batch own --resume` has them.
	prog, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "own", Resume: true}, nil)
	if err != nil || prog.Republished != 5 {
		t.Fatalf("resume: %+v %v; want 5 republished", prog, err)
	}
	if got := h.streamMsgs(); got != 5 {
		t.Errorf("the batch's stream holds %d jobs after the resume, want 5", got)
	}
	if _, err := h.js.Stream(h.ctx, queue.StreamDefault); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the default stream: %v, want none made by the resume", err)
	}
	other := cfg
	other.Queue = queue.Config{}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, other, strings.NewReader(dataset(5))); !errors.Is(err, enqueue.ErrSettingsChanged) || !strings.Contains(err.Error(), "stream: recorded") {
		t.Errorf("re-run on the default stream: %v, want ErrSettingsChanged naming the stream", err)
	}
}

// failingInserts is the ledger with its job inserts failing after the
// first ok ones: an enqueue killed in its second pass. Inserts may run
// at once.
type failingInserts struct {
	*store.Store
	ok atomic.Int64
}

func (f *failingInserts) InsertJobs(ctx context.Context, jobs []store.NewJob) (int, error) {
	if f.ok.Add(-1) < 0 {
		return 0, errors.New("killed")
	}
	return f.Store.InsertJobs(ctx, jobs)
}

func (f *failingInserts) InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error) {
	if f.ok.Add(-1) < 0 {
		return 0, 0, errors.New("killed")
	}
	return f.Store.InsertJobsPublishing(ctx, token, jobs)
}

// An enqueue stopped before it has recorded every row leaves the batch
// marked: --resume refuses it (it published the rows recorded and exited
// 0, and report wait called the batch done with the rest of the dataset
// missing), the batch's progress says so (its verdict fails: see
// cli.TestBatchVerdict), and the same enqueue command run again records
// the rest.
func TestResumeOfAPartlyRecordedBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("part")
	cfg.Chunk = 2
	failing := &failingInserts{Store: h.st}
	failing.ok.Store(2)
	if _, err := enqueue.Run(h.ctx, h.js, failing, cfg, strings.NewReader(dataset(10))); err == nil {
		t.Fatal("the run with failing inserts succeeded")
	}
	p := h.progress("part")
	if p.Total != 4 || p.Recording == nil || p.Recording.Live {
		t.Fatalf("after the cut: %+v (recording %+v); want 4 jobs recorded and the batch marked, its run stopped", p, p.Recording)
	}
	resume := cfg
	resume.Resume = true
	if _, err := enqueue.Run(h.ctx, h.js, h.st, resume, nil); !errors.Is(err, enqueue.ErrPartlyRecorded) {
		t.Errorf("--resume: %v; want ErrPartlyRecorded", err)
	}
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(10)))
	if err != nil {
		t.Fatal(err)
	}
	if p := h.progress("part"); p.Total != 10 || p.Recording != nil || prog.Recorded != 6 {
		t.Errorf("after the run again: %+v, %d recorded; want 10 jobs, the mark cleared, 6 recorded now", p, prog.Recorded)
	}

	// Another dataset's run, still going, keeps its mark when this one
	// finishes (one mark per batch was cleared by whichever run ended
	// first): the batch is being enqueued (Live) until it ends...
	other, err := h.st.StartRecording(h.ctx, "part", "digest of another dataset")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(12))); err != nil {
		t.Fatal(err)
	}
	if p := h.progress("part"); p.Recording == nil || !p.Recording.Live || p.Recording.Runs != 1 {
		t.Errorf("with another dataset's run going: recording %+v; want that run's mark, live", p.Recording)
	}
	// A cancel leaves a live run's mark: its rows come after the cancel
	// and run, and a kill later must still be seen (the cancel removed
	// it, and a batch missing 11,000 rows was reported done).
	if _, err := enqueue.Cancel(h.ctx, h.st, "part"); err != nil {
		t.Fatal(err)
	}
	if p := h.progress("part"); p.Recording == nil || !p.Recording.Live {
		t.Errorf("after a cancel with a run going: recording %+v; want the live run's mark", p.Recording)
	}
	// ...or stops (killed: its heartbeat stops); enqueue cancel ends the
	// batch as it is.
	if err := h.st.StopRecording(h.ctx, other); err != nil {
		t.Fatal(err)
	}
	if p := h.progress("part"); p.Recording == nil || p.Recording.Live {
		t.Errorf("after the other run stopped: recording %+v; want its mark, not live", p.Recording)
	}
	if _, err := enqueue.Cancel(h.ctx, h.st, "part"); err != nil {
		t.Fatal(err)
	}
	if p := h.progress("part"); p.Recording != nil {
		t.Errorf("after the cancel: recording %+v; want none", p.Recording)
	}
}

// A run of the same dataset clears the mark of one killed a moment before
// (its heartbeat not yet missed): the batch holds every row of it.
func TestRerunClearsAKilledRunOfTheSameDataset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("rerun")
	data := dataset(6)
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(data))
	if _, err := h.st.StartRecording(h.ctx, "rerun", hex.EncodeToString(sum[:])); err != nil { // the killed run
		t.Fatal(err)
	}
	if p := h.progress("rerun"); p.Recording == nil || !p.Recording.Live {
		t.Fatalf("with the killed run's mark: %+v; want it live still", p.Recording)
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if p := h.progress("rerun"); p.Recording != nil || p.Total != 6 {
		t.Errorf("after the rerun: %+v, recording %+v; want 6 jobs and no mark", p, p.Recording)
	}
}
