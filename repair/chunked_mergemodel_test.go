package repair_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// mergeFirst are chunk replies that disagree on the party and list one
// subsidiary twice.
var mergeFirst = map[int]string{
	0: `{"party": "Acme GmbH", "amount": 1200}`,
	1: `{"party": "Acme", "items": [{"name": "Acme Ltd"}]}`,
	2: `{"party": "Acme GmbH", "items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "Japan"}]}`,
}

const mergedByModel = `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "Japan"}]}`

// addAmount is the repair's patch of a merged value that lacks the amount.
const addAmount = `[{"op": "add", "path": "/amount", "value": 1200}]`

func mergeModelJob(t *testing.T, edit func(*repair.Job)) *repair.Job {
	t.Helper()
	return agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) {
		j.Limits.MergeModel = "gpt-4o"
		if edit != nil {
			edit(j)
		}
	})
}

// byModel answers a chunk's request as byChunk does, a request to the
// merge model with merge, and any other (the repair) with repaired.
func byModel(merge, repaired string) replyFunc {
	chunks := byChunk(mergeFirst, nil, repaired)
	return func(req *fixpoint.Request) (*fixpoint.Response, error) {
		if req.Model == "gpt-4o" {
			return chunkReply(merge)
		}
		return chunks(req)
	}
}

// TestMergeCallSentToMergeModel: with a merge model and three chunk
// values, the merge is a call to that model: its request holds each
// value with its part and code points between the merge markers, the
// rule's conflict as a hint, and the task, not the document; a valid
// reply ends the job valid. The call is an attempt of step merge priced
// by the merge model, counted in the calls.
func TestMergeCallSentToMergeModel(t *testing.T) {
	t.Parallel()
	m := startDoc(t, mergeModelJob(t, nil), nil)
	sent := drive(t, m, byModel(mergedByModel, ""))
	if len(sent) != 4 {
		t.Fatalf("sent %d requests, want 3 chunks and the merge", len(sent))
	}
	req := sent[3]
	msg := req.Messages[0].Content
	if req.Model != "gpt-4o" || len(req.Messages) != 1 {
		t.Fatalf("merge request to %q with %d messages, want gpt-4o with one", req.Model, len(req.Messages))
	}
	open, close := strings.Index(msg, fixpoint.MergeValuesOpen+"\n"), strings.Index(msg, fixpoint.MergeValuesClose)
	if open < 0 || close < open {
		t.Fatalf("merge request without the values block: %q", msg)
	}
	lines := strings.Split(strings.TrimSpace(msg[open+len(fixpoint.MergeValuesOpen):close]), "\n")
	if len(lines) != 3 {
		t.Fatalf("values block has %d lines, want one per chunk: %q", len(lines), lines)
	}
	var second struct {
		Part, Start, End int
		Value            map[string]any
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if second.Part != 2 || second.Start <= 0 || second.End <= second.Start || second.Value["party"] != "Acme" {
		t.Errorf("second line %+v, want part 2 with its code points and value", second)
	}
	if !strings.Contains(msg, `- /party: "Acme GmbH" (parts 1, 3); "Acme" (part 2); by rule: "Acme GmbH"`) {
		t.Errorf("the rule's conflict is not a hint: %q", msg)
	}
	if strings.Contains(msg, fixpoint.DocumentOpen) || strings.Contains(msg, "Subsidiaries:") ||
		!strings.HasSuffix(msg, "Extract the party, the amount and the subsidiaries.") {
		t.Errorf("merge request sends the document or lacks the task: %q", msg)
	}

	res := m.Result()
	if res.Status != fixpoint.StatusValid || !jsonEqual(res.Value, mergedByModel) {
		t.Fatalf("result %s %s (%s), want valid with the merge model's value", res.Status, res.Value, res.Error)
	}
	a := res.Attempts[len(res.Attempts)-1]
	if len(res.Attempts) != 4 || a.Step != fixpoint.StepMerge || !a.Called() || a.RequestHash == "" || len(a.Conflicts) != 1 {
		t.Fatalf("attempts %d, the last %+v: want the merge call with the rule's conflict", len(res.Attempts), a)
	}
	if want := repair.LedgerCost(repair.DefaultPrices().Cost("gpt-4o", 100, 10, 0)); a.CostUSD != want || want == 0 {
		t.Errorf("merge call cost %v, want %v (gpt-4o's price)", a.CostUSD, want)
	}
	if res.Calls != 4 || res.TokensIn != 400 {
		t.Errorf("calls %d, tokens in %d; want 4 and 400 (the merge call counted)", res.Calls, res.TokensIn)
	}
}

func jsonEqual(got json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestMergeCallInvalidGoesToRepair: a merge reply the schema refuses is
// the merged value the repair starts from, on the job's model.
func TestMergeCallInvalidGoesToRepair(t *testing.T) {
	t.Parallel()
	m := startDoc(t, mergeModelJob(t, nil), nil)
	sent := drive(t, m, byModel(`{"party": "Acme GmbH", "items": [{"name": "Acme Ltd"}]}`, addAmount))
	if len(sent) != 5 {
		t.Fatalf("sent %d requests, want chunks, merge, repair", len(sent))
	}
	rep := sent[4]
	last := rep.Messages[len(rep.Messages)-1].Content
	if rep.Model != "gpt-4o-mini" || !strings.Contains(last, `{"items":[{"name":"Acme Ltd"}],"party":"Acme GmbH"}`) || !strings.Contains(last, "amount") {
		t.Errorf("repair to %q: %q; want the job's model correcting the merge reply's value", rep.Model, last)
	}
	res := m.Result()
	if res.Status != fixpoint.StatusValid || res.Calls != 5 {
		t.Errorf("result %s, %d calls; want valid after the repair, 5 calls", res.Status, res.Calls)
	}
	if steps := stepsOf(res); !slices.Equal(steps, []fixpoint.StepKind{"chunk", "chunk", "chunk", "merge", "repair"}) {
		t.Errorf("steps %v", steps)
	}
}

func stepsOf(res *fixpoint.Result) []fixpoint.StepKind {
	var out []fixpoint.StepKind
	for _, a := range res.Attempts {
		out = append(out, a.Step)
	}
	return out
}

// TestMergeCallNoValueFallsBack: a merge reply with no JSON leaves the
// merge to the rule: a merge attempt with no call follows, and the repair
// starts from its value, saying the merge model gave none.
func TestMergeCallNoValueFallsBack(t *testing.T) {
	t.Parallel()
	job := mergeModelJob(t, nil)
	// The rule's value lacks the amount: chunk 0 gives none.
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: mergeFirst[1], 2: mergeFirst[2]}
	chunks := byChunk(first, nil, addAmount)
	m := startDoc(t, job, nil)
	sent := drive(t, m, func(req *fixpoint.Request) (*fixpoint.Response, error) {
		if req.Model == "gpt-4o" {
			return chunkReply("I cannot merge these.")
		}
		return chunks(req)
	})
	res := m.Result()
	if steps := stepsOf(res); !slices.Equal(steps, []fixpoint.StepKind{"chunk", "chunk", "chunk", "merge", "merge", "repair"}) {
		t.Fatalf("steps %v, want chunks, the merge call, the merge by rule, the repair", steps)
	}
	call, rule := res.Attempts[3], res.Attempts[4]
	if !call.Called() || call.Class != string(fixpoint.ClassSyntax) || rule.Called() || !jsonEqual(rule.Value, `{"party": "Acme GmbH", "items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "Japan"}]}`) {
		t.Fatalf("merge call %+v, merge by rule %+v", call, rule)
	}
	msgs := sent[len(sent)-1].Messages
	rep := msgs[len(msgs)-1].Content
	if !strings.Contains(rep, "The merge by model gpt-4o gave no value (syntax)") || !strings.Contains(rep, `"party":"Acme GmbH"`) {
		t.Errorf("repair request does not start from the rule's value or say why: %q", rep)
	}
	if res.Status != fixpoint.StatusValid || res.Calls != 5 {
		t.Errorf("result %s, %d calls; want valid, 5 calls (the merge by rule is none)", res.Status, res.Calls)
	}
}

// TestMergeModelNotFound: a provider without the merge model ends the
// merge call (no wait, which would stop the job's model's lane) and the
// merge is by rule.
func TestMergeModelNotFound(t *testing.T) {
	t.Parallel()
	m := startDoc(t, mergeModelJob(t, nil), nil)
	chunks := byModel("", "")
	drive(t, m, func(req *fixpoint.Request) (*fixpoint.Response, error) {
		if req.Model == "gpt-4o" {
			return nil, &fixpoint.ProviderError{Class: fixpoint.ClassModelNotFound, Status: 404, Message: "The model gpt-4o does not exist"}
		}
		return chunks(req)
	})
	res := m.Result()
	if steps := stepsOf(res); !slices.Equal(steps, []fixpoint.StepKind{"chunk", "chunk", "chunk", "merge", "merge"}) {
		t.Fatalf("steps %v, want chunks, the merge call, the merge by rule", steps)
	}
	if call := res.Attempts[3]; call.ProviderClass != fixpoint.ClassModelNotFound || !call.Called() {
		t.Errorf("merge call %+v", call)
	}
	if res.Status != fixpoint.StatusValid || !jsonEqual(res.Value, mergedByModel) {
		t.Errorf("result %s %s (%s), want valid by rule", res.Status, res.Value, res.Error)
	}
}

// TestMergeCallNeedsTwoValues: with one chunk value, there is nothing to
// merge: no call, the merge by rule as without a merge model.
func TestMergeCallNeedsTwoValues(t *testing.T) {
	t.Parallel()
	job := mergeModelJob(t, func(j *repair.Job) { j.Limits.MaxAttempts = 1 })
	first := map[int]string{0: `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}]}`, 1: "no JSON here", 2: "none here either"}
	m := startDoc(t, job, nil)
	sent := drive(t, m, byChunk(first, nil, ""))
	for _, req := range sent {
		if req.Model == "gpt-4o" {
			t.Fatal("a merge call with one chunk value")
		}
	}
	res := m.Result()
	a := res.Attempts[len(res.Attempts)-1]
	if res.Status != fixpoint.StatusValid || a.Step != fixpoint.StepMerge || a.Called() || res.Calls != 3 {
		t.Errorf("result %s, last attempt %s called %v, calls %d; want valid on the merge by rule, 3 calls", res.Status, a.Step, a.Called(), res.Calls)
	}
}

// TestMergeCallResume: a job continued from its ledger rows (no values)
// with the merge call recorded asks for the same repair as the machine
// that fed it; with the merge call in flight, it sends the same merge
// request again.
func TestMergeCallResume(t *testing.T) {
	t.Parallel()
	job := mergeModelJob(t, nil)
	reply := byModel(`{"party": "Acme GmbH", "items": [{"name": "Acme Ltd"}]}`, addAmount)
	m := startDoc(t, job, nil)
	var mergeReq, repairReq *fixpoint.Request
	var inFlight []fixpoint.Attempt
	act := m.Next()
	for queue := act.Requests; len(queue) > 0; {
		req := queue[0]
		queue = queue[1:]
		if req.Model == "gpt-4o" {
			mergeReq = req
			inFlight = append(slices.Clone(m.Result().Attempts), *m.Outstanding(req, time.Now()))
		}
		if partOf(req) < 0 && req.Model != "gpt-4o" {
			repairReq = req
			break
		}
		resp, err := reply(req)
		_, act = m.Feed(req, resp, err, time.Now())
		queue = append(queue, act.Requests...)
	}
	if mergeReq == nil || repairReq == nil {
		t.Fatal("no merge or no repair request")
	}
	rows := ledgerRows(m.Result().Attempts)
	if n := len(rows); n != 4 || !rows[3].Called() || rows[3].Raw == "" {
		t.Fatalf("%d attempts before the repair, want 3 chunks and the merge call", n)
	}
	again := startDoc(t, job, &fixpoint.Result{JobID: job.ID, Attempts: rows})
	next := again.Next()
	if len(next.Requests) != 1 || !sameRequest(next.Requests[0], repairReq) {
		t.Errorf("resumed after the merge call: %d requests, want the same repair", len(next.Requests))
	}

	if a := inFlight[len(inFlight)-1]; a.Step != fixpoint.StepMerge || a.ProviderClass != fixpoint.ClassInFlight || !a.Called() {
		t.Fatalf("the merge call in flight is %+v", a)
	}
	flying := startDoc(t, job, &fixpoint.Result{JobID: job.ID, Attempts: ledgerRows(inFlight)})
	next = flying.Next()
	if len(next.Requests) != 1 || !sameRequest(next.Requests[0], mergeReq) {
		t.Fatalf("resumed with the merge call in flight: %d requests, want the same merge request", len(next.Requests))
	}
	_, done := flying.Feed(next.Requests[0], must(reply(next.Requests[0])), nil, time.Now())
	if len(done.Requests) != 1 || !sameRequest(done.Requests[0], repairReq) {
		t.Errorf("after the merge call sent again: %+v, want the same repair", done)
	}
}

// ledgerRows are atts as the ledger keeps them: no values.
func ledgerRows(atts []fixpoint.Attempt) []fixpoint.Attempt {
	rows := slices.Clone(atts)
	for i := range rows {
		rows[i].Value = nil
	}
	return rows
}

func sameRequest(a, b *fixpoint.Request) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestMergeModelNeedsParallel: a merge model under another strategy is a
// bad job naming the setting.
func TestMergeModelNeedsParallel(t *testing.T) {
	t.Parallel()
	job := agreementJob(t, fixpoint.StrategySequential, func(j *repair.Job) { j.Limits.MergeModel = "gpt-4o" })
	_, err := repair.StartDocument(job, nil, repair.Config{})
	if err == nil || !strings.Contains(err.Error(), "merge_model") {
		t.Errorf("sequential with a merge model: %v, want a bad job naming merge_model", err)
	}
}
