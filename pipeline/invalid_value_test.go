package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A job that ends invalid keeps the value of its last reply as its value,
// and the export has it: a near-valid row can be salvaged (issue 36,
// finding 4: every invalid job was exported with a null value, though the
// docs promised its last candidate).
func TestInvalidJobKeepsItsLastValue(t *testing.T) {
	t.Parallel()
	const n = 4
	// Every reply lacks a required property, and no correction fixes it.
	h := newHarness(t, harnessConfig{Sim: sim.Config{Mix: sim.Mix{MissingRequired: 1}, FixProb: -1}})
	h.enqueue("b", n)
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)

	exported := map[string]store.ExportRow{}
	if err := h.st.Export(context.Background(), "b", func(r store.ExportRow) error {
		exported[r.ID] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		id := jobID("b", i)
		j, as := h.job(id)
		if j.Status != fixpoint.StatusInvalid || len(as) == 0 {
			t.Fatalf("job %s: %s with %d attempts, want invalid", id, j.Status, len(as))
		}
		last := as[len(as)-1]
		// The last reply, extracted: the object the model answered.
		var want map[string]any
		if err := json.Unmarshal([]byte(last.Raw), &want); err != nil {
			t.Fatalf("job %s: the simulator's last reply is not plain JSON: %v", id, err)
		}
		r := exported[id]
		var got map[string]any
		if err := json.Unmarshal(r.Value, &got); err != nil || got == nil {
			t.Errorf("job %s exported value %s (%v), want the last reply's object %s", id, r.Value, err, last.Raw)
			continue
		}
		if !sameJSON(t, got, want) {
			t.Errorf("job %s exported value %s, want the last reply's %s", id, r.Value, last.Raw)
		}
		if !bytes.Equal(j.Value, r.Value) {
			t.Errorf("job %s: the ledger's value %s, the export's %s", id, j.Value, r.Value)
		}
		// With the errors of that reply: what the value lacks.
		var errs []fixpoint.ValidationError
		if err := json.Unmarshal(r.Errors, &errs); err != nil || len(errs) == 0 {
			t.Errorf("job %s exported errors %s (%v), want the last attempt's %s", id, r.Errors, err, last.Errors)
			continue
		}
		if !sameJSON(t, json.RawMessage(r.Errors), json.RawMessage(last.Errors)) || errs[0].Keyword != "required" {
			t.Errorf("job %s exported errors %s, want the last attempt's %s (a missing required property)", id, r.Errors, last.Errors)
		}
	}
}

// sameJSON reports whether a and b marshal alike (map keys sorted).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}
