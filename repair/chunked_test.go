package repair_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const agreementSchema = `{"type": "object", "properties": {
  "party": {"type": "string"},
  "amount": {"type": "integer"},
  "items": {"type": "array", "x-fixpoint-key": "name", "items": {"type": "object",
    "properties": {"name": {"type": "string"}, "country": {"type": "string"}}, "required": ["name"]}}},
  "required": ["party", "amount", "items"], "additionalProperties": false}`

// agreement splits into three chunks of 30 tokens: the parties, the
// amount, the subsidiaries.
const agreement = "# Agreement\n\nThis agreement is made between Acme GmbH, the provider, and Zeta Ltd, the customer, on the first day of May.\n\n" +
	"The total amount is 1200 euros, payable in twelve monthly instalments of equal size.\n\n" +
	"Subsidiaries: Acme Ltd (UK) and Acme KK (Japan), each wholly owned by the provider.\n"

func agreementJob(t *testing.T, strategy fixpoint.Strategy, edit func(*repair.Job)) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(agreementSchema))
	if err != nil {
		t.Fatal(err)
	}
	job := &repair.Job{ID: "doc-7", Schema: schema, SchemaRaw: []byte(agreementSchema), Model: "gpt-4o-mini",
		Prompt: "Extract the party, the amount and the subsidiaries.", Document: agreement,
		Limits: fixpoint.Limits{MaxAttempts: 2, Strategy: strategy, ChunkTokens: 30}}
	if edit != nil {
		edit(job)
	}
	return job
}

var partRE = regexp.MustCompile(`part (\d+) of (\d+)`)

// partOf is the chunk number a request is over (from its part line), -1
// for a request that names no part.
func partOf(req *fixpoint.Request) int {
	m := partRE.FindStringSubmatch(req.Messages[0].Content)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n - 1
}

// replyFunc answers one request: a reply, or an error.
type replyFunc func(req *fixpoint.Request) (*fixpoint.Response, error)

func chunkReply(s string) (*fixpoint.Response, error) {
	return &fixpoint.Response{Text: s, FinishReason: fixpoint.FinishStop, Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 10}}, nil
}

// byChunk answers a chunk's first request with first[n], a later one
// with again[n] (or first[n]), and any other request with other.
func byChunk(first, again map[int]string, other string) replyFunc {
	return func(req *fixpoint.Request) (*fixpoint.Response, error) {
		n := partOf(req)
		switch {
		case n < 0:
			return chunkReply(other)
		case len(req.Messages) > 1 && again[n] != "":
			return chunkReply(again[n])
		}
		return chunkReply(first[n])
	}
}

// drive runs m to its end, sending each request as soon as it is given
// (replies fed in the order sent), and returns the requests sent.
func drive(t *testing.T, m repair.Machine, reply replyFunc) []*fixpoint.Request {
	t.Helper()
	var sent, queue []*fixpoint.Request
	act := m.Next()
	for i := 0; i < 100; i++ {
		if act.Err != nil {
			t.Fatalf("transient failure: %v", act.Err)
		}
		queue = append(queue, act.Requests...)
		sent = append(sent, act.Requests...)
		if len(queue) == 0 {
			if !act.Done() {
				t.Fatalf("nothing outstanding, and the machine is not done: %+v", act)
			}
			return sent
		}
		req := queue[0]
		queue = queue[1:]
		resp, err := reply(req)
		_, act = m.Feed(req, resp, err, time.Now())
	}
	t.Fatal("the machine did not end in 100 feeds")
	return nil
}

func startDoc(t *testing.T, job *repair.Job, prev *fixpoint.Result) repair.Machine {
	t.Helper()
	m, err := repair.StartDocument(job, prev, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestParallelSendsEveryChunkAtOnce: the first Next gives one request per
// chunk, each its chunk in the document block, the part line and the
// prompt, under the job's system prompt and the part note; then the
// machine waits.
func TestParallelSendsEveryChunkAtOnce(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	act := m.Next()
	if len(act.Requests) != 3 {
		t.Fatalf("first Next: %d requests, want 3 (one per chunk)", len(act.Requests))
	}
	for n, req := range act.Requests {
		msg := req.Messages[0].Content
		if !strings.HasPrefix(msg, fixpoint.DocumentOpen+"\n") || strings.Contains(msg, agreement) {
			t.Errorf("request %d does not hold its chunk alone in the document block: %q", n, msg)
		}
		if partOf(req) != n || !strings.HasSuffix(msg, "Extract the party, the amount and the subsidiaries.") {
			t.Errorf("request %d: part %d, message %q", n, partOf(req), msg)
		}
		if !strings.HasSuffix(req.System, repair.PartNote+" "+repair.ItemNote) || !strings.Contains(req.System, fixpoint.SchemaMarkerOpen) {
			t.Errorf("request %d: the system prompt is not the job's with the part note: %q", n, req.System)
		}
	}
	if !strings.Contains(act.Requests[2].Messages[0].Content, "Acme KK (Japan)") {
		t.Errorf("the third chunk does not hold the subsidiaries: %q", act.Requests[2].Messages[0].Content)
	}
	if again := m.Next(); len(again.Requests) != 0 || !again.Waiting {
		t.Errorf("second Next: %+v, want waiting and no request sent twice", again)
	}
}

// TestSmartValidation: a chunk's value may lack a required property, but
// a type error goes back to that chunk's conversation at once; under
// Strict the missing property is an error too.
func TestSmartValidation(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"amount": "twelve hundred"}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	again := map[int]string{1: `{"amount": 1200}`}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	sent := drive(t, m, byChunk(first, again, ""))
	res := m.Result()
	if len(sent) != 4 || partOf(sent[3]) != 1 {
		t.Fatalf("sent %d requests (the last over part %d), want 4: one per chunk and one more for chunk 1", len(sent), partOf(sent[len(sent)-1]))
	}
	fb := sent[3].Messages[len(sent[3].Messages)-1].Content
	if !strings.Contains(fb, "/amount") {
		t.Errorf("the type error was not fed back: %q", fb)
	}
	if res.Status != fixpoint.StatusValid || string(res.Value) != `{"amount":1200,"items":[{"name":"Acme Ltd"}],"party":"Acme GmbH"}` {
		t.Fatalf("result %s %s (%s), want valid and merged", res.Status, res.Value, res.Error)
	}

	strict := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) { j.Limits.Strict = true }), nil)
	act := strict.Next()
	if strings.Contains(act.Requests[0].System, repair.PartNote) {
		t.Error("under Strict the system prompt still says a value may leave properties out")
	}
	a, next := strict.Feed(act.Requests[0], must(chunkReply(first[0])), nil, time.Now())
	if a.Valid || !hasKeyword(a.Errors, "required") || len(next.Requests) != 1 {
		t.Errorf("under Strict a chunk value without amount: valid %v, errors %v, next %d requests; want invalid, required, one more", a.Valid, a.Errors, len(next.Requests))
	}
}

func must(r *fixpoint.Response, _ error) *fixpoint.Response { return r }

func hasKeyword(errs []fixpoint.ValidationError, kw string) bool {
	for _, e := range errs {
		if e.Keyword == kw {
			return true
		}
	}
	return false
}

// TestMergeAttempt: the chunks' values merge into one, recorded as a
// merge attempt with no call and the places where they disagreed; every
// attempt is numbered job-wide in feed order with its step and chunk,
// and the totals cover the chunk calls.
func TestMergeAttempt(t *testing.T) {
	t.Parallel()
	first := map[int]string{
		0: `{"party": "Acme GmbH", "amount": 1200}`,
		1: `{"party": "Acme", "amount": 1200, "items": [{"name": "Acme Ltd"}]}`,
		2: `{"party": "Acme GmbH", "items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "Japan"}]}`,
	}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	drive(t, m, byChunk(first, nil, ""))
	res := m.Result()
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 4 {
		t.Fatalf("status %s, %d attempts (%s), want valid, 3 chunks and a merge", res.Status, len(res.Attempts), res.Error)
	}
	for i, a := range res.Attempts[:3] {
		if a.No != i+1 || a.Step != fixpoint.StepChunk || a.Chunk == nil || a.Chunk.N != i || a.TokensIn != 100 {
			t.Errorf("attempt %d: no %d, step %s, chunk %+v, tokens in %d", i, a.No, a.Step, a.Chunk, a.TokensIn)
		}
		if strings.Contains(string(a.Request), "Acme GmbH, the provider") || !strings.Contains(string(a.Request), "part "+strconv.Itoa(i+1)+" of 3 of the job's document") {
			t.Errorf("attempt %d keeps the chunk's text, or no line naming it: %s", i, a.Request)
		}
	}
	mg := res.Attempts[3]
	if mg.No != 4 || mg.Step != fixpoint.StepMerge || !mg.Valid || mg.TokensIn != 0 || mg.CostUSD != 0 || len(mg.Request) != 0 {
		t.Errorf("merge attempt: %+v", mg)
	}
	if len(mg.Conflicts) != 1 || mg.Conflicts[0].Path != "/party" || string(mg.Conflicts[0].Chosen) != `"Acme GmbH"` ||
		len(mg.Conflicts[0].Chunks) != 2 || mg.Conflicts[0].Chunks[1][0] != 1 {
		t.Errorf("conflicts %+v, want /party: Acme GmbH of chunks 0 and 2 over Acme of chunk 1", mg.Conflicts)
	}
	var v struct {
		Items []map[string]string `json:"items"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil || len(v.Items) != 2 || v.Items[0]["country"] != "UK" {
		t.Errorf("merged items %s, want Acme Ltd once (with its country) and Acme KK", res.Value)
	}
	if res.Calls != 3 || res.TokensIn != 300 || res.TokensOut != 30 || string(mg.Value) != string(res.Value) {
		t.Errorf("totals: %d calls, %d in, %d out; want 3, 300, 30", res.Calls, res.TokensIn, res.TokensOut)
	}
	if !res.FirstAttemptValid {
		t.Error("every chunk and the merge valid at once, but not first-attempt valid")
	}
}

// TestMergedInvalidIsRepaired: a merged value the full schema refuses
// goes to repair calls asking for a JSON Patch of it: the task, the
// merged value and its errors, and for a required property no chunk gave,
// the document; the patched value ends the job valid.
func TestMergedInvalidIsRepaired(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	repaired := `[{"op": "add", "path": "/amount", "value": 1200}]`
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	sent := drive(t, m, byChunk(first, nil, repaired))
	res := m.Result()
	if len(sent) != 4 || partOf(sent[3]) != -1 {
		t.Fatalf("sent %d requests, want 3 chunks and a repair", len(sent))
	}
	msg := sent[3].Messages[len(sent[3].Messages)-1].Content
	if !strings.HasPrefix(msg, repair.PatchRequestLead) {
		t.Errorf("the repair request is no patch request: %q", msg)
	}
	for _, want := range []string{fixpoint.PreviousReplyOpen + "\n```json\n" + `{"items":[{"name":"Acme Ltd"}],"party":"Acme GmbH"}`, "amount", "3 parts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the repair request lacks %q: %q", want, msg)
		}
	}
	// No chunk gave the amount and none lost its value: the document
	// whole is the only place left to look.
	if task := sent[3].Messages[0].Content; !strings.Contains(task, fixpoint.DocumentOpen+"\n"+agreement+"\n"+fixpoint.DocumentClose) || strings.Contains(sent[3].System, repair.PartNote) {
		t.Errorf("the repair request lacks the document, or has the part note: %q", msg)
	}
	steps := []fixpoint.StepKind{fixpoint.StepChunk, fixpoint.StepChunk, fixpoint.StepChunk, fixpoint.StepMerge, fixpoint.StepRepair}
	if len(res.Attempts) != len(steps) {
		t.Fatalf("%d attempts, want %d", len(res.Attempts), len(steps))
	}
	for i, a := range res.Attempts {
		if a.Step != steps[i] || a.No != i+1 {
			t.Errorf("attempt %d: step %s no %d, want %s %d", i, a.Step, a.No, steps[i], i+1)
		}
	}
	if mg := res.Attempts[3]; mg.Valid || !hasKeyword(mg.Errors, "required") {
		t.Errorf("merge attempt valid %v errors %v, want the missing amount", mg.Valid, mg.Errors)
	}
	if res.Status != fixpoint.StatusValid || res.Calls != 4 || res.FirstAttemptValid {
		t.Errorf("status %s, %d calls, first valid %v; want valid after 4 calls, not first-attempt valid", res.Status, res.Calls, res.FirstAttemptValid)
	}
}

// TestRepairGivesUp: repair calls stop at MaxAttempts and the job ends
// invalid with their errors.
func TestRepairGivesUp(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{}`, 2: `{}`}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	sent := drive(t, m, byChunk(first, nil, `{"party": "Acme GmbH"}`))
	res := m.Result()
	if len(sent) != 5 || res.Status != fixpoint.StatusInvalid || res.Class != string(fixpoint.ClassShape) {
		t.Errorf("sent %d, status %s class %s; want 3 chunks and 2 repairs, then invalid shape", len(sent), res.Status, res.Class)
	}
}

// TestSequentialCarriesTheValueSoFar: each chunk after the first is sent
// the value so far; a chunk that stays invalid keeps it; the last value
// is checked against the full schema.
func TestSequentialCarriesTheValueSoFar(t *testing.T) {
	t.Parallel()
	first := map[int]string{
		0: `{"party": "Acme GmbH"}`,
		1: `{"party": "Acme GmbH", "amount": "lots"}`,
		2: `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}]}`,
	}
	m := startDoc(t, agreementJob(t, fixpoint.StrategySequential, nil), nil)
	var seen []int
	sent := drive(t, m, func(req *fixpoint.Request) (*fixpoint.Response, error) {
		seen = append(seen, partOf(req))
		return byChunk(first, nil, "")(req)
	})
	if want := []int{0, 1, 1, 2}; !equalInts(seen, want) {
		t.Fatalf("parts asked %v, want %v: one at a time, in order, the invalid one twice", seen, want)
	}
	if strings.Contains(sent[0].Messages[0].Content, fixpoint.ValueSoFarOpen) {
		t.Error("the first chunk is sent a value so far")
	}
	for _, i := range []int{1, 3} {
		want := fixpoint.ValueSoFarOpen + "\n" + `{"party":"Acme GmbH"}` + "\n" + fixpoint.ValueSoFarClose
		if !strings.Contains(sent[i].Messages[0].Content, want) {
			t.Errorf("request %d lacks the value so far %q: %q", i, want, sent[i].Messages[0].Content)
		}
	}
	res := m.Result()
	if res.Status != fixpoint.StatusValid || res.Attempts[len(res.Attempts)-1].Step != fixpoint.StepMerge || res.Calls != 4 {
		t.Errorf("status %s (%s), %d calls", res.Status, res.Error, res.Calls)
	}
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

// TestResumeAfterTransientFailure: a chunk call that fails transiently
// makes the job wait (the error matches ErrTransient); a machine started
// again from the result sends only that chunk, and the totals cover
// every call of both runs.
func TestResumeAfterTransientFailure(t *testing.T) {
	t.Parallel()
	job := agreementJob(t, fixpoint.StrategyParallel, nil)
	first := map[int]string{0: `{"party": "Acme GmbH", "amount": 1200}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	m := startDoc(t, job, nil)
	act := m.Next()
	var gotErr error
	for _, req := range act.Requests {
		var next repair.DocAction
		if partOf(req) == 1 {
			_, next = m.Feed(req, nil, &fixpoint.ProviderError{Status: 503, Class: fixpoint.ClassOverloaded, Message: "overloaded"}, time.Now())
		} else {
			_, next = m.Feed(req, must(chunkReply(first[partOf(req)])), nil, time.Now())
		}
		if next.Err != nil {
			gotErr = next.Err
		}
	}
	if !errors.Is(gotErr, fixpoint.ErrTransient) {
		t.Fatalf("a 503 gave %v, want an error matching ErrTransient", gotErr)
	}
	prev := m.Result()
	if len(prev.Attempts) != 3 || prev.Calls != 3 {
		t.Fatalf("after the first run: %d attempts, %d calls; want 3, 3", len(prev.Attempts), prev.Calls)
	}
	again := startDoc(t, job, prev)
	sent := drive(t, again, byChunk(map[int]string{1: `{"amount": 1200}`}, nil, ""))
	if len(sent) != 1 || partOf(sent[0]) != 1 {
		for _, r := range sent {
			t.Logf("sent part %d: %d messages", partOf(r), len(r.Messages))
		}
		t.Fatalf("the second run sent %d requests, want the failed chunk's only", len(sent))
	}
	res := again.Result()
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 5 || res.Calls != 4 || res.TokensIn != 300 || res.Attempts[3].No != 4 {
		t.Errorf("status %s, %d attempts, %d calls, %d tokens in; want valid, 5 (one a merge), 4, 300", res.Status, len(res.Attempts), res.Calls, res.TokensIn)
	}
}

// TestChunkedBadJobs: a job the chunked strategies can never run is
// refused with ErrBadJob and a message naming why.
func TestChunkedBadJobs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		edit func(*repair.Job)
		want string
	}{
		{"no document", func(j *repair.Job) { j.Document = "" }, "no document"},
		{"mode tool", func(j *repair.Job) { j.Mode = fixpoint.ModeTool }, "needs mode prompt"},
		{"not UTF-8", func(j *repair.Job) { j.Document = "ab\xffcd" }, "split the document"},
		{"overlap too large", func(j *repair.Job) { j.Limits.ChunkOverlap = 30 }, "chunk_overlap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := repair.StartDocument(agreementJob(t, fixpoint.StrategyParallel, c.edit), nil, repair.Config{})
			if !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrBadJob naming %q", err, c.want)
			}
		})
	}
}

// TestRepairSendsLostChunks: the repair of a merged value is sent the
// text of the chunks that ended without a valid value, and only theirs;
// its attempts keep a line naming them instead.
func TestRepairSendsLostChunks(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `I cannot find anything here.`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	repaired := `[{"op": "add", "path": "/amount", "value": 1200}]`
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	sent := drive(t, m, byChunk(first, nil, repaired))
	last := sent[len(sent)-1]
	msg := last.Messages[0].Content
	if partOf(last) != -1 || !strings.Contains(msg, "The total amount is 1200 euros") || strings.Contains(msg, "Acme KK") {
		t.Errorf("the repair request does not hold part 2 alone: %q", msg)
	}
	res := m.Result()
	rep := res.Attempts[len(res.Attempts)-1]
	if rep.Step != fixpoint.StepRepair || strings.Contains(string(rep.Request), "1200 euros") || !strings.Contains(string(rep.Request), "part 2 (code points 117 to 209)") {
		t.Errorf("the repair attempt keeps %s", rep.Request)
	}
	if res.Status != fixpoint.StatusValid || res.Calls != 5 {
		t.Errorf("status %s after %d calls, want valid after 5 (3 chunks, one again, a repair)", res.Status, res.Calls)
	}
}

// TestChunkedTokenBudget: chunk requests that together would cross the
// token budget are not sent, and the job fails on the budget.
func TestChunkedTokenBudget(t *testing.T) {
	t.Parallel()
	job := agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) { j.Limits.TokenBudget = 2500 })
	m := startDoc(t, job, nil)
	act := m.Next()
	if len(act.Requests) == 0 || len(act.Requests) == 3 {
		t.Fatalf("%d requests sent under a budget that holds one or two of the three", len(act.Requests))
	}
	for _, req := range act.Requests {
		_, act = m.Feed(req, must(chunkReply(`{"party": "Acme GmbH"}`)), nil, time.Now())
	}
	res := m.Result()
	if !act.Done() || res.Status != fixpoint.StatusFailed || res.Class != fixpoint.OutcomeBudget || !strings.Contains(res.Error, "token budget 2500") {
		t.Errorf("done %v, status %s class %s (%s); want failed on the budget", act.Done(), res.Status, res.Class, res.Error)
	}
}

// TestChunkedOutstanding: a request in flight is recorded, should the
// worker stop, as an attempt of its chunk numbered after those recorded
// and the requests sent before it.
func TestChunkedOutstanding(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	act := m.Next()
	m.Feed(act.Requests[0], must(chunkReply(`{"party": "Acme GmbH"}`)), nil, time.Now())
	a := m.Outstanding(act.Requests[2], time.Now())
	if a == nil || a.No != 3 || a.Step != fixpoint.StepChunk || a.Chunk.N != 2 || a.ProviderClass != fixpoint.ClassInFlight {
		t.Fatalf("outstanding attempt %+v, want no 3 of chunk 2, in flight", a)
	}
	if m.Outstanding(act.Requests[0], time.Now()) != nil {
		t.Error("a request already fed is outstanding")
	}
	m.Stop(fixpoint.StatusOverBudget, fixpoint.OutcomeBudget, "batch spend cap")
	if res := m.Result(); res.Status != fixpoint.StatusOverBudget || !m.Next().Done() {
		t.Errorf("after Stop: status %s, done %v", res.Status, m.Next().Done())
	}
}

// failing answers with a 503 every request for which fail says so, and
// with reply the others.
func failing(fail func(req *fixpoint.Request) bool, reply replyFunc) replyFunc {
	return func(req *fixpoint.Request) (*fixpoint.Response, error) {
		if fail(req) {
			return nil, &fixpoint.ProviderError{Status: 503, Class: fixpoint.ClassOverloaded, Message: "overloaded"}
		}
		return reply(req)
	}
}

// runUntilErr feeds m's requests until a Feed says to wait out a
// transient failure, and returns the requests sent.
func runUntilErr(t *testing.T, m repair.Machine, reply replyFunc) []*fixpoint.Request {
	t.Helper()
	var sent, queue []*fixpoint.Request
	act := m.Next()
	for i := 0; i < 100; i++ {
		queue = append(queue, act.Requests...)
		sent = append(sent, act.Requests...)
		if act.Err != nil && len(queue) == 0 {
			if !errors.Is(act.Err, fixpoint.ErrTransient) {
				t.Fatalf("error %v does not match ErrTransient", act.Err)
			}
			return sent
		}
		if len(queue) == 0 {
			t.Fatalf("the machine ended (%s) without a transient failure", m.Result().Status)
		}
		req := queue[0]
		queue = queue[1:]
		resp, err := reply(req)
		_, act = m.Feed(req, resp, err, time.Now())
	}
	t.Fatal("no transient failure in 100 feeds")
	return nil
}

// TestResumeInTheRepair: a repair call that fails transiently is sent
// again by a machine started from the result, and only it: no chunk is
// asked again and the merge is not recorded twice. A driver that keeps
// the machine and calls Next again gets the same request.
func TestResumeInTheRepair(t *testing.T) {
	t.Parallel()
	job := agreementJob(t, fixpoint.StrategyParallel, nil)
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	repaired := `[{"op": "add", "path": "/amount", "value": 1200}]`
	m := startDoc(t, job, nil)
	runUntilErr(t, m, failing(func(r *fixpoint.Request) bool { return partOf(r) < 0 }, byChunk(first, nil, repaired)))
	if again := m.Next(); len(again.Requests) != 1 || partOf(again.Requests[0]) != -1 {
		t.Errorf("Next after the failure: %+v, want the repair request again", again)
	}
	again := startDoc(t, job, m.Result())
	sent := drive(t, again, byChunk(first, nil, repaired))
	if len(sent) != 1 || partOf(sent[0]) != -1 || !strings.Contains(sent[0].Messages[len(sent[0].Messages)-1].Content, fixpoint.PreviousReplyOpen) {
		t.Fatalf("the second run sent %d requests, want the repair request alone", len(sent))
	}
	res := again.Result()
	merges := 0
	for _, a := range res.Attempts {
		if a.Step == fixpoint.StepMerge {
			merges++
		}
	}
	if res.Status != fixpoint.StatusValid || merges != 1 || len(res.Attempts) != 6 || res.Calls != 5 {
		t.Errorf("status %s, %d merges, %d attempts, %d calls; want valid, 1, 6, 5", res.Status, merges, len(res.Attempts), res.Calls)
	}
}

// TestSequentialResume: a sequential job that failed transiently on its
// third chunk goes on from there with the value the first two built.
func TestSequentialResume(t *testing.T) {
	t.Parallel()
	job := agreementJob(t, fixpoint.StrategySequential, nil)
	first := map[int]string{
		0: `{"party": "Acme GmbH"}`,
		1: `{"party": "Acme GmbH", "amount": 1200}`,
		2: `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}]}`,
	}
	m := startDoc(t, job, nil)
	runUntilErr(t, m, failing(func(r *fixpoint.Request) bool { return partOf(r) == 2 }, byChunk(first, nil, "")))
	again := startDoc(t, job, m.Result())
	sent := drive(t, again, byChunk(first, nil, ""))
	want := fixpoint.ValueSoFarOpen + "\n" + `{"amount":1200,"party":"Acme GmbH"}`
	if len(sent) != 1 || partOf(sent[0]) != 2 || !strings.Contains(sent[0].Messages[0].Content, want) {
		t.Fatalf("the second run sent %d requests, want part 3 alone with the value so far", len(sent))
	}
	if res := again.Result(); res.Status != fixpoint.StatusValid || res.Calls != 4 {
		t.Errorf("status %s after %d calls (%s)", res.Status, res.Calls, res.Error)
	}
}

// TestRepairSendsTheChunkOfAnItem: an object inside a list item (its
// head office) that lacks a required property, which smart validation
// lets through below an item, is repaired with the chunk whose text
// names the item, and no other.
func TestRepairSendsTheChunkOfAnItem(t *testing.T) {
	t.Parallel()
	const nested = `{"type": "object", "properties": {
  "party": {"type": "string"},
  "amount": {"type": "integer"},
  "items": {"type": "array", "x-fixpoint-key": "name", "items": {"type": "object",
    "properties": {"name": {"type": "string"}, "hq": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}, "required": ["name"]}}},
  "required": ["party", "amount", "items"], "additionalProperties": false}`
	schema, err := validate.Compile([]byte(nested))
	if err != nil {
		t.Fatal(err)
	}
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"amount": 1200}`, 2: `{"items": [{"name": "Acme Ltd"}, {"name": "Acme KK", "hq": {}}]}`}
	repaired := `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}, {"name": "Acme KK", "hq": {"country": "Japan"}}]}`
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) { j.Schema, j.SchemaRaw = schema, []byte(nested) }), nil)
	sent := drive(t, m, byChunk(first, nil, repaired))
	msg := sent[len(sent)-1].Messages[0].Content
	if !strings.Contains(msg, "Acme KK (Japan)") || strings.Contains(msg, "1200 euros") || !strings.Contains(msg, "only part 3 (code points 209 to 293) of 3") {
		t.Errorf("the repair request does not hold part 3 alone: %q", msg)
	}
	if res := m.Result(); res.Status != fixpoint.StatusValid {
		t.Errorf("status %s: %s", res.Status, res.Error)
	}
}

// TestChunkItemKeepsItsRequired: a list item that lacks a property its
// schema requires goes back to its chunk's conversation at once, with the
// chunk's text, where the model fills it in; the merged value is valid
// with no repair. A root property the chunk lacks is still no error.
func TestChunkItemKeepsItsRequired(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"amount": 1200}`, 2: `{"items": [{"name": "Acme Ltd"}, {"country": "Japan"}]}`}
	again := map[int]string{2: `{"items": [{"name": "Acme Ltd"}, {"name": "Acme KK", "country": "Japan"}]}`}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	sent := drive(t, m, byChunk(first, again, ""))
	var retries []string
	for _, req := range sent {
		if partOf(req) < 0 {
			t.Errorf("a request of no chunk was sent (a repair): %q", req.Messages[0].Content)
		}
		if len(req.Messages) > 1 {
			retries = append(retries, fmt.Sprintf("part %d: %s", partOf(req)+1, req.Messages[len(req.Messages)-1].Content))
		}
	}
	if len(retries) != 1 || !strings.Contains(retries[0], "part 3: ") || !strings.Contains(retries[0], `/items/1/name: missing required property "name"`) {
		t.Errorf("retries %q, want part 3's alone, naming /items/1/name", retries)
	}
	res := m.Result()
	want := `{"amount":1200,"items":[{"name":"Acme Ltd"},{"country":"Japan","name":"Acme KK"}],"party":"Acme GmbH"}`
	if res.Status != fixpoint.StatusValid || string(res.Value) != want {
		t.Errorf("status %s, value %s (%s), want valid %s", res.Status, res.Value, res.Error, want)
	}
}

// TestInvalidChunkDropsAnIncompleteItem: a chunk that ends invalid gives
// the merge no list item that lacks a required property, whether its
// reply left it out or an error's place took it: the item goes whole, and
// what else the chunk read is merged.
func TestInvalidChunkDropsAnIncompleteItem(t *testing.T) {
	t.Parallel()
	first := map[int]string{
		0: `{"party": "Acme GmbH"}`,
		1: `{"amount": 1200}`,
		2: `{"items": [{"name": 7, "country": "UK"}, {"country": "France"}, {"name": "Acme KK", "country": "Japan"}, {"country": 3}]}`,
	}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	drive(t, m, byChunk(first, nil, ""))
	res := m.Result()
	want := `{"amount":1200,"items":[{"country":"Japan","name":"Acme KK"}],"party":"Acme GmbH"}`
	if res.Status != fixpoint.StatusValid || string(res.Value) != want {
		t.Errorf("status %s, value %s (%s), want valid %s", res.Status, res.Value, res.Error, want)
	}
}

// TestInvalidChunkGivesWhatItGotRight: a chunk that ends invalid gives
// the merge its value less the places its errors name (an item left
// empty goes too); a chunk whose reply held no value gives nothing.
func TestInvalidChunkGivesWhatItGotRight(t *testing.T) {
	t.Parallel()
	first := map[int]string{
		0: `{"party": "Acme GmbH", "amount": "twelve hundred"}`,
		1: `{"amount": 1200}`,
		2: `{"items": [{"name": "Acme Ltd", "country": 44}, {"name": 7}, {"name": "Acme KK", "country": "Japan"}]}`,
	}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, nil), nil)
	drive(t, m, byChunk(first, nil, ""))
	res := m.Result()
	want := `{"amount":1200,"items":[{"name":"Acme Ltd"},{"country":"Japan","name":"Acme KK"}],"party":"Acme GmbH"}`
	if res.Status != fixpoint.StatusValid || string(res.Value) != want {
		t.Errorf("status %s, value %s (%s), want valid %s", res.Status, res.Value, res.Error, want)
	}
}

// TestSequentialItemsStayRelaxed: a sequential reply writes back every
// item the chunks before it read, whose fields its own chunk does not
// hold, so its list items' required stay relaxed: an item without its
// name is no error of the chunk (and its prompt says nothing of items),
// and goes to the repair of the final value.
func TestSequentialItemsStayRelaxed(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"party": "Acme GmbH", "amount": 1200}`,
		2: `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}, {"country": "Japan"}]}`}
	repaired := `{"party": "Acme GmbH", "amount": 1200, "items": [{"name": "Acme Ltd"}, {"name": "Acme KK", "country": "Japan"}]}`
	m := startDoc(t, agreementJob(t, fixpoint.StrategySequential, nil), nil)
	sent := drive(t, m, byChunk(first, nil, repaired))
	for _, req := range sent {
		if n := partOf(req); n >= 0 && (len(req.Messages) > 1 || strings.Contains(req.System, repair.ItemNote)) {
			t.Errorf("part %d: %d messages, system prompt %q; want one message and no item note", n+1, len(req.Messages), req.System)
		}
	}
	if last := sent[len(sent)-1]; partOf(last) >= 0 {
		t.Errorf("the last request is of part %d, want the repair", partOf(last)+1)
	}
	if res := m.Result(); res.Status != fixpoint.StatusValid || string(res.Value) != `{"amount":1200,"items":[{"name":"Acme Ltd"},{"country":"Japan","name":"Acme KK"}],"party":"Acme GmbH"}` {
		t.Errorf("status %s, value %s (%s)", res.Status, res.Value, res.Error)
	}
}
