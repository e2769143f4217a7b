package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// truthSchema has a rule of each severity.
const truthSchema = `{"type":"object","properties":{"vendor":{"type":"string"},"total":{"type":"number"},"start":{"type":"string"},"end":{"type":"string"}},
	"x-fixpoint-rules":[{"rule":"self.end >= self.start","message":"end before start","path":"/end"},
	                    {"rule":"self.total < 1000.0","message":"a large total","path":"/total","severity":"warn"}]}`

// truthSeed writes batch r1 (source: each row's values) of two jobs whose
// attempts carry what the worker's rules and evidence stage make of their
// values, and returns the ledger's URL and each job's final grades:
//
//	r1:1 valid at #2: #1 breaks the error rule; #2 holds it, warns
//	r1:2 valid at #1, its vendor not in its row
func truthSeed(t *testing.T) (string, map[string][]fixpoint.Grounding) {
	t.Helper()
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	set, err := rules.Compile([]byte(truthSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "r1", Settings: json.RawMessage(`{"evidence":"check","evidence_source":"row"}`)}); err != nil {
		t.Fatal(err)
	}
	rows := []string{`{"text":"Invoice from ACME Corp, total 1.249,99 €, 2027-01-15 to 2027-02-01 🙂"}`, `{"text":"Rechnung von Müller GmbH über 80 € vom 01.01.2027 bis 02.01.2027"}`}
	values := [][]string{
		{`{"vendor":"Acme Corp","total":1249.99,"start":"2027-01-15","end":"2027-01-01"}`, `{"vendor":"Acme Corp","total":1249.99,"start":"2027-01-15","end":"2027-02-01"}`},
		{`{"vendor":"Globex","total":80,"start":"2027-01-01","end":"2027-01-02"}`},
	}
	final := map[string][]fixpoint.Grounding{}
	for i, row := range rows {
		id := fmt.Sprintf("r1:%d", i+1)
		prompt := "Extract the invoice, e.g. {\"vendor\": \"Globex\"}:\n" + strings.TrimSuffix(strings.TrimPrefix(row, `{"text":"`), `"}`)
		if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: id, Batch: "r1", RowNo: i + 1, Prompt: prompt, Model: "m", Metadata: json.RawMessage(row)}}); err != nil {
			t.Fatal(err)
		}
		source, err := evidence.JobSource(json.RawMessage(row), prompt, "row")
		if err != nil {
			t.Fatal(err)
		}
		r := store.Result{JobID: id, Status: fixpoint.StatusValid, Attempts: len(values[i]), Calls: len(values[i])}
		for n, v := range values[i] {
			a, grades := truthAttempt(t, set, source, v)
			a.No = n + 1
			r.AttemptRows = append(r.AttemptRows, a)
			r.Value, final[id] = json.RawMessage(v), grades
		}
		if _, err := st.SaveResults(ctx, []store.Result{r}); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, final
}

// truthAttempt is the attempt the worker records of value: its rules'
// errors (not valid) or its warnings and grades.
func truthAttempt(t *testing.T, set *rules.Set, source, value string) (store.Attempt, []fixpoint.Grounding) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	findings, err := set.Check(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Attempt{Raw: value, Valid: true, StartedAt: time.Now()}
	var warns []fixpoint.ValidationError
	for _, f := range findings {
		if f.Severity == rules.SeverityWarn {
			warns = append(warns, f.ValidationError())
		}
	}
	a.Warnings = mustJSON(t, warns)
	if errs := rules.Errors(findings); errs != nil {
		a.Valid, a.Class, a.Errors = false, string(fixpoint.ClassSemantic), mustJSON(t, errs)
		return a, nil
	}
	grades := evidence.New(source).Align(v, nil).Leaves
	a.Evidence = mustJSON(t, grades)
	return a, grades
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == "null" {
		return nil
	}
	return b
}

// report failures shows the rule failures by rule and the grounding by
// field; its JSON lists them whole.
func TestFailuresRulesAndGrounding(t *testing.T) {
	t.Parallel()
	dsn, _ := truthSeed(t)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"failures", "r1", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("report failures: exit %d, %s", code, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"Rule failures",
		"RULE                    PATH    SEVERITY  FAILURES  JOBS  FINAL",
		"self.total < 1000.0     /total  warn      2         1     1",
		"self.end >= self.start  /end    error     1         1     0",
		"Grounding by field",
		"FIELD    LEAVES  EXACT%  NORMALIZED%  FUZZY%  NONE%",
		"/vendor  2       0.0     50.0         0.0     50.0",
		"/end     2       50.0    50.0         0.0     0.0",
		"/start   2       50.0    50.0         0.0     0.0",
		"/total   2       50.0    50.0         0.0     0.0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report failures lacks %q:\n%s", want, text)
		}
	}
	grounding := text[strings.Index(text, "Grounding by field"):]
	if v, e := strings.Index(grounding, "\n/vendor "), strings.Index(grounding, "\n/end "); v < 0 || e < v {
		t.Errorf("the field with the most values not found is not first:\n%s", text)
	}
	out.Reset()
	if code := run(context.Background(), []string{"failures", "r1", "--format", "json", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("report failures --format json: exit %d, %s", code, errOut.String())
	}
	var got failuresJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantRF := []ruleFailureJSON{
		{Rule: "self.total < 1000.0", Path: "/total", Severity: "warn", Failures: 2, Jobs: 1, FinalJobs: 1},
		{Rule: "self.end >= self.start", Path: "/end", Severity: "error", Failures: 1, Jobs: 1, FinalJobs: 0},
	}
	if !reflect.DeepEqual(got.RuleFailures, wantRF) {
		t.Errorf("rule_failures %+v, want %+v", got.RuleFailures, wantRF)
	}
	if len(got.Grounding) != 4 || got.Grounding[0] != (groundingJSON{Path: "/vendor", Leaves: 2, Normalized: 1, None: 1,
		NormalizedShare: 0.5, NoneShare: 0.5}) {
		t.Errorf("grounding %+v, want 4 fields, /vendor first with a half none", got.Grounding)
	}
}

// report export --evidence writes each job's final grades and spans
// beside its value: a JSONL field, a CSV column.
func TestExportEvidence(t *testing.T) {
	t.Parallel()
	dsn, final := truthSeed(t)
	export := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"export", "r1", "--database-url", dsn}, args...), &out, &errOut); code != 0 {
			t.Fatalf("report export %v: exit %d, %s", args, code, errOut.String())
		}
		return out.String()
	}
	lines := strings.Split(strings.TrimSpace(export("--evidence")), "\n")
	if len(lines) != 2 {
		t.Fatalf("export --evidence: %d lines, want 2", len(lines))
	}
	for _, l := range lines {
		var rec struct {
			ID       string
			Evidence []fixpoint.Grounding
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Evidence) == 0 || !reflect.DeepEqual(rec.Evidence, final[rec.ID]) {
			t.Errorf("job %s evidence %+v, want its final attempt's %+v", rec.ID, rec.Evidence, final[rec.ID])
		}
	}
	if strings.Contains(export(), `"evidence"`) {
		t.Error("export without --evidence has an evidence field")
	}
	recs, err := csv.NewReader(strings.NewReader(export("--evidence", "--format", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if last := len(recs[0]) - 1; len(recs) != 3 || recs[0][last] != "job_evidence" {
		t.Fatalf("csv --evidence: %q; want a header ending in job_evidence and 2 rows", recs)
	}
	for _, rec := range recs[1:] {
		var g []fixpoint.Grounding
		if err := json.Unmarshal([]byte(rec[len(rec)-1]), &g); err != nil || !reflect.DeepEqual(g, final[rec[1]]) {
			t.Errorf("csv job %s job_evidence %q (%v), want %+v", rec[1], rec[len(rec)-1], err, final[rec[1]])
		}
	}
}
