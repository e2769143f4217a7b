package pipeline_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
)

const invoiceSchema = `{"type":"object","required":["vendor","total","start","end"],"additionalProperties":false,
 "properties":{"vendor":{"type":"string"},"total":{"type":"number"},"start":{"type":"string"},"end":{"type":"string"},
  "summary":{"type":"string","x-fixpoint-evidence":false}},
 "x-fixpoint-rules":[{"rule":"self.end >= self.start","message":"the period must not end before it starts","path":"/end"}]}`

// A batch enqueued with --evidence require and a rule: the worker feeds
// the rule's failure and an invented vendor back to the model, the ledger
// keeps each attempt's class and the valid one's grades and spans, and
// the job ends valid once the reply keeps the rule and quotes its source.
func TestRulesAndEvidenceEndToEnd(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	replies := []string{
		`{"vendor":"Acme Corp","total":1249.99,"start":"2027-02-01","end":"2027-01-15","summary":"hosting"}`, // breaks the rule
		`{"vendor":"Globex","total":1249.99,"start":"2027-01-01","end":"2027-01-15","summary":"hosting"}`,    // invents the vendor
		`{"vendor":"Acme Corp","total":1249.99,"start":"2027-01-01","end":"2027-01-15","summary":"hosting"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := calls.Add(1)
		content, _ := json.Marshal(replies[min(int(n), len(replies))-1])
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","model":"m","choices":[{"message":{"content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":20}}`, content)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("b")
	cfg.Schema, cfg.Template = []byte(invoiceSchema), "Extract the invoice. For example, vendor Globex.\n{{.text}}"
	cfg.Evidence = fixpoint.EvidenceRequire
	rows := `{"id":"r0001","text":"Invoice from Acme Corp for 1 January 2027 to 15.01.2027: total 1.249,99 EUR."}` + "\n"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rows)); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("b", 1, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	j, as := h.job(jobID("b", 1))
	if j.Status != fixpoint.StatusValid || len(as) != 3 {
		t.Fatalf("job: %s after %d attempts (%s); want valid after 3", j.Status, len(as), j.Error)
	}
	if as[0].Class != string(fixpoint.ClassSemantic) || !strings.Contains(string(as[0].Errors), "must not end before it starts") {
		t.Errorf("attempt 1: class %q, errors %s; want the rule's failure", as[0].Class, as[0].Errors)
	}
	// The example in the template ("vendor Globex") grounds nothing.
	if as[1].Class != string(fixpoint.ClassEvidence) || !strings.Contains(string(as[1].Errors), `\"Globex\" does not appear in the source`) {
		t.Errorf("attempt 2: class %q, errors %s; want the invented vendor", as[1].Class, as[1].Errors)
	}
	var grades []fixpoint.Grounding
	if err := json.Unmarshal(as[2].Evidence, &grades); err != nil {
		t.Fatalf("attempt 3 evidence %q: %v", as[2].Evidence, err)
	}
	got := map[string]fixpoint.Grade{}
	for _, g := range grades {
		got[g.Path] = g.Grade
	}
	want := map[string]fixpoint.Grade{"/vendor": fixpoint.GradeExact, "/total": fixpoint.GradeNormalized,
		"/start": fixpoint.GradeNormalized, "/end": fixpoint.GradeNormalized}
	for p, g := range want {
		if got[p] != g {
			t.Errorf("attempt 3: %s graded %q, want %q (all: %+v)", p, got[p], g, grades)
		}
	}
	if _, ok := got["/summary"]; ok {
		t.Errorf("the summary, marked x-fixpoint-evidence false, was graded: %+v", grades)
	}
	h.checkInvariants("b", invariants{Jobs: 1, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: 1}, Schema: invoiceSchema})
}
