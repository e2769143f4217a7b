package pipeline_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
)

const periodV1 = `{"type":"object","required":["start","end"],"properties":{"start":{"type":"string"},"end":{"type":"string"}}}`

const periodV2 = `{"type":"object","required":["start","end"],"properties":{"start":{"type":"string"},"end":{"type":"string"}},
 "x-fixpoint-rules":[{"rule":"self.end >= self.start","message":"the period must not end before it starts","path":"/end"}]}`

// A batch checked again against a tightened schema makes no call: its
// stored values are checked, the outcome recorded as a new run (each
// job's first run kept), and a requeue of the jobs that now fail goes on
// from the reply checked, its errors sent as feedback, on the new schema.
func TestRevalidateThenRequeue(t *testing.T) {
	t.Parallel()
	const n = 6
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
		// Rows with an even number get a period that ends before it
		// starts, until told so.
		reply := `{"start":"2027-01-01","end":"2027-01-31"}`
		if strings.Contains(string(body), "even row") && !strings.Contains(string(body), "must not end before it starts") {
			reply = `{"start":"2027-02-01","end":"2027-01-31"}`
		}
		content, _ := json.Marshal(reply)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","model":"m","choices":[{"message":{"content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":12}}`, content)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("b")
	cfg.Schema, cfg.Template = []byte(periodV1), "Extract the period: {{.text}}"
	var rows strings.Builder
	for i := 1; i <= n; i++ {
		parity := "odd"
		if i%2 == 0 {
			parity = "even"
		}
		fmt.Fprintf(&rows, `{"id":"r%04d","text":"the %s row"}`+"\n", i, parity)
	}
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rows.String())); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	if p := h.progress("b"); p.Valid != n {
		t.Fatalf("first run: %+v; want every job valid under the first schema", p)
	}
	calls := len(bodies)

	rep, err := enqueue.Revalidate(h.ctx, h.st, enqueue.RevalidateConfig{Batch: "b", Schema: []byte(periodV2)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != n || rep.Pass != n/2 || rep.Fail != n/2 || rep.Classes["semantic"] != n/2 || rep.Paths["/end x-fixpoint-rules"] != n/2 {
		t.Fatalf("revalidation %+v; want %d checked, half failing the rule at /end", rep, n)
	}
	if len(bodies) != calls {
		t.Errorf("the revalidation made %d provider calls; want none", len(bodies)-calls)
	}
	j, _ := h.job(jobID("b", 2))
	if j.Status != fixpoint.StatusInvalid || j.Run != rep.Run || !strings.Contains(j.Error, "must not end before it starts") {
		t.Errorf("job 2 after the revalidation: %s in run %d (%q); want invalid in run %d, naming the rule", j.Status, j.Run, j.Error, rep.Run)
	}
	if v := h.sqlInt(`SELECT count(*) FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.batch = 'b' AND r.run = 1 AND r.status = 'valid'`); v != n {
		t.Errorf("%d jobs keep their first run as valid; want %d", v, n)
	}
	if v := h.sqlInt(`SELECT count(*) FROM revalidations v JOIN jobs j ON j.id = v.job_id WHERE j.batch = 'b' AND v.schema_hash = $1 AND v.schema_hash = j.schema_hash`, rep.SchemaHash); v != n {
		t.Errorf("%d revalidations name the new schema, the job's own now; want %d", v, n)
	}

	rq, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Queue: h.q})
	if err != nil || rq.Published != n/2 {
		t.Fatalf("requeue: %+v, %v; want the %d failing jobs published", rq, err, n/2)
	}
	h.waitDone("b", n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if p := h.progress("b"); p.Valid != n {
		t.Errorf("after the requeue: %+v; want every job valid", p)
	}
	mu.Lock()
	requeued := bodies[calls:]
	mu.Unlock()
	if len(requeued) != n/2 {
		t.Fatalf("the requeue made %d calls; want one for each of the %d failing jobs", len(requeued), n/2)
	}
	for _, b := range requeued {
		if !strings.Contains(b, `2027-02-01`) || !strings.Contains(b, "must not end before it starts") || !strings.Contains(b, `x-fixpoint-rules`) {
			t.Errorf("a requeued job's request does not go on from the reply checked with its errors, on the new schema: %.600s", b)
		}
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}, Schema: periodV2})
}
