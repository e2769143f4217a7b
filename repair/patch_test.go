package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const patchTestSchema = `{"type":"object","properties":{
  "customer":{"type":"object","properties":{"name":{"type":"string","minLength":2},"tier":{"enum":["free","pro","enterprise"]}},"required":["name","tier"],"additionalProperties":false},
  "lines":{"type":"array","minItems":1,"items":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"qty":{"type":"integer","minimum":1},"price":{"type":"number"}},"required":["sku","qty"],"additionalProperties":false}},
  "rush":{"type":"boolean"}},
  "required":["customer","lines","rush"],"additionalProperties":false}`

const (
	patchTask = "Extract the order: customer Ada Lovelace (pro), 3 x ABC-1000 at 12.50, not rush."
	// badValue fails on /customer/tier (enum), /lines/0/qty (minimum)
	// and /rush (required); the reply wraps it in prose and a fence.
	badValue = `{"customer":{"name":"Ada Lovelace","tier":"gold"},"lines":[{"sku":"ABC-1000","qty":0,"price":12.50}]}`
	badReply = "Here is the order:\n```json\n" + badValue + "\n```"
	// goodPatch fixes every error of badValue.
	goodPatch = `[{"op":"replace","path":"/customer/tier","value":"pro"},{"op":"replace","path":"/lines/0/qty","value":3},{"op":"add","path":"/rush","value":false}]`
	// goodValue is badValue patched by goodPatch, as attempts record values
	// (keys sorted, number text kept).
	goodValue = `{"customer":{"name":"Ada Lovelace","tier":"pro"},"lines":[{"price":12.50,"qty":3,"sku":"ABC-1000"}],"rush":false}`
	// halfPatch fixes the tier only.
	halfPatch = `[{"op":"replace","path":"/customer/tier","value":"pro"}]`
	// halfValue is badValue patched by halfPatch, as shown to the model.
	halfValue = `{"customer":{"name":"Ada Lovelace","tier":"pro"},"lines":[{"sku":"ABC-1000","qty":0,"price":12.50}]}`
)

var badErrors = []string{
	`/customer/tier: "gold" is not one of ["free","pro","enterprise"]`,
	`/lines/0/qty: 0 is less than the minimum 1`,
	`/rush: missing required property "rush"`,
}

// scripted is one call's outcome for the fake client: a reply, or err.
type scripted struct {
	text   string
	finish fixpoint.FinishReason
	err    error
}

func patchJob(t *testing.T, lim fixpoint.Limits) *Job {
	t.Helper()
	schema, err := validate.Compile([]byte(patchTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	if lim.Strategy == "" {
		lim.Strategy = fixpoint.StrategyPatch
	}
	return &Job{ID: "patch-1", Prompt: patchTask, Schema: schema, SchemaRaw: []byte(patchTestSchema), Model: "m",
		CacheKey: "orders", Limits: lim}
}

var patchClock = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func patchConfig() Config {
	return Config{NowFunc: func() time.Time { return patchClock }}
}

// respond is the fake client: the scripted outcome as a response or error.
func respond(r scripted) (*fixpoint.Response, error) {
	if r.err != nil {
		return nil, r.err
	}
	finish := r.finish
	if finish == "" {
		finish = fixpoint.FinishStop
	}
	return &fixpoint.Response{Text: r.text, FinishReason: finish, Status: 200, Model: "m",
		Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: len(r.text)/4 + 1}}, nil
}

// drive runs step through the script, one call at a time, and returns the
// requests it sent; a transient failure is waited out (Next again).
func drive(t *testing.T, step *Step, script []scripted) []*fixpoint.Request {
	t.Helper()
	var reqs []*fixpoint.Request
	act := step.Next()
	for _, r := range script {
		if act.Err != nil {
			act = step.Next()
		}
		if act.Request == nil {
			t.Fatalf("after %d calls: %+v, want a request", len(reqs), act)
		}
		reqs = append(reqs, act.Request)
		resp, err := respond(r)
		_, act = step.Feed(resp, err, patchClock)
	}
	if !act.Done() {
		t.Fatalf("after the script: %+v, want done", act)
	}
	return reqs
}

// run starts job and drives it through the script.
func run(t *testing.T, job *Job, script []scripted) ([]*fixpoint.Request, *fixpoint.Result) {
	t.Helper()
	step, err := Start(job, nil, patchConfig())
	if err != nil {
		t.Fatal(err)
	}
	reqs := drive(t, step, script)
	return reqs, step.Result()
}

// wantPatchRequest is the patch request for value with the text-format
// errors given, byte for byte.
func wantPatchRequest(value string, errs []string) string {
	var list strings.Builder
	for i, e := range errs {
		list.WriteString(string(rune('1'+i)) + ". " + e + "\n")
	}
	return "Correct your previous JSON value with an RFC 6902 JSON Patch.\n\n" +
		"Your previous reply gave this JSON value:\n<previous-reply>\n```json\n" + value + "\n```\n</previous-reply>\n\n" +
		"It does not match the JSON Schema:\n" + list.String() +
		"\nReply with an RFC 6902 JSON Patch that fixes every error: a JSON array of operations only, " +
		"with no prose and no code fences. Each operation is an object with \"op\" " +
		"(\"add\", \"remove\", \"replace\", \"move\", \"copy\" or \"test\"), \"path\" (a JSON pointer into the value above) " +
		"and \"value\" or \"from\" as the operation needs. " +
		"Touch only the locations with errors: an error's path or what is below it " +
		"(add a missing required property at its path). Do not send the whole value again."
}

// The patch request keeps the first attempt's system prompt and task turn
// as they were (the cached prefix) and adds one user turn: the marker
// phrase, the previous value in a ```json block, the errors with their
// pointers, and the ask for an array of operations.
func TestPatchRequestShape(t *testing.T) {
	t.Parallel()
	reqs, res := run(t, patchJob(t, fixpoint.Limits{}), []scripted{{text: badReply}, {text: goodPatch}})
	first, second := reqs[0], reqs[1]
	if first.System == "" || second.System != first.System {
		t.Fatalf("system prompt changed:\n%q\n%q", first.System, second.System)
	}
	if second.CacheKey != "orders" || !second.CacheSystem || second.Mode != fixpoint.ModePrompt {
		t.Errorf("cache key %q, cache system %v, mode %q; want the first request's", second.CacheKey, second.CacheSystem, second.Mode)
	}
	if len(first.Messages) != 1 || len(second.Messages) != 2 {
		t.Fatalf("messages: %d then %d, want 1 then 2", len(first.Messages), len(second.Messages))
	}
	if !reflect.DeepEqual(second.Messages[0], first.Messages[0]) || second.Messages[0].Content != patchTask {
		t.Errorf("first user message changed: %+v, want %+v", second.Messages[0], first.Messages[0])
	}
	// Byte-identical prefix as sent: system, then the task turn.
	b1, _ := json.Marshal(first.Messages)
	b2, _ := json.Marshal(second.Messages[:1])
	if string(b1) != string(b2) {
		t.Errorf("prefix bytes differ:\n%s\n%s", b1, b2)
	}
	msg := second.Messages[1]
	if msg.Role != fixpoint.RoleUser {
		t.Errorf("patch request role %q, want user", msg.Role)
	}
	for _, want := range append([]string{"RFC 6902 JSON Patch", "```json\n" + badValue + "\n```", "JSON array of operations only"}, badErrors...) {
		if !strings.Contains(msg.Content, want) {
			t.Errorf("patch request lacks %q:\n%s", want, msg.Content)
		}
	}
	if want := wantPatchRequest(badValue, badErrors); msg.Content != want {
		t.Errorf("patch request:\n%s\nwant:\n%s", msg.Content, want)
	}
	if res.Attempts[0].Feedback != msg.Content {
		t.Errorf("attempt 1 feedback is not the patch request sent:\n%s", res.Attempts[0].Feedback)
	}
	if res.Attempts[0].PatchOutcome != "" || res.Attempts[0].Patch != "" {
		t.Errorf("attempt 1 answered no patch request: outcome %q, patch %q", res.Attempts[0].PatchOutcome, res.Attempts[0].Patch)
	}
}

// The xml feedback format lists the errors as a <validation-errors> block
// in the patch request, the vague one none; a job given as messages keeps
// them all.
func TestPatchRequestXMLAndMessages(t *testing.T) {
	t.Parallel()
	job := patchJob(t, fixpoint.Limits{Feedback: fixpoint.FeedbackXML})
	job.Prompt = ""
	job.Messages = []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "Orders follow."}, {Role: fixpoint.RoleAssistant, Content: "Ready."}, {Role: fixpoint.RoleUser, Content: patchTask}}
	reqs, _ := run(t, job, []scripted{{text: badReply}, {text: goodPatch}})
	second := reqs[1].Messages
	if len(second) != 4 || !reflect.DeepEqual(second[:3], job.Messages) {
		t.Fatalf("messages %+v, want the job's three then the patch request", second)
	}
	c := second[3].Content
	if !strings.HasPrefix(c, PatchRequestLead+"\n") || !strings.Contains(c, "<validation-errors>\n<error path=\"/customer/tier\" keyword=\"enum\">") ||
		!strings.Contains(c, `<error path="/rush" keyword="required">`) {
		t.Errorf("xml patch request:\n%s", c)
	}
	// Vague feedback names no error, in a patch request too.
	reqs, _ = run(t, patchJob(t, fixpoint.Limits{Feedback: fixpoint.FeedbackVague}), []scripted{{text: badReply}, {text: goodPatch}})
	if c := reqs[1].Messages[1].Content; !strings.Contains(c, "```json\n"+badValue+"\n```\n</previous-reply>\n\nIt is not valid.\n") || strings.Contains(c, "/customer/tier") {
		t.Errorf("vague patch request:\n%s", c)
	}
}

// A patch that fixes every error makes the attempt valid: the value is the
// patched value (number text kept), and the attempt records the patch.
func TestPatchFixesValue(t *testing.T) {
	t.Parallel()
	// The patch may come in a fence, after prose naming an object, with a
	// trailing comma: the first array is the patch.
	reply := "Here is the patch for {\"tier\": \"gold\"}:\n```json\n" + strings.TrimSuffix(goodPatch, "]") + ",]\n```"
	reqs, res := run(t, patchJob(t, fixpoint.Limits{}), []scripted{{text: badReply}, {text: reply}})
	if len(reqs) != 2 || res.Status != fixpoint.StatusValid || len(res.Attempts) != 2 {
		t.Fatalf("status %s after %d calls, %d attempts; want valid after 2", res.Status, len(reqs), len(res.Attempts))
	}
	a := res.Attempts[1]
	if !a.Valid || a.Class != "" || len(a.Errors) != 0 || a.PatchOutcome != fixpoint.PatchApplied {
		t.Fatalf("attempt 2: valid %v class %q errors %v outcome %q", a.Valid, a.Class, a.Errors, a.PatchOutcome)
	}
	if string(res.Value) != goodValue || string(a.Value) != goodValue {
		t.Errorf("value %s, want %s", res.Value, goodValue)
	}
	if a.Patch != goodPatch {
		t.Errorf("patch %s, want %s", a.Patch, goodPatch)
	}
	if a.Source != fixpoint.SourceFence || len(a.Repairs) != 2 || a.Repairs[0].Kind != "trailing_comma" || a.Repairs[1].Kind != RepairJSONPatch ||
		a.Repairs[1].Offset != strings.Index(reply, "[") {
		t.Errorf("source %q, repairs %+v; want fence, the trailing comma then json_patch at the array", a.Source, a.Repairs)
	}
	if !a.RepairedLocally || res.FirstAttemptValid {
		t.Errorf("repaired locally %v, first attempt valid %v; want true, false", a.RepairedLocally, res.FirstAttemptValid)
	}
}

// A patched value that still fails gets the next patch request with the
// patched value (as patched: key order and number text kept) and its own
// errors.
func TestPatchStillInvalidAsksAgain(t *testing.T) {
	t.Parallel()
	rest := `[{"op":"replace","path":"/lines/0/qty","value":3},{"op":"add","path":"/rush","value":false}]`
	reqs, res := run(t, patchJob(t, fixpoint.Limits{}), []scripted{{text: badReply}, {text: halfPatch}, {text: rest}})
	if res.Status != fixpoint.StatusValid || len(reqs) != 3 {
		t.Fatalf("status %s after %d calls, want valid after 3", res.Status, len(reqs))
	}
	a := res.Attempts[1]
	if a.PatchOutcome != fixpoint.PatchApplied || a.Valid || a.Class != string(fixpoint.ClassShape) || len(a.Errors) != 2 {
		t.Fatalf("attempt 2: outcome %q valid %v class %q errors %v", a.PatchOutcome, a.Valid, a.Class, a.Errors)
	}
	third := reqs[2].Messages
	if len(third) != 2 || !reflect.DeepEqual(third[0], reqs[0].Messages[0]) {
		t.Fatalf("third request messages %+v, want the task turn then a patch request", third)
	}
	if want := wantPatchRequest(halfValue, badErrors[1:]); third[1].Content != want {
		t.Errorf("second patch request:\n%s\nwant:\n%s", third[1].Content, want)
	}
	if string(res.Value) != goodValue {
		t.Errorf("value %s, want %s", res.Value, goodValue)
	}
}

// wantReask is the full re-ask after a patch that could not be used: the
// repair strategy's message showing the value that was to be patched.
func wantReask(reason string) string {
	var list strings.Builder
	for i, e := range badErrors {
		list.WriteString(string(rune('1'+i)) + ". " + e + "\n")
	}
	fb := "Your patch could not be used: " + reason + ". Reply with the whole corrected JSON value instead.\n" +
		"Your reply did not match the JSON Schema. Fix every error below and reply with the corrected JSON value only:\n" +
		strings.TrimSuffix(list.String(), "\n")
	return repairMessage(patchTask, badValue, fb)
}

// A patch that cannot be used (no patch, one that does not apply, one that
// touches a location with no error) leaves the value as it was and falls
// back to a full re-ask, which the next full value answers.
func TestPatchFallbacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reply   scripted
		outcome fixpoint.PatchOutcome
		patch   string
		reason  string
	}{
		{name: "parse error: prose", reply: scripted{text: "I changed the tier to pro."}, outcome: fixpoint.PatchParseError,
			reason: "your reply held no JSON array of operations"},
		{name: "parse error: a whole value", reply: scripted{text: `{"customer":{"name":"Ada Lovelace","tier":"pro"}}`}, outcome: fixpoint.PatchParseError,
			reason: "your reply held no JSON array of operations"},
		{name: "parse error: not operations", reply: scripted{text: `[{"op":"replace","value":"pro"}]`}, outcome: fixpoint.PatchParseError,
			reason: "your reply is not a valid patch: invalid operation {\"op\":\"replace\",\"value\":\"pro\"}: failed to decode 'path': operation missing path field: missing value"},
		{name: "parse error: a value read by a guess", reply: scripted{text: `[{"op":"replace","path":"/customer/tier","value":"pro" plus}]`}, outcome: fixpoint.PatchParseError,
			reason: `your patch has text after a value that is not part of the JSON at offset 55 ("plus}]")`},
		{name: "parse error: a key written twice", reply: scripted{text: `[{"op":"replace","path":"/customer/tier","value":"free","value":"pro"}]`}, outcome: fixpoint.PatchParseError,
			reason: `in your patch, /0/value: the key "value" is written twice in one object; write it once, with the value meant`},
		{name: "parse error: half a surrogate pair", reply: scripted{text: `[{"op":"replace","path":"/customer/tier","value":"pr\ud800o"}]`}, outcome: fixpoint.PatchParseError,
			reason: `in your patch, /0/value: a string holds half of a UTF-16 surrogate pair (a \uD800-\uDFFF escape without its other half), which is no character: readers replace it with U+FFFD; write the character itself`},
		{name: "parse error: two patches", reply: scripted{text: "Wrong: [{\"op\":\"replace\",\"path\":\"/customer/tier\",\"value\":\"free\"}]\nCorrected: [{\"op\":\"replace\",\"path\":\"/customer/tier\",\"value\":\"pro\"}]"},
			outcome: fixpoint.PatchParseError, reason: "your reply holds more than one JSON array, at offsets 7 and 76; reply with only the patch meant"},
		{name: "parse error: bad pointer", reply: scripted{text: `[{"op":"replace","path":"customer/tier","value":"pro"}]`}, outcome: fixpoint.PatchParseError,
			reason: `operation 1: "customer/tier" is not a JSON pointer`},
		{name: "apply error: missing path", reply: scripted{text: `[{"op":"replace","path":"/rush","value":false}]`}, outcome: fixpoint.PatchApplyError,
			patch:  `[{"op":"replace","path":"/rush","value":false}]`,
			reason: "it does not apply to the value: replace operation does not apply: doc is missing key: /rush: missing value"},
		{name: "apply error: failed test", reply: scripted{text: `[{"op":"test","path":"/customer/tier","value":"pro"},{"op":"replace","path":"/customer/tier","value":"pro"}]`},
			outcome: fixpoint.PatchApplyError, patch: `[{"op":"test","path":"/customer/tier","value":"pro"},{"op":"replace","path":"/customer/tier","value":"pro"}]`,
			reason: "it does not apply to the value: testing value /customer/tier failed: test failed"},
		{name: "out of scope", reply: scripted{text: `[{"op":"replace","path":"/customer/tier","value":"pro"},{"op":"replace","path":"/customer/name","value":"Ada"}]`},
			outcome: fixpoint.PatchOutOfScope, patch: `[{"op":"replace","path":"/customer/tier","value":"pro"},{"op":"replace","path":"/customer/name","value":"Ada"}]`,
			reason: "it changes /customer/name, where there is no error"},
		{name: "out of scope: move from", reply: scripted{text: `[{"op":"move","from":"/customer/name","path":"/rush"}]`},
			outcome: fixpoint.PatchOutOfScope, patch: `[{"op":"move","from":"/customer/name","path":"/rush"}]`,
			reason: "it changes /customer/name, where there is no error"},
		{name: "out of scope: sibling index", reply: scripted{text: `[{"op":"replace","path":"/lines/00/qty","value":3}]`},
			outcome: fixpoint.PatchOutOfScope, patch: `[{"op":"replace","path":"/lines/00/qty","value":3}]`,
			reason: "it changes /lines/00/qty, where there is no error"},
		{name: "truncated", reply: scripted{text: `[{"op":"replace","path":"/customer/tier","value":"pro"},{"op":"rep`, finish: fixpoint.FinishLength},
			outcome: fixpoint.PatchParseError, reason: "your reply was cut off at the output token limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			full := `{"customer":{"name":"Ada Lovelace","tier":"pro"},"lines":[{"sku":"ABC-1000","qty":3,"price":12.50}],"rush":false}`
			reqs, res := run(t, patchJob(t, fixpoint.Limits{}), []scripted{{text: badReply}, tc.reply, {text: full}})
			if res.Status != fixpoint.StatusValid || len(reqs) != 3 {
				t.Fatalf("status %s after %d calls, want valid after 3", res.Status, len(reqs))
			}
			a := res.Attempts[1]
			if a.PatchOutcome != tc.outcome || a.Patch != tc.patch || a.Valid {
				t.Errorf("attempt 2: outcome %q patch %q valid %v; want %q %q", a.PatchOutcome, a.Patch, a.Valid, tc.outcome, tc.patch)
			}
			// The value is unchanged: the attempt keeps the value and errors
			// it was asked to patch.
			first := res.Attempts[0]
			if string(a.Value) != string(first.Value) || !reflect.DeepEqual(a.Errors, first.Errors) {
				t.Errorf("attempt 2: value %s errors %v; want attempt 1's %s %v", a.Value, a.Errors, first.Value, first.Errors)
			}
			wantClass := first.Class
			if tc.reply.finish == fixpoint.FinishLength {
				wantClass = fixpoint.OutcomeTruncated
			}
			if a.Class != wantClass {
				t.Errorf("attempt 2 class %q, want %q", a.Class, wantClass)
			}
			third := reqs[2]
			if third.System != reqs[0].System || len(third.Messages) != 1 || third.Messages[0].Role != fixpoint.RoleUser {
				t.Fatalf("re-ask messages %+v, want one user turn after the same system prompt", third.Messages)
			}
			if want := wantReask(tc.reason); third.Messages[0].Content != want {
				t.Errorf("re-ask:\n%s\nwant:\n%s", third.Messages[0].Content, want)
			}
			if strings.Contains(third.Messages[0].Content, "JSON Patch") {
				t.Errorf("the re-ask says JSON Patch: the simulator would answer it with a patch")
			}
			if res.Attempts[2].PatchOutcome != "" || !res.Attempts[2].Valid || string(res.Value) != goodValue {
				t.Errorf("attempt 3 (full value): outcome %q valid %v value %s", res.Attempts[2].PatchOutcome, res.Attempts[2].Valid, res.Value)
			}
		})
	}
}

// A reply with no value to patch (syntax, truncated, refusal) gets the
// repair strategy's request, as that strategy would send it; a patch on
// such a reply is never applied.
func TestPatchAfterNoValue(t *testing.T) {
	t.Parallel()
	for _, first := range []scripted{
		{text: "Sure! The customer is Ada."},
		{text: `{"customer":{"name":"Ada`, finish: fixpoint.FinishLength},
		{text: "I can't help with that.", finish: fixpoint.FinishRefusal},
	} {
		reqs, res := run(t, patchJob(t, fixpoint.Limits{MaxAttempts: 2}), []scripted{first, {text: goodPatch}})
		repairReqs, repairRes := run(t, patchJob(t, fixpoint.Limits{MaxAttempts: 2, Strategy: fixpoint.StrategyRepair}), []scripted{first, {text: goodPatch}})
		if !reflect.DeepEqual(reqs[1], repairReqs[1]) {
			t.Errorf("after %q: request\n%+v\nwant the repair strategy's\n%+v", first.text, reqs[1].Messages, repairReqs[1].Messages)
		}
		if strings.Contains(reqs[1].Messages[0].Content, PatchPhrase) {
			t.Errorf("after %q: the request asks for a patch", first.text)
		}
		a := res.Attempts[1]
		if a.PatchOutcome != "" || a.Patch != "" || a.Valid || res.Status != fixpoint.StatusInvalid || a.Class != repairRes.Attempts[1].Class {
			t.Errorf("after %q: a patch reply was taken as a patch: %+v", first.text, a)
		}
	}
}

// Patch attempts count against MaxAttempts like any other: the job ends
// invalid, with the last patched value's errors, after MaxAttempts calls.
func TestPatchBudget(t *testing.T) {
	t.Parallel()
	t.Run("applied", func(t *testing.T) {
		t.Parallel()
		step, err := Start(patchJob(t, fixpoint.Limits{MaxAttempts: 3}), nil, patchConfig())
		if err != nil {
			t.Fatal(err)
		}
		reqs := drive(t, step, []scripted{{text: badReply}, {text: halfPatch}, {text: `[{"op":"add","path":"/rush","value":true}]`}})
		res := step.Result()
		if len(reqs) != 3 || res.Calls != 3 || len(res.Attempts) != 3 || res.Status != fixpoint.StatusInvalid {
			t.Fatalf("%d calls, %d attempts, status %s; want 3, 3, invalid", len(reqs), len(res.Attempts), res.Status)
		}
		last := res.Attempts[2]
		if last.PatchOutcome != fixpoint.PatchApplied || last.Feedback != "" || len(last.Errors) != 1 || last.Errors[0].Path != "/lines/0/qty" {
			t.Errorf("last attempt: outcome %q feedback %q errors %v", last.PatchOutcome, last.Feedback, last.Errors)
		}
		if res.Class != string(fixpoint.ClassSemantic) || res.Error != badErrors[1] || res.Value != nil {
			t.Errorf("result class %q error %q value %s", res.Class, res.Error, res.Value)
		}
		if act := step.Next(); !act.Done() {
			t.Errorf("Next after the budget: %+v, want done", act)
		}
	})
	t.Run("fallbacks", func(t *testing.T) {
		t.Parallel()
		_, res := run(t, patchJob(t, fixpoint.Limits{MaxAttempts: 4}), []scripted{{text: badReply}, {text: "no patch"}, {text: badReply}, {text: "[]"}})
		if res.Calls != 4 || res.Status != fixpoint.StatusInvalid {
			t.Fatalf("%d calls, status %s; want 4, invalid", res.Calls, res.Status)
		}
		if got := []fixpoint.PatchOutcome{res.Attempts[1].PatchOutcome, res.Attempts[2].PatchOutcome, res.Attempts[3].PatchOutcome}; !reflect.DeepEqual(got,
			[]fixpoint.PatchOutcome{fixpoint.PatchParseError, "", fixpoint.PatchApplied}) {
			t.Errorf("outcomes %q", got)
		}
	})
}

// ledgerResult is what the ledger gives back of a result (see
// pipeline.resultFromLedger): the attempts' stored columns only, no value,
// repairs, request or patch fields, through JSON.
func ledgerResult(t *testing.T, res *fixpoint.Result, n int) *fixpoint.Result {
	t.Helper()
	out := &fixpoint.Result{JobID: res.JobID, Status: fixpoint.StatusInvalid, StartedAt: res.StartedAt}
	for _, a := range res.Attempts[:n] {
		out.Attempts = append(out.Attempts, fixpoint.Attempt{No: a.No, RequestHash: a.RequestHash, Raw: a.Raw, Source: a.Source,
			Errors: a.Errors, Class: a.Class, Valid: a.Valid, RepairedLocally: a.RepairedLocally, FinishReason: a.FinishReason,
			Latency: a.Latency, TokensIn: a.TokensIn, TokensOut: a.TokensOut, TokensCached: a.TokensCached,
			TokensCacheWrite: a.TokensCacheWrite, PriceBasis: a.PriceBasis, CostUSD: a.CostUSD, ProviderStatus: a.ProviderStatus,
			ProviderError: a.ProviderError, ProviderClass: a.ProviderClass, Model: a.Model, RequestID: a.RequestID,
			StartedAt: a.StartedAt, Feedback: a.Feedback})
		out.Calls++
		out.TokensIn += a.TokensIn
		out.TokensOut += a.TokensOut
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back fixpoint.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// A step rebuilt from the ledger's record of the attempts so far asks what
// the step that ran straight through asked next, and records the same
// attempt from the same reply: patch requests, patched values, re-asks,
// and a provider failure in between.
func TestPatchRebuild(t *testing.T) {
	t.Parallel()
	script := []scripted{
		{text: badReply},
		{err: &fixpoint.ProviderError{Class: fixpoint.ClassServer, Status: 503, Message: "busy"}},
		{text: halfPatch},
		{text: `[{"op":"replace","path":"/customer/name","value":"A. Lovelace"}]`}, // out of scope
		{text: `{"customer":{"name":"Ada Lovelace","tier":"pro"},"lines":[{"sku":"abc-1000","qty":3}],"rush":false}`},
		{text: `[{"op":"replace","path":"/lines/0/sku","value":"ABC-1000"}]`},
	}
	job := patchJob(t, fixpoint.Limits{MaxAttempts: 6})
	step, err := Start(job, nil, patchConfig())
	if err != nil {
		t.Fatal(err)
	}
	reqs := drive(t, step, script)
	want := step.Result()
	if want.Status != fixpoint.StatusValid || len(want.Attempts) != len(script) {
		t.Fatalf("straight run: status %s, %d attempts; want valid, %d", want.Status, len(want.Attempts), len(script))
	}
	outcomes := []fixpoint.PatchOutcome{"", "", fixpoint.PatchApplied, fixpoint.PatchOutOfScope, "", fixpoint.PatchApplied}
	for i, a := range want.Attempts {
		if a.PatchOutcome != outcomes[i] {
			t.Fatalf("straight run: attempt %d outcome %q, want %q", i+1, a.PatchOutcome, outcomes[i])
		}
	}
	for n := 1; n < len(script); n++ {
		prev := ledgerResult(t, want, n)
		rebuilt, err := Start(job, prev, patchConfig())
		if err != nil {
			t.Fatal(err)
		}
		act := rebuilt.Next()
		if act.Request == nil || !reflect.DeepEqual(act.Request, reqs[n]) {
			t.Fatalf("rebuilt after %d attempts: request\n%+v\nwant\n%+v", n, act.Request, reqs[n])
		}
		resp, err := respond(script[n])
		got, _ := rebuilt.Feed(resp, err, patchClock)
		w := want.Attempts[n]
		if got.RequestHash != w.RequestHash || string(got.Value) != string(w.Value) || got.Valid != w.Valid || got.Class != w.Class ||
			!reflect.DeepEqual(got.Errors, w.Errors) || got.Feedback != w.Feedback || got.PatchOutcome != w.PatchOutcome || got.Patch != w.Patch {
			t.Errorf("rebuilt after %d attempts, attempt %d:\n%+v\nwant\n%+v", n, n+1, *got, w)
		}
	}
}

// The strategy is accepted where strategies are validated; it needs mode
// prompt, and Start refuses it in the other modes.
func TestPatchStrategyValidation(t *testing.T) {
	t.Parallel()
	lim := fixpoint.Limits{Strategy: fixpoint.StrategyPatch}.WithDefaults()
	if err := lim.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := (fixpoint.Limits{Strategy: "patches"}).WithDefaults().Validate(); !errors.Is(err, fixpoint.ErrBadJob) {
		t.Errorf("an unknown strategy: %v, want ErrBadJob", err)
	}
	for _, mode := range []fixpoint.Mode{"", fixpoint.ModePrompt} {
		if err := lim.ValidateMode(mode); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	for _, mode := range []fixpoint.Mode{fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
		if err := lim.ValidateMode(mode); !errors.Is(err, fixpoint.ErrBadJob) {
			t.Errorf("mode %q: %v, want ErrBadJob", mode, err)
		}
		job := patchJob(t, fixpoint.Limits{})
		job.Mode = mode
		if _, err := Start(job, nil, patchConfig()); !errors.Is(err, fixpoint.ErrBadJob) {
			t.Errorf("Start in mode %q: %v, want ErrBadJob", mode, err)
		}
		for _, s := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
			if err := (fixpoint.Limits{Strategy: s}).ValidateMode(mode); err != nil {
				t.Errorf("strategy %s in mode %q: %v", s, mode, err)
			}
		}
	}
}

// The scope rule: a location is in scope when it is an error's pointer or
// below it (a required error's pointer is where the property goes); an
// error on the root puts everything in scope.
func TestPatchScope(t *testing.T) {
	t.Parallel()
	errs := []fixpoint.ValidationError{{Path: "/customer/tier", Keyword: "enum"}, {Path: "/rush", Keyword: "required"}, {Path: "/lines", Keyword: "minItems"},
		{Path: "/a~1b", Keyword: "type"}}
	for _, tc := range []struct {
		patch string
		ok    bool
		loc   string
	}{
		{`[{"op":"replace","path":"/customer/tier","value":"pro"}]`, true, ""},
		{`[{"op":"add","path":"/rush","value":true}]`, true, ""},
		{`[{"op":"add","path":"/lines/-","value":{}}]`, true, ""},
		{`[{"op":"replace","path":"/lines/0/qty","value":1}]`, true, ""},
		{`[{"op":"replace","path":"/a~1b","value":1}]`, true, ""},
		{`[{"op":"copy","from":"/customer/tier","path":"/rush"}]`, true, ""},
		{`[{"op":"replace","path":"/customer","value":{}}]`, false, "/customer"},
		{`[{"op":"replace","path":"/customer/tiers","value":"pro"}]`, false, "/customer/tiers"},
		{`[{"op":"replace","path":"/rushed","value":true}]`, false, "/rushed"},
		{`[{"op":"replace","path":"","value":{}}]`, false, "/"},
		{`[{"op":"copy","from":"/customer/name","path":"/rush"}]`, false, "/customer/name"},
		{`[{"op":"test","path":"/customer/name","value":"x"}]`, false, "/customer/name"},
		{`[{"op":"replace","path":"/a","value":1}]`, false, "/a"},
	} {
		p, err := decodePatch([]byte(tc.patch))
		if err != nil {
			t.Fatalf("%s: %v", tc.patch, err)
		}
		loc, ok := inScope(p, errs)
		if ok != tc.ok || loc != tc.loc {
			t.Errorf("%s: in scope %v at %q, want %v at %q", tc.patch, ok, loc, tc.ok, tc.loc)
		}
		rooted := append([]fixpoint.ValidationError{{Path: "", Keyword: "type"}}, errs...)
		if _, ok := inScope(p, rooted); !ok {
			t.Errorf("%s: out of scope with an error on the root", tc.patch)
		}
	}
}

// The other strategies send what they always sent: the conversation
// strategy the failed reply and the feedback as two new turns, the repair
// strategy one fresh turn; their attempts record no patch.
func TestPatchLeavesOtherStrategies(t *testing.T) {
	t.Parallel()
	fb := "Your reply did not match the JSON Schema. Fix every error below and reply with the corrected JSON value only:\n" +
		"1. " + badErrors[0] + "\n2. " + badErrors[1] + "\n3. " + badErrors[2]
	for _, tc := range []struct {
		strategy fixpoint.Strategy
		want     []fixpoint.Message
	}{
		{fixpoint.StrategyConversation, []fixpoint.Message{{Role: fixpoint.RoleUser, Content: patchTask}, {Role: fixpoint.RoleAssistant, Content: badReply}, {Role: fixpoint.RoleUser, Content: fb}}},
		{fixpoint.StrategyRepair, []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "<task>\n" + patchTask + "\n</task>\n\nYour previous reply to this task was not accepted:\n" +
			"<previous-reply>\n" + badReply + "\n</previous-reply>\n\n" + fb}}},
	} {
		reqs, res := run(t, patchJob(t, fixpoint.Limits{Strategy: tc.strategy}), []scripted{{text: badReply}, {text: goodPatch}, {text: goodPatch}})
		if !reflect.DeepEqual(reqs[1].Messages, tc.want) {
			t.Errorf("%s: second request\n%+v\nwant\n%+v", tc.strategy, reqs[1].Messages, tc.want)
		}
		if res.Attempts[0].Feedback != fb {
			t.Errorf("%s: feedback %q", tc.strategy, res.Attempts[0].Feedback)
		}
		for _, a := range res.Attempts {
			if a.PatchOutcome != "" || a.Patch != "" || a.Class != res.Attempts[0].Class {
				t.Errorf("%s: attempt %d took a patch: %+v", tc.strategy, a.No, a)
			}
		}
	}
}

// The request hashes of the other strategies, pinned from the step before
// the patch strategy existed (the same script in each format: a value with
// errors, an array, no JSON). A deliberate change of the system prompt
// (see TestSystemPromptGolden) changes them too.
func TestPatchLeavesOtherStrategiesHashes(t *testing.T) {
	t.Parallel()
	want := map[fixpoint.FeedbackFormat]map[fixpoint.Strategy][]string{
		fixpoint.FeedbackText: {
			fixpoint.StrategyConversation: {"2a0d80f6fd9801886d0208d38146a7e55347544c25230879ab3d03bba24c40f4", "55fd136d8ceb3e7d09031c04a7378c8ce4bc5b0c05d7510bc93333b37f520763", "9b73ce4c146b0a1827bcd9b3a3ea1617bf01311bf3485cb41daf1ac418f2880f"},
			fixpoint.StrategyRepair:       {"2a0d80f6fd9801886d0208d38146a7e55347544c25230879ab3d03bba24c40f4", "781f94102f8b9c5a969ce01784fe2e24a3f08ca11669c977da7f788d4ab7e31b", "6f10534a11e958b3e449c6f78edf6bfaf5a6cfe60049acfc579739e99ac07630"},
		},
		fixpoint.FeedbackXML: {
			fixpoint.StrategyConversation: {"2a0d80f6fd9801886d0208d38146a7e55347544c25230879ab3d03bba24c40f4", "dcd343cb369ca067adc11ce826e19b1ea647633b903e2bf50186f462d192863f", "efcab3503723b864400e6e6719eca3c9b0d89fd83098e59ad9b8a31d11816817"},
			fixpoint.StrategyRepair:       {"2a0d80f6fd9801886d0208d38146a7e55347544c25230879ab3d03bba24c40f4", "df01670483efabd065732be6b5fb0dad6b974231ee1f9232c1a7c93ade5e332a", "3bd63045b51fc59beeb07f5cc4ec5c6001407fff0c37f259886d137572eb4dd5"},
		},
	}
	for format, byStrategy := range want {
		for strategy, hashes := range byStrategy {
			_, res := run(t, patchJob(t, fixpoint.Limits{Strategy: strategy, Feedback: format}), []scripted{{text: badReply}, {text: goodPatch}, {text: "no json"}})
			var got []string
			for _, a := range res.Attempts {
				got = append(got, a.RequestHash)
			}
			if !reflect.DeepEqual(got, hashes) {
				t.Errorf("%s, %s: request hashes\n%q\nwant\n%q", format, strategy, got, hashes)
			}
		}
	}
}

// A reply the provider's content filter stopped is not accepted even when
// what is left validates (it was stored valid): it counts as a refusal.
func TestContentFilteredReplyNotAccepted(t *testing.T) {
	t.Parallel()
	_, res := run(t, patchJob(t, fixpoint.Limits{MaxAttempts: 2, Strategy: fixpoint.StrategyRepair}), []scripted{
		{text: goodValue, finish: fixpoint.FinishContentFilter}, {text: goodValue},
	})
	if a := res.Attempts[0]; a.Valid || a.Class != fixpoint.OutcomeRefusal {
		t.Errorf("filtered reply: valid %v, class %q; want a refusal", a.Valid, a.Class)
	}
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 2 {
		t.Errorf("result %s after %d attempts; want valid on the second", res.Status, len(res.Attempts))
	}
}

// Feedback lists at most FeedbackErrorsMax errors and counts the rest by
// keyword, in both formats: 3,000 properties the schema does not allow
// made a 134 KB message, paid for on every repair.
func TestFeedbackCapsTheErrorsListed(t *testing.T) {
	t.Parallel()
	var errs []fixpoint.ValidationError
	for i := range 3000 {
		errs = append(errs, fixpoint.ValidationError{Path: fmt.Sprintf("/p%d", i), Keyword: "additionalProperties", Message: fmt.Sprintf("/p%d: property not allowed", i)})
	}
	errs = append(errs, fixpoint.ValidationError{Path: "/n", Keyword: "type", Message: "/n: want an integer"})
	a := &fixpoint.Attempt{Errors: errs, Class: string(fixpoint.ClassShape)}
	for _, format := range []fixpoint.FeedbackFormat{fixpoint.FeedbackText, fixpoint.FeedbackXML} {
		fb := feedback(format, a, false)
		// The type error, the only one of its kind, is listed too: the
		// rest counted are of a kind the model was shown.
		if len(fb) > 8<<10 || !strings.Contains(fb, "/p48:") || strings.Contains(fb, "/p49:") || !strings.Contains(fb, "/n: want an integer") ||
			!strings.Contains(fb, "2951") || !strings.Contains(fb, "additionalProperties 2951") {
			t.Errorf("%s feedback (%d bytes) does not list 50 errors, one of each kind, and count the other 2951 by keyword:\n%.600s", format, len(fb), fb)
		}
	}
}

// When local fixes were made before the errors were found, the feedback
// says how the reply was read: the errors' pointers are in the value as
// read (/customer_name, not the customerName the model wrote), and an
// error a fix revealed (7 over the maximum) is about "7" read as 7.
func TestFeedbackSaysHowTheReplyWasRead(t *testing.T) {
	t.Parallel()
	const schemaText = `{"type":"object","properties":{"customer_name":{"type":"object","properties":{"first":{"type":"string"}},"required":["first"]},"n":{"type":"integer","maximum":5}},"required":["customer_name","n"],"additionalProperties":false}`
	schema, err := validate.Compile([]byte(schemaText))
	if err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
		job := &Job{ID: "j", Prompt: "task", Schema: schema, SchemaRaw: []byte(schemaText), Model: "m",
			Limits: fixpoint.Limits{MaxAttempts: 2, Strategy: strategy, Coerce: fixpoint.CoerceSafe}}
		reqs, _ := run(t, job, []scripted{{text: `{"customerName": {"first": 5}, "n": "7"}`}, {text: `{"customer_name": {"first": "A"}, "n": 5}`}})
		last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
		for _, want := range []string{`the key "customerName" was read as "customer_name" (/customer_name)`, `/n: "7" was read as 7`, "/customer_name/first"} {
			if !strings.Contains(last, want) {
				t.Errorf("%s: feedback lacks %q:\n%s", strategy, want, last)
			}
		}
	}
}

// A failed call whose bodies were billed (they could not be decoded) is
// recorded with the tokens billed and their cost, not 0 and $0.
func TestFailedCallKeepsWhatWasBilled(t *testing.T) {
	t.Parallel()
	job := patchJob(t, fixpoint.Limits{MaxAttempts: 2, Strategy: fixpoint.StrategyRepair})
	job.Model = "gpt-4o-mini"
	billed := &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Status: 200, Message: "decode", Billed: fixpoint.Usage{InputTokens: 1000, OutputTokens: 200}}
	step, err := Start(job, nil, Config{Prices: DefaultPrices(), NowFunc: func() time.Time { return patchClock }})
	if err != nil {
		t.Fatal(err)
	}
	act := step.Next()
	if act.Request == nil {
		t.Fatalf("no request: %+v", act)
	}
	a, _ := step.Feed(nil, billed, patchClock)
	if a.TokensIn != 1000 || a.TokensOut != 200 || a.CostUSD <= 0 || step.Result().TokensIn != 1000 {
		t.Errorf("attempt %+v (result tokens in %d); want the billed tokens and their cost", a, step.Result().TokensIn)
	}
}

// An attempt starts when its request went out (Response.SentAt), not when
// the driver began waiting for the lane: started_at + latency is when the
// reply came. A response without SentAt (a provider batch's) keeps the
// driver's time.
func TestAttemptStartsWhenTheRequestWentOut(t *testing.T) {
	t.Parallel()
	step, err := Start(patchJob(t, fixpoint.Limits{}), nil, patchConfig())
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	resp, _ := respond(scripted{text: badReply})
	resp.SentAt, resp.Latency = patchClock.Add(3*time.Second), 40*time.Millisecond
	a, _ := step.Feed(resp, nil, patchClock)
	if !a.StartedAt.Equal(patchClock.Add(3*time.Second)) || a.Latency != 40*time.Millisecond {
		t.Errorf("attempt 1 started %v (latency %v); want the response's SentAt, 3s after the driver's time", a.StartedAt.Sub(patchClock), a.Latency)
	}
	resp, _ = respond(scripted{text: goodValue})
	a, _ = step.Feed(resp, nil, patchClock)
	if !a.StartedAt.Equal(patchClock) {
		t.Errorf("attempt 2 (no SentAt) started %v; want the driver's time", a.StartedAt)
	}
}

// Arrays in the prose around a patch that are not operations (the errors
// fixed, a citation, the resulting lines) are not a second patch: the
// patch applies (they made it a parse error and cost a full re-ask). An
// array before it that is not a patch does not stand in for it either.
func TestPatchAmongOtherArrays(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		goodPatch + "\n\nErrors fixed: [\"/customer/tier\", \"/lines/0/qty\", \"/rush\"]\n(see RFC 6902 [1])",
		"The tier [gold] was wrong. Patch: " + goodPatch + "\nThe resulting lines are [{\"sku\":\"ABC-1000\",\"qty\":3}]",
	} {
		_, res := run(t, patchJob(t, fixpoint.Limits{}), []scripted{{text: badReply}, {text: reply}})
		if a := res.Attempts[len(res.Attempts)-1]; res.Status != fixpoint.StatusValid || a.PatchOutcome != fixpoint.PatchApplied || a.Patch != goodPatch {
			t.Errorf("%q: status %s, outcome %q, patch %s; want the patch applied", reply, res.Status, a.PatchOutcome, a.Patch)
		}
	}
}

// A refusal the provider gives apart from an empty reply (OpenAI's
// message.refusal) is recorded as what it is: its error said "no JSON
// value: reply is empty", and error_paths counted it with syntax errors.
func TestRefusalApartFromTheReply(t *testing.T) {
	t.Parallel()
	step, err := Start(patchJob(t, fixpoint.Limits{MaxAttempts: 2, Strategy: fixpoint.StrategyRepair}), nil, patchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if act := step.Next(); act.Request == nil {
		t.Fatalf("first action %+v, want a request", act)
	}
	const refusal = "I'm sorry, but I can't help with that."
	a, _ := step.Feed(&fixpoint.Response{Refusal: refusal, FinishReason: fixpoint.FinishRefusal}, nil, patchClock)
	if a.Class != fixpoint.OutcomeRefusal || a.Raw != refusal {
		t.Fatalf("attempt class %q raw %q; want a refusal keeping its text", a.Class, a.Raw)
	}
	if len(a.Errors) != 1 || a.Errors[0].Keyword != "refusal" || !strings.Contains(a.Errors[0].Message, `the model refused: "I'm sorry`) {
		t.Errorf("errors %+v; want one refusal error quoting it", a.Errors)
	}
}
