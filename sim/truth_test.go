package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
)

// claimSchema has an extractive leaf of each kind the simulator copies
// (a name, a pattern, two dates, an amount), derived ones (an enum, a
// summary marked x-fixpoint-evidence false) and a rule between the dates.
const claimSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["customer", "order_id", "ordered", "delivered", "category", "summary"],
  "properties": {
    "customer": {"type": "string", "minLength": 2},
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
    "ordered": {"type": "string", "format": "date"},
    "delivered": {"type": "string", "format": "date"},
    "amount": {"type": "number", "minimum": 0},
    "category": {"enum": ["refund", "damage", "late"]},
    "summary": {"type": "string", "minLength": 10, "x-fixpoint-evidence": false}
  },
  "x-fixpoint-rules": [
    {"rule": "self.delivered >= self.ordered", "message": "the delivery cannot come before the order", "path": "/delivered"}
  ]
}`

var claimNames = []string{"Hana Sato", "Bruno Silva", "Farah Khan", "Goran Ilic", "Jade Moreau"}

// claimTask is the text of claim i: every other one states an amount.
func claimTask(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	ordered := time.Date(2026, time.Month(1+r.IntN(9)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC)
	delivered := ordered.AddDate(0, 0, 1+r.IntN(20))
	text := fmt.Sprintf("Claim from %s about order ORD-%05d.\nOrdered on %s, delivered on %s.", claimNames[i%len(claimNames)], 10000+i,
		ordered.Format(time.DateOnly), delivered.Format("2 January 2006"))
	if i%2 == 0 {
		text += fmt.Sprintf(" Please refund EUR %d.%02d.", 5+r.IntN(200), r.IntN(100))
	}
	return text
}

func claimRequest(user, task string) map[string]any {
	return map[string]any{
		"model": "gpt-4o",
		"user":  user,
		"messages": []any{
			map[string]any{"role": "system", "content": "Extract the claim.\n" + fixpoint.SchemaMarkerOpen + "\n" + claimSchema + "\n" + fixpoint.SchemaMarkerClose + "\n"},
			map[string]any{"role": "user", "content": task},
		},
	}
}

// claimChecks are the claim schema's rules and evidence exemptions.
func claimChecks(t *testing.T) (*rules.Set, func(string) bool) {
	t.Helper()
	set, err := rules.Compile([]byte(claimSchema))
	if err != nil {
		t.Fatal(err)
	}
	return set, evidence.Exempt(decodeJSON(t, claimSchema))
}

// ruleErrors are the errors of the rules of severity error on v.
func ruleErrors(t *testing.T, set *rules.Set, v any) []fixpoint.ValidationError {
	t.Helper()
	fs, err := set.Check(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return rules.Errors(fs)
}

// A clean model's value is copied from the task: every string and number
// evidence grades is in the task's text, of the kind its schema asks (a
// name, an order id, an ISO date for a date written out, an amount next to
// its currency); an optional leaf the text does not state is left out;
// and the truth keeps the schema's rule.
func TestTruthIsCopiedFromTheTask(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 4, Now: fixedNow})
	sch := compileSchema(t, claimSchema)
	set, exempt := claimChecks(t)
	amounts := map[bool]int{}
	for i := range 120 {
		user, task := fmt.Sprintf("c-%d", i), claimTask(i)
		text, _ := openAIText(t, do(t, s, "/v1/chat/completions", claimRequest(user, task)).Body.Bytes())
		v := decodeJSON(t, text)
		if err := sch.Validate(decodeValue(t, []byte(text))); err != nil {
			t.Fatalf("%s: %s does not validate: %v", user, text, err)
		}
		if errs := ruleErrors(t, set, v); len(errs) > 0 {
			t.Errorf("%s: the truth %s breaks its rule: %v", user, text, errs)
		}
		res := evidence.Align(task, v, exempt)
		for _, l := range res.Leaves {
			if l.Grade == fixpoint.GradeNone {
				t.Errorf("%s: %s is not in the task %q (value %s)", user, l.Path, task, text)
			}
		}
		m := v.(map[string]any)
		_, hasAmount := m["amount"]
		amounts[hasAmount]++
		want := 4
		if hasAmount {
			want++
		}
		if hasAmount && i%2 == 1 || len(res.Leaves) != want || m["ordered"] == m["delivered"] {
			t.Errorf("%s: %d graded leaves in %s; want one for each of customer, order_id, the dates and an amount, and an amount only when the task states one, the two dates each copied", user, len(res.Leaves), text)
		}
		if !strings.Contains(task, m["customer"].(string)) || !strings.Contains(task, m["order_id"].(string)) {
			t.Errorf("%s: customer %q, order %q: not copied from %q", user, m["customer"], m["order_id"], task)
		}
		if truth, _ := s.Truth(user, []byte(claimSchema), task); canon(t, truth) != canon(t, v) {
			t.Fatalf("%s: Truth %s, the clean reply %s", user, canon(t, truth), text)
		}
	}
	if amounts[true] == 0 {
		t.Errorf("no truth has an amount: %v", amounts)
	}
}

// The task text is the task a repair-strategy request repeats, and
// neither a quoted reply nor a schema block in the message counts.
func TestTaskTextOfARepairRequest(t *testing.T) {
	t.Parallel()
	task := claimTask(3)
	wrapped := fixpoint.TaskOpen + "\n" + task + "\n" + fixpoint.TaskClose + "\n\nYour previous reply to this task was not accepted:\n" +
		fixpoint.PreviousReplyOpen + "\n{}\n" + fixpoint.PreviousReplyClose + "\n\nFix it."
	if TaskKey("", wrapped) != TaskKey("", task) || taskText(wrapped) != task {
		t.Errorf("the repair request's task: key %s text %q; want the task's, %s %q", TaskKey("", wrapped), taskText(wrapped), TaskKey("", task), task)
	}
	inline := "Extract.\n" + fixpoint.SchemaMarkerOpen + "\n{\"type\":\"object\"}\n" + fixpoint.SchemaMarkerClose + "\nInvoice from Acme."
	if got := taskText(inline); strings.Contains(got, "object") || !strings.Contains(got, "Invoice from Acme.") {
		t.Errorf("taskText with a schema block = %q; want the text around it", got)
	}
}

// truthFault is one truth fault of a first attempt.
type truthFault struct {
	user, task, text string
	value            any
	faults           []headerFault
}

// truthFaulty returns n first attempts of s that have truth faults.
func truthFaulty(t *testing.T, s *Server, prefix string, n int) []truthFault {
	t.Helper()
	var out []truthFault
	for i := 0; len(out) < n; i++ {
		if i > 50*n {
			t.Fatalf("%d faulty first attempts in %d", len(out), i)
		}
		user, task := fmt.Sprintf("%s-%d", prefix, i), claimTask(i)
		rec := do(t, s, "/v1/chat/completions", claimRequest(user, task))
		text, _ := openAIText(t, rec.Body.Bytes())
		if fs := parseFaultHeader(rec.Header().Get("X-Sim-Faults")); len(fs) > 0 {
			out = append(out, truthFault{user: user, task: task, text: text, value: decodeJSON(t, text), faults: fs})
		}
	}
	return out
}

// Invented values and rule breaks come at their rates and are what they
// say: the value keeps the schema; an invented leaf holds the simulator's
// invention there (Server.Inventions), which the task does not ground; a
// rule break makes the rule fail at the path X-Sim-Faults names; a reply
// without a fault is the truth. The same seed answers the same.
func TestTruthFaultsAreWhatTheySay(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 11, Mix: Mix{Invented: 0.3, RuleBreak: 0.25}, Now: fixedNow}
	s, again := New(cfg), New(cfg)
	sch := compileSchema(t, claimSchema)
	set, _ := claimChecks(t)
	const n = 500
	counts := map[FaultKind]int64{}
	for i := range n {
		user, task := fmt.Sprintf("f-%d", i), claimTask(i)
		rec := do(t, s, "/v1/chat/completions", claimRequest(user, task))
		text, _ := openAIText(t, rec.Body.Bytes())
		if i%50 == 0 {
			if other, _ := openAIText(t, do(t, again, "/v1/chat/completions", claimRequest(user, task)).Body.Bytes()); other != text {
				t.Fatalf("%s: two servers of one seed answered %s and %s", user, text, other)
			}
		}
		if err := sch.Validate(decodeValue(t, []byte(text))); err != nil {
			t.Fatalf("%s: %s does not validate: %v", user, text, err)
		}
		v := decodeJSON(t, text)
		inv, err := s.Inventions(user, []byte(claimSchema), task)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, f := range parseFaultHeader(rec.Header().Get("X-Sim-Faults")) {
			counts[f.kind]++
			got, _ := pointerGet(v, f.ptr)
			switch f.kind {
			case FaultInvented:
				listed[f.ptr] = true
				if !jsonEqual(got, inv[f.ptr]) || evidence.Align(task, got, nil).Summary.None != 1 {
					t.Errorf("%s: invented %s holds %v, the invention there is %v; want it, and not in %q", user, f.ptr, got, inv[f.ptr], task)
				}
			case FaultRuleBreak:
				errs := ruleErrors(t, set, v)
				if len(errs) != 1 || errs[0].Path != f.ptr {
					t.Errorf("%s: rule_break at %s, the rules say %v", user, f.ptr, errs)
				}
			default:
				t.Errorf("%s: fault %s: the mix has truth faults only", user, f.kind)
			}
		}
		for p, x := range inv {
			if got, _ := pointerGet(v, p); jsonEqual(got, x) && !listed[p] {
				t.Errorf("%s: %s holds the invention %v, X-Sim-Faults does not say so", user, p, x)
			}
		}
		if len(listed) == 0 && len(ruleErrors(t, set, v)) == 0 {
			if truth, _ := s.Truth(user, []byte(claimSchema), task); canon(t, truth) != canon(t, v) {
				t.Errorf("%s: no truth fault, but %s is not the truth %s", user, text, canon(t, truth))
			}
		}
	}
	within(t, "invented", counts[FaultInvented], n, 0.3)
	within(t, "rule_break", counts[FaultRuleBreak], n, 0.25)
	if st := s.Stats(); st.Faults[FaultInvented] != counts[FaultInvented] || st.Faults[FaultRuleBreak] != counts[FaultRuleBreak] {
		t.Errorf("Stats.Faults %v, the headers counted %v", st.Faults, counts)
	}
}

// exactTruthFeedback is what the repair step says of a value's truth
// faults: the rules' errors, and the evidence stage's.
func exactTruthFeedback(t *testing.T, task string, v any) []fixpoint.ValidationError {
	t.Helper()
	set, exempt := claimChecks(t)
	errs := ruleErrors(t, set, v)
	return append(errs, evidence.Require(v, evidence.Align(task, v, exempt).Leaves)...)
}

// A correction that names a truth fault (the rule's message and path, the
// evidence stage's "does not appear in the source" at the leaf) fixes it
// with FixProb, in a conversation, a repair-strategy request and a JSON
// Patch; one that names nothing leaves it.
func TestTruthFaultsAreFixedWhenNamed(t *testing.T) {
	t.Parallel()
	mix := Mix{Invented: 0.5, RuleBreak: 0.5}
	fixing := New(Config{Seed: 12, Mix: mix, FixProb: 1, Now: fixedNow})
	stubborn := New(Config{Seed: 12, Mix: mix, FixProb: -1, Now: fixedNow})
	for _, f := range truthFaulty(t, fixing, "fix", 40) {
		truth, _ := fixing.Truth(f.user, []byte(claimSchema), f.task)
		errs := exactTruthFeedback(t, f.task, f.value)
		if len(errs) == 0 {
			t.Fatalf("%s: faults %v, but neither the rules nor evidence find one in %s", f.user, f.faults, f.text)
		}
		var fb strings.Builder
		fb.WriteString("Your reply did not match the JSON Schema. Fix every error below:\n")
		for i, e := range errs {
			fmt.Fprintf(&fb, "%d. %s\n", i+1, e.Message)
		}
		base := claimRequest(f.user, f.task)
		conv := claimRequest(f.user, f.task)
		conv["messages"] = append(conv["messages"].([]any), map[string]any{"role": "assistant", "content": f.text},
			map[string]any{"role": "user", "content": fb.String()})
		repairTurn := claimRequest(f.user, f.task)
		repairTurn["messages"] = []any{base["messages"].([]any)[0], map[string]any{"role": "user", "content": fixpoint.TaskOpen + "\n" + f.task + "\n" +
			fixpoint.TaskClose + "\n\nYour previous reply to this task was not accepted:\n" + fixpoint.PreviousReplyOpen + "\n" + f.text + "\n" +
			fixpoint.PreviousReplyClose + "\n\n" + fb.String()}}
		for name, body := range map[string]map[string]any{"conversation": conv, "repair": repairTurn} {
			rec := do(t, fixing, "/v1/chat/completions", body)
			got, _ := openAIText(t, rec.Body.Bytes())
			if h := rec.Header().Get("X-Sim-Faults"); h != "" || canon(t, decodeJSON(t, got)) != canon(t, truth) {
				t.Errorf("%s, %s: correction of %v gave %s (faults %q), want the truth %s", f.user, name, f.faults, got, h, canon(t, truth))
			}
		}
		rec := do(t, stubborn, "/v1/chat/completions", conv)
		if got := parseFaultHeader(rec.Header().Get("X-Sim-Faults")); len(got) != len(f.faults) {
			t.Errorf("%s: FixProb -1 answered with faults %v, the first attempt had %v", f.user, got, f.faults)
		}
		vague := claimRequest(f.user, f.task)
		vague["messages"] = append(vague["messages"].([]any), map[string]any{"role": "assistant", "content": f.text},
			map[string]any{"role": "user", "content": "Your reply was not valid. Please try again and reply with valid JSON only."})
		if got := parseFaultHeader(do(t, fixing, "/v1/chat/completions", vague).Header().Get("X-Sim-Faults")); len(got) != len(f.faults) {
			t.Errorf("%s: vague feedback answered with faults %v, the first attempt had %v", f.user, got, f.faults)
		}
		text, _ := openAIText(t, do(t, fixing, "/v1/chat/completions", patchRequest(t, base, f.text, f.value, errs, false)).Body.Bytes())
		patched, err := testApply(f.value, patchOf(t, text))
		if err != nil || canon(t, patched) != canon(t, truth) {
			t.Errorf("%s: patch %s of %v gave %v (%v), want the truth %s", f.user, text, f.faults, patched, err, canon(t, truth))
		}
	}
}

// The truth faults of the presets are stated in their descriptions.
func TestPresetsStateTheirTruthFaults(t *testing.T) {
	t.Parallel()
	for _, p := range PresetNames() {
		cfg, _ := Preset(p.Name)
		for k, word := range map[FaultKind]string{FaultRuleBreak: "rule breaks", FaultInvented: "invented values"} {
			rate := cfg.Mix.Prob(k)
			stated := fmt.Sprintf("%g%% %s", rate*100, word)
			switch {
			case rate > 0 && !strings.Contains(p.Description, stated) && !strings.Contains(p.Description, "typical replies"):
				t.Errorf("preset %s: %s at %g, its description %q does not say %q", p.Name, k, rate, p.Description, stated)
			case rate == 0 && p.Name != "clean":
				t.Errorf("preset %s draws no %s", p.Name, k)
			}
		}
	}
}
