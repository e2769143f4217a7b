package repair_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/repair"
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
