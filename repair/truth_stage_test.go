package repair_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const vendorSchema = `{"type":"object","required":["vendor","amount","category"],"additionalProperties":false,
 "properties":{"vendor":{"type":"string"},"amount":{"type":"number"},"category":{"enum":["billing","other"]},
 "summary":{"type":"string","x-fixpoint-evidence":false}}}`

func vendorJob(t *testing.T, mode fixpoint.EvidenceMode) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(vendorSchema))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeSchema(vendorSchema)
	if err != nil {
		t.Fatal(err)
	}
	return &repair.Job{ID: "v-1", Schema: schema, SchemaRaw: []byte(vendorSchema), Model: "m-test", Prompt: "extract",
		Limits: fixpoint.Limits{MaxAttempts: 3}, Evidence: mode,
		Source: evidence.New("Invoice from Acme Corp: 1.249,99 EUR for the March hosting."), Exempt: evidence.Exempt(doc)}
}

// Under --evidence require a value the source does not ground is not
// valid: its error (class evidence, at the leaf) goes back to the model,
// and the corrected reply is valid with every leaf's grade and span.
// Under check the grades are kept and the value stands.
func TestEvidenceStage(t *testing.T) {
	t.Parallel()
	invented := `{"vendor": "Globex", "amount": 1249.99, "category": "billing", "summary": "A hosting invoice."}`
	grounded := `{"vendor": "Acme Corp", "amount": 1249.99, "category": "billing", "summary": "A hosting invoice."}`

	step, err := repair.Start(vendorJob(t, fixpoint.EvidenceRequire), nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	a, act := step.Feed(replyWith(invented, fixpoint.Usage{InputTokens: 10, OutputTokens: 10}), nil, time.Now())
	if a.Valid || a.Class != string(fixpoint.ClassEvidence) || act.Request == nil {
		t.Fatalf("invented vendor: valid %v, class %q, next %+v; want invalid, class evidence, a repair request", a.Valid, a.Class, act)
	}
	if len(a.Errors) != 1 || a.Errors[0].Path != "/vendor" || !strings.Contains(a.Feedback, `"Globex" does not appear in the source`) {
		t.Errorf("errors %+v, feedback %q; want one at /vendor, fed back", a.Errors, a.Feedback)
	}
	a, act = step.Feed(replyWith(grounded, fixpoint.Usage{InputTokens: 10, OutputTokens: 10}), nil, time.Now())
	if !a.Valid || !act.Done() {
		t.Fatalf("grounded reply: valid %v, errors %+v", a.Valid, a.Errors)
	}
	want := map[string]fixpoint.Grade{"/vendor": fixpoint.GradeExact, "/amount": fixpoint.GradeNormalized}
	if len(a.Evidence) != len(want) {
		t.Fatalf("evidence %+v; want %v (category is an enum, summary exempt)", a.Evidence, want)
	}
	for _, g := range a.Evidence {
		if want[g.Path] != g.Grade || g.End <= g.Start {
			t.Errorf("leaf %s: %s [%d,%d); want %s with a span", g.Path, g.Grade, g.Start, g.End, want[g.Path])
		}
	}

	step, err = repair.Start(vendorJob(t, fixpoint.EvidenceCheck), nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	a, act = step.Feed(replyWith(invented, fixpoint.Usage{InputTokens: 10, OutputTokens: 10}), nil, time.Now())
	if !a.Valid || !act.Done() || len(a.Evidence) != 2 || a.Evidence[1].Path != "/vendor" || a.Evidence[1].Grade != fixpoint.GradeNone {
		t.Errorf("check mode: valid %v, evidence %+v; want valid, /vendor graded none", a.Valid, a.Evidence)
	}
}

func decodeSchema(text string) (any, error) {
	var v any
	err := json.Unmarshal([]byte(text), &v)
	return v, err
}

const periodSchema = `{"type":"object","required":["start","end","total","lines"],
 "properties":{"start":{"type":"string"},"end":{"type":"string"},"total":{"type":"number"},
  "lines":{"type":"array","items":{"type":"object","required":["qty","price"],
   "properties":{"qty":{"type":"integer"},"price":{"type":"number"}}}}},
 "x-fixpoint-rules":[
  {"rule":"self.end >= self.start","message":"end must not be before start","path":"/end"},
  {"rule":"self.lines.map(l, l.qty * l.price).sum() == self.total","message":"the lines must sum to the total","path":"/total"},
  {"rule":"self.total < 1000.0","message":"a total of 1000 or more is unusual","severity":"warn"}]}`

// A rule of severity error that fails makes the value not valid: its
// message goes back to the model (class semantic, at the rule's path);
// one of severity warn is kept on the attempt and does not.
func TestRulesStage(t *testing.T) {
	t.Parallel()
	schema, err := validate.Compile([]byte(periodSchema))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile([]byte(periodSchema))
	if err != nil {
		t.Fatal(err)
	}
	job := &repair.Job{ID: "p-1", Schema: schema, SchemaRaw: []byte(periodSchema), Model: "m-test", Prompt: "extract",
		Limits: fixpoint.Limits{MaxAttempts: 3}, Rules: set}
	step, err := repair.Start(job, nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	wrong := `{"start":"2027-02-01","end":"2027-01-15","total":1500,"lines":[{"qty":2,"price":500}]}`
	a, act := step.Feed(replyWith(wrong, fixpoint.Usage{InputTokens: 10, OutputTokens: 10}), nil, time.Now())
	if a.Valid || a.Class != string(fixpoint.ClassSemantic) || act.Request == nil {
		t.Fatalf("rules broken: valid %v, class %q; want invalid, semantic, a repair request", a.Valid, a.Class)
	}
	paths := map[string]bool{}
	for _, e := range a.Errors {
		paths[e.Path] = true
	}
	if !paths["/end"] || !paths["/total"] || !strings.Contains(a.Feedback, "end must not be before start") || !strings.Contains(a.Feedback, "the lines must sum to the total") {
		t.Errorf("errors %+v, feedback %q; want both rules, at /end and /total, fed back", a.Errors, a.Feedback)
	}
	right := `{"start":"2027-01-01","end":"2027-01-15","total":1000,"lines":[{"qty":2,"price":500}]}`
	a, act = step.Feed(replyWith(right, fixpoint.Usage{InputTokens: 10, OutputTokens: 10}), nil, time.Now())
	if !a.Valid || !act.Done() {
		t.Fatalf("rules kept: valid %v, errors %+v", a.Valid, a.Errors)
	}
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0].Message, "unusual") {
		t.Errorf("warnings %+v; want the warn rule's", a.Warnings)
	}
}
