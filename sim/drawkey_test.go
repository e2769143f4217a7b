package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// A requeued job (its user id carries the run, fixpoint.RequestUser) and
// the same job on another model are answered with faults of their own, as
// a real model would answer; one job, run and model always gets the same
// reply; and every run and model of a job answers around the same truth.
func TestDrawsByJobRunAndModel(t *testing.T) {
	t.Parallel()
	cfg, err := Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed, cfg.Now = 3, fixedNow
	reply := func(s *Server, user string, run int, model string) string {
		t.Helper()
		body := orderRequest(user)
		body["user"], body["model"] = fixpoint.RequestUser(user, run), model
		text, _ := openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
		return text
	}
	const n = 40
	otherRun, otherModel := 0, 0
	for i := range n {
		job := fmt.Sprintf("b:%d", i)
		first := reply(New(cfg), job, 1, "gpt-4o-mini")
		if again := reply(New(cfg), job, 1, "gpt-4o-mini"); again != first {
			t.Fatalf("job %s, run 1, one model, answered twice:\n%s\n%s", job, first, again)
		}
		if again := reply(New(cfg), job, 2, "gpt-4o"); again != reply(New(cfg), job, 2, "gpt-4o") {
			t.Fatalf("job %s, run 2, one model, answered differently twice", job)
		}
		if reply(New(cfg), job, 2, "gpt-4o-mini") != first {
			otherRun++
		}
		if reply(New(cfg), job, 1, "gpt-4o") != first {
			otherModel++
		}
	}
	// The messy preset puts a fault in most replies: a second draw of the
	// same 40 jobs that changed fewer than half of them is the first again.
	if otherRun < n/2 {
		t.Errorf("run 2 of a job answered as run 1 for %d of %d jobs: a requeue replays the first run's replies", n-otherRun, n)
	}
	if otherModel < n/2 {
		t.Errorf("another model answered as the first for %d of %d jobs: the model does not enter the draw", n-otherModel, n)
	}

	// Without faults, every run and model answers the job's one truth.
	clean := New(Config{Seed: 3, Now: fixedNow})
	for i := range 5 {
		job := fmt.Sprintf("b:%d", i)
		truth, err := clean.Truth(job, []byte(orderSchema), userText(orderRequest(job)))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(truth)
		for _, run := range []int{1, 2, 3} {
			for _, model := range []string{"gpt-4o-mini", "gpt-4o"} {
				var got any
				dec := json.NewDecoder(strings.NewReader(reply(clean, job, run, model)))
				dec.UseNumber()
				if err := dec.Decode(&got); err != nil {
					t.Fatalf("job %s run %d on %s: %v", job, run, model, err)
				}
				if b, _ := json.Marshal(got); string(b) != string(want) {
					t.Errorf("job %s run %d on %s answered %s, the job's truth is %s", job, run, model, b, want)
				}
			}
		}
	}
}
