package tickets

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// ticketRun is what a batch of tickets did on the messy simulator.
type ticketRun struct {
	valid int
	// caught counts the attempts whose evidence errors named a value the
	// simulator invented; accepted the valid values that hold one.
	caught, accepted int
	// ruleErrors counts the attempts the rule failed; ruleBroken the valid
	// values that break it.
	ruleErrors, ruleBroken int
}

// runTickets runs n of the demo's tickets through the repair loop on the
// messy simulator with evidence mode, each against its row's values as
// the template rendered them (--evidence-source row).
func runTickets(t *testing.T, n int, mode fixpoint.EvidenceMode) ticketRun {
	t.Helper()
	cfg, _ := sim.Preset("messy")
	cfg.Seed = 1
	srv, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSim()
	client, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: url + "/v1", APIKey: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := validate.Compile([]byte(Schema))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile([]byte(Schema))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	_ = json.Unmarshal([]byte(Schema), &doc)
	exempt := evidence.Exempt(doc)
	tmpl := template.Must(template.New("t").Option("missingkey=error").Parse(Template))
	var out ticketRun
	for _, line := range strings.Split(strings.TrimSuffix(Dataset(n, 1), "\n"), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		var prompt strings.Builder
		if err := tmpl.Execute(&prompt, row); err != nil {
			t.Fatal(err)
		}
		source, err := evidence.JobSource(json.RawMessage(line), prompt.String(), fixpoint.EvidenceSourceRow)
		if err != nil {
			t.Fatal(err)
		}
		job := &repair.Job{ID: row["ticket_id"].(string), Schema: schema, SchemaRaw: []byte(Schema), Model: "sim-messy", Prompt: prompt.String(),
			Rules: set, Evidence: mode, Source: evidence.New(source), Exempt: exempt, Limits: fixpoint.Limits{MaxAttempts: 4}}
		res := drive(t, client, job)
		inv, err := srv.Inventions(job.ID, []byte(Schema), job.Prompt)
		if err != nil {
			t.Fatal(err)
		}
		out.add(t, res, inv, set)
	}
	return out
}

// add counts one job's result: inv are the simulator's inventions for it.
func (r *ticketRun) add(t *testing.T, res *fixpoint.Result, inv map[string]any, set *rules.Set) {
	t.Helper()
	for _, a := range res.Attempts {
		v := decode(t, a.Value)
		for _, e := range a.Errors {
			if e.Keyword == rules.Keyword {
				r.ruleErrors++
			}
			if got, ok := at(v, e.Path); e.Class == fixpoint.ClassEvidence && ok && jsonText(got) == jsonText(inv[e.Path]) {
				r.caught++
			}
		}
	}
	if res.Status != fixpoint.StatusValid {
		return
	}
	r.valid++
	v := decode(t, res.Value)
	for p, x := range inv {
		if got, ok := at(v, p); ok && jsonText(got) == jsonText(x) {
			r.accepted++
		}
	}
	if fs, _ := set.Check(context.Background(), v); len(rules.Errors(fs)) > 0 {
		r.ruleBroken++
	}
}

// drive runs job to its end, one call at a time.
func drive(t *testing.T, c *llm.Client, job *repair.Job) *fixpoint.Result {
	t.Helper()
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
	return step.Result()
}

func decode(t *testing.T, b json.RawMessage) any {
	t.Helper()
	if len(b) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// at is the value at JSON pointer p of v (the tickets' pointers need no
// unescaping).
func at(v any, p string) (any, bool) {
	for _, tok := range strings.Split(p, "/")[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The demo's tickets show grounding: the messy simulator invents a
// customer, an order or an amount in some replies, and under --evidence
// require the evidence stage catches each one (an error at the leaf, fed
// back) and no valid ticket keeps one; under check they are recorded but
// valid tickets keep them. The rule between needs_human and priority
// fails in some replies and no valid ticket breaks it.
func TestInventedTicketValuesAreCaught(t *testing.T) {
	t.Parallel()
	const n = 400
	require := runTickets(t, n, fixpoint.EvidenceRequire)
	check := runTickets(t, n, fixpoint.EvidenceCheck)
	t.Logf("require: %+v; check: %+v", require, check)
	if require.caught == 0 || require.accepted != 0 {
		t.Errorf("--evidence require: %d inventions caught, %d valid tickets hold one; want some caught and none held", require.caught, require.accepted)
	}
	if check.accepted == 0 || check.caught != 0 {
		t.Errorf("--evidence check: %d valid tickets hold an invention, %d caught; want some held (check does not refuse them) and none caught", check.accepted, check.caught)
	}
	for name, r := range map[string]ticketRun{"require": require, "check": check} {
		if r.ruleErrors == 0 || r.ruleBroken != 0 || r.valid < n/2 {
			t.Errorf("%s: %d rule errors, %d valid of %d, %d breaking the rule; want some errors, most valid and none breaking it", name, r.ruleErrors, r.valid, n, r.ruleBroken)
		}
	}
}
