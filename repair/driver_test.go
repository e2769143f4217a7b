package repair_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const orderSchema = `{
  "type": "object",
  "properties": {
    "customer": {"type": "object", "properties": {
      "name": {"type": "string", "minLength": 2},
      "tier": {"enum": ["free", "pro", "enterprise"]}
    }, "required": ["name", "tier"], "additionalProperties": false},
    "lines": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
      "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
      "qty": {"type": "integer", "minimum": 1, "maximum": 50}
    }, "required": ["sku", "qty"], "additionalProperties": false}},
    "rush": {"type": "boolean"}
  },
  "required": ["customer", "lines", "rush"],
  "additionalProperties": false
}`

// simCompleter is a client of an in-process simulator; its replies depend
// only on what is asked (no transport faults), whatever the order.
func simCompleter(t *testing.T, preset string) *llm.Client {
	t.Helper()
	cfg, err := sim.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 11
	_, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	c, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: url + "/v1", APIKey: "sim",
		Retry: llm.RetryConfig{NoJitter: true, InitialInterval: time.Millisecond}, Lane: llm.LaneConfig{MaxConcurrency: 64, InitialConcurrency: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func orderJobs(t *testing.T, n int, strategy fixpoint.Strategy) []*repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]*repair.Job, n)
	for i := range jobs {
		jobs[i] = &repair.Job{ID: fmt.Sprintf("order-%03d", i), Schema: schema, SchemaRaw: []byte(orderSchema), Model: "sim-messy",
			Prompt: fmt.Sprintf("Extract order %d: customer Ada Lovelace (pro), 3 x ABC-%04d, not rush.", i, 1000+i),
			Limits: fixpoint.Limits{MaxAttempts: 3, Strategy: strategy}}
	}
	return jobs
}

// syncDrive runs each job to its end, one call at a time.
func syncDrive(t *testing.T, c *llm.Client, jobs []*repair.Job) []*fixpoint.Result {
	t.Helper()
	out := make([]*fixpoint.Result, len(jobs))
	for i, job := range jobs {
		step, err := repair.Start(job, nil, repair.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for act := step.Next(); !act.Done(); {
			if act.Err != nil {
				t.Fatalf("job %s: %v", job.ID, act.Err)
			}
			started := time.Now()
			resp, err := c.Complete(context.Background(), *act.Request)
			_, act = step.Feed(resp, err, started)
		}
		out[i] = step.Result()
	}
	return out
}

// reply is one call's outcome waiting to be fed.
type reply struct {
	job     int
	resp    *fixpoint.Response
	err     error
	started time.Time
}

// lateDrive is a second driver, written without touching the step: every
// job's requests are in flight together, and their replies are delivered
// in a shuffled order, each held back a random number of rounds while the
// others are fed (as replies from a provider batch arrive, hours later and
// in any order).
func lateDrive(t *testing.T, c *llm.Client, jobs []*repair.Job, seed uint64) []*fixpoint.Result {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	steps := make([]*repair.Step, len(jobs))
	var inbox []reply
	var mu sync.Mutex
	var wg sync.WaitGroup
	send := func(i int, req *fixpoint.Request) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started := time.Now()
			resp, err := c.Complete(context.Background(), *req)
			mu.Lock()
			inbox = append(inbox, reply{job: i, resp: resp, err: err, started: started})
			mu.Unlock()
		}()
	}
	for i, job := range jobs {
		step, err := repair.Start(job, nil, repair.Config{})
		if err != nil {
			t.Fatal(err)
		}
		steps[i] = step
		send(i, step.Next().Request)
	}
	var held []reply
	done := 0
	for done < len(jobs) {
		wg.Wait()
		mu.Lock()
		held = append(held, inbox...)
		inbox = inbox[:0]
		mu.Unlock()
		rng.Shuffle(len(held), func(a, b int) { held[a], held[b] = held[b], held[a] })
		// Feed about half of what has arrived; the rest waits for later
		// rounds (all of it when nothing else is in flight).
		n := len(held)
		if n > 1 {
			n = 1 + rng.IntN(n)
		}
		for _, r := range held[:n] {
			_, act := steps[r.job].Feed(r.resp, r.err, r.started)
			switch {
			case act.Err != nil:
				t.Fatalf("job %d: %v", r.job, act.Err)
			case act.Done():
				done++
			default:
				send(r.job, act.Request)
			}
		}
		held = append(held[:0], held[n:]...)
	}
	out := make([]*fixpoint.Result, len(steps))
	for i, s := range steps {
		out[i] = s.Result()
	}
	return out
}

// comparable strips what differs between two runs of the same calls: the
// provider's request ids, latencies and clocks.
func comparable(r *fixpoint.Result) fixpoint.Result {
	c := *r
	c.StartedAt, c.Wall = time.Time{}, 0
	c.Attempts = append([]fixpoint.Attempt(nil), r.Attempts...)
	for i := range c.Attempts {
		a := &c.Attempts[i]
		a.RequestID, a.Latency, a.StartedAt = "", 0, time.Time{}
	}
	return c
}

// A second driver is possible without touching the step: the same jobs,
// their replies delivered out of order and late, give the same records as
// the synchronous driver.
func TestDriversAgree(t *testing.T) {
	t.Parallel()
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			c := simCompleter(t, "messy")
			jobs := orderJobs(t, 40, strategy)
			want := syncDrive(t, c, jobs)
			repairs := 0
			for _, r := range want {
				if len(r.Attempts) > 1 {
					repairs++
				}
			}
			if repairs < 5 {
				t.Fatalf("only %d of %d jobs needed a repair: the scenario does not exercise feedback", repairs, len(jobs))
			}
			for _, seed := range []uint64{1, 2} {
				got := lateDrive(t, c, jobs, seed)
				for i := range jobs {
					if g, w := comparable(got[i]), comparable(want[i]); !reflect.DeepEqual(g, w) {
						t.Errorf("seed %d, job %s: the late driver's record differs:\ngot  %+v\nwant %+v", seed, jobs[i].ID, g, w)
					}
				}
			}
		})
	}
}

// A transient provider failure suspends the step; calling Next again goes
// on where it was (a driver that keeps the job), and Start from its result
// does the same (a driver that handed the job back).
func TestStepSuspendsOnTransientFailure(t *testing.T) {
	t.Parallel()
	jobs := orderJobs(t, 1, fixpoint.StrategyConversation)
	step, err := repair.Start(jobs[0], nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	act := step.Next()
	_, act = step.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassServer, Status: 503, Message: "busy"}, time.Now())
	if act.Err == nil || act.Done() || act.Request != nil {
		t.Fatalf("after a 503: %+v, want a transient wait", act)
	}
	if again := step.Next(); again.Request == nil {
		t.Fatalf("Next after the wait: %+v, want the request again", again)
	}
	res := step.Result()
	if len(res.Attempts) != 1 || res.Attempts[0].Class != fixpoint.OutcomeProvider || res.Calls != 1 {
		t.Fatalf("result after the 503: %+v", res)
	}
	cont, err := repair.Start(jobs[0], res, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if a := cont.Next(); a.Request == nil {
		t.Fatalf("Start from the result: %+v, want a request", a)
	}
	_, act = cont.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassAuth, Status: 403, Message: "no access to this model"}, time.Now())
	if !act.Done() || cont.Result().Status != fixpoint.StatusFailed || len(cont.Result().Attempts) != 2 {
		t.Fatalf("a permanent error: %+v, %+v; want the job failed with both attempts", act, cont.Result())
	}
}
