package pipeline_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Bad input to enqueue: malformed JSONL and CSV lines and a template naming
// a missing field are reported with their line numbers; a schema that is
// not JSON is refused before anything is recorded; a run cut short leaves
// recorded jobs that --resume publishes.
func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	for _, tc := range []struct {
		name, format, data, template string
		idField                      string
		maxBad                       int
		wantLines                    []int
		wantErr                      error
		wantMsg                      string
		wantRecorded                 int
		tokenBudget                  int
	}{
		{name: "jsonl", format: enqueue.FormatJSONL, maxBad: -1,
			data:      `{"id":"a","text":"one"}` + "\n" + `{"id":"b","text":` + "\n" + `{"id":"c","text":"three"}` + "\n" + `[1,2]` + "\n",
			wantLines: []int{2, 4}, wantRecorded: 2},
		{name: "csv", format: enqueue.FormatCSV, maxBad: -1,
			data:      "id,text\na,one\nb,two,extra\nc,\"unclosed\n",
			wantLines: []int{3, 4}, wantRecorded: 1},
		// A quote open across rows made the rows after it one bad row, and
		// the batch was recorded without them: nothing is, and the error
		// names the lines.
		{name: "csv quote open across rows", format: enqueue.FormatCSV, maxBad: -1,
			data:    "id,text\na,one\nb,\"unclosed\nc,three\nd,four\n",
			wantErr: enqueue.ErrUnreadable, wantMsg: "a quoted field opens on line 3 and runs on to line 5", wantRecorded: 0},
		{name: "missing field", format: enqueue.FormatJSONL, maxBad: -1, template: "Summarize {{.body}}",
			data:      `{"id":"a","text":"one"}` + "\n" + `{"id":"b","body":"two"}` + "\n",
			wantLines: []int{1}, wantRecorded: 1},
		// A field no row of the dataset has is a typo in the template or
		// --id-field (or the wrong dataset), not a dataset of bad rows:
		// a settings error, whatever --max-bad-rows allows.
		{name: "template field no row has", format: enqueue.FormatJSONL, maxBad: -1, template: "Summarize {{.txet}}",
			data:      `{"id":"a","text":"one"}` + "\n" + `{"id":"b","text":"two"}` + "\n",
			wantLines: []int{1, 2}, wantErr: enqueue.ErrBadTemplate, wantRecorded: 0},
		// A nested key one row lacks is that row's problem: the others
		// have it ({{.customer.name}} on a row whose customer is {} was
		// refused as "the template uses .name, which no row has").
		{name: "nested key one row lacks", format: enqueue.FormatJSONL, maxBad: -1, template: "Reply to {{.customer.name}}",
			data:      `{"id":"a","customer":{}}` + "\n" + `{"id":"b","customer":{"name":"B"}}` + "\n" + `{"id":"c","customer":{"name":"C"}}` + "\n",
			wantLines: []int{1}, wantRecorded: 2},
		// A nested field's first key no row has is a typo as well; a CSV
		// header "customer.name" is one field, written with index.
		{name: "nested field no row has", format: enqueue.FormatCSV, maxBad: -1, template: "Reply to {{.customer.name}}",
			data:      "id,customer.name\na,A\nb,B\n",
			wantLines: []int{2, 3}, wantErr: enqueue.ErrBadTemplate, wantMsg: `a field named "customer.name" is written {{index . "customer.name"}}`},
		{name: "nested field one row lacks", format: enqueue.FormatJSONL, maxBad: -1, template: "Reply to {{.customer.name}}",
			data:      `{"id":"a"}` + "\n" + `{"id":"b","customer":{"name":"B"}}` + "\n",
			wantLines: []int{1}, wantRecorded: 1},
		// A row whose first attempt alone needs more than the token budget
		// fails before any call: a bad row, saying so.
		{name: "row over the token budget", format: enqueue.FormatJSONL, maxBad: -1, tokenBudget: 1300,
			data:      `{"id":"a","text":"short"}` + "\n" + `{"id":"b","text":"` + strings.Repeat("long ", 200) + `"}` + "\n",
			wantLines: []int{2}, wantRecorded: 1},
		{name: "id field no row has", format: enqueue.FormatCSV, maxBad: -1, idField: "ID",
			data:      "id,text\na,one\nb,two\n",
			wantLines: []int{2, 3}, wantErr: enqueue.ErrBadConfig, wantRecorded: 0},
		// Every row is checked before anything is recorded: past the limit,
		// nothing of the batch is in the ledger or the queue.
		{name: "too many bad rows", format: enqueue.FormatJSONL, maxBad: 0,
			data:      `{"id":"a","text":"one"}` + "\n" + `nope` + "\n" + `{"id":"c","text":"three"}` + "\n",
			wantLines: []int{2}, wantErr: enqueue.ErrTooManyBadRows, wantRecorded: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			cfg := h.enqueueConfig(batch)
			cfg.Format, cfg.MaxBadRows = tc.format, tc.maxBad
			if tc.template != "" {
				cfg.Template = tc.template
			}
			if tc.idField != "" {
				cfg.IDField = tc.idField
			}
			cfg.Limits.TokenBudget = tc.tokenBudget
			prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(tc.data))
			if !errors.Is(err, tc.wantErr) || tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Enqueue error %v, want %v saying %q", err, tc.wantErr, tc.wantMsg)
			}
			var lines []int
			for _, b := range prog.Bad {
				lines = append(lines, b.Line)
				if tc.tokenBudget > 0 && !strings.Contains(b.Error(), "over the token budget of 1300") {
					t.Errorf("bad row %q does not name the token budget", b.Error())
				}
				if !strings.Contains(b.Error(), "line ") {
					t.Errorf("bad row error %q does not name its line", b.Error())
				}
			}
			if !equalInts(lines, tc.wantLines) {
				t.Errorf("bad lines %v, want %v (%v)", lines, tc.wantLines, prog.Bad)
			}
			p := h.progress(batch)
			c, _ := h.st.Counts(h.ctx, batch)
			if p.Total != tc.wantRecorded || int(c.Published) != tc.wantRecorded {
				t.Errorf("%d jobs recorded, %d published; want %d of each", p.Total, c.Published, tc.wantRecorded)
			}
		})
	}
	t.Run("schema not JSON", func(t *testing.T) {
		cfg := h.enqueueConfig("bad-schema")
		cfg.Schema = []byte(`{"type": "object",`)
		_, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(3)))
		if !errors.Is(err, enqueue.ErrBadSchema) {
			t.Fatalf("Enqueue with a schema that is not JSON: %v, want ErrBadSchema", err)
		}
		if p := h.progress("bad-schema"); p.Total != 0 {
			t.Errorf("%d jobs recorded for a refused schema", p.Total)
		}
	})
	t.Run("interrupted then resumed", func(t *testing.T) {
		// Jobs recorded but never published (a run killed between the two):
		// resume publishes exactly those, and a worker finishes them.
		const n = 12
		batch := "resume"
		cfg := h.enqueueConfig(batch)
		hash, err := h.st.PutSchema(h.ctx, []byte(testSchema))
		if err != nil {
			t.Fatal(err)
		}
		settings, _ := json.Marshal(enqueue.BatchSettings{Provider: cfg.Provider, Model: cfg.Model, Mode: fixpoint.ModePrompt,
			Limits: cfg.Limits.WithDefaults(), SchemaHash: hash, TemplateSHA256: "recorded", Format: enqueue.FormatJSONL})
		if err := h.st.PutBatch(h.ctx, store.BatchParams{Name: batch, Settings: settings}); err != nil {
			t.Fatal(err)
		}
		var jobs []store.NewJob
		for i := 1; i <= n; i++ {
			jobs = append(jobs, store.NewJob{ID: jobID(batch, i), Batch: batch, RowNo: i, SchemaHash: hash,
				Prompt: "Extract the customer record", Provider: cfg.Provider, Model: cfg.Model, Mode: "prompt"})
		}
		if _, err := h.st.InsertJobs(h.ctx, jobs); err != nil {
			t.Fatal(err)
		}
		cfg.Resume = true
		prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, nil)
		if err != nil || prog.Published != n {
			t.Fatalf("resume: published %d, err %v; want %d", prog.Published, err, n)
		}
		again, err := enqueue.Run(h.ctx, h.js, h.st, cfg, nil)
		if err != nil || again.Published != 0 {
			t.Fatalf("second resume: published %d, err %v; want 0", again.Published, err)
		}
		rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
		h.waitDone(batch, n, 30*time.Second)
		rw.stop(t, 20*time.Second)
		// The worker also runs the 7 good rows the subtests above published.
		h.checkInvariants(batch, invariants{Jobs: n, MaxCalls: n + 7, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
