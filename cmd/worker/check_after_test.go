package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

const ruledSchema = `{"type":"object","required":["vendor","start","end"],
 "properties":{"vendor":{"type":"string"},"start":{"type":"string"},"end":{"type":"string"},
  "note":{"type":"string","x-fixpoint-evidence":false}},
 "x-fixpoint-rules":[{"rule":"self.end >= self.start","message":"the period must not end before it starts","path":"/end"},
  {"rule":"self.vendor.size() > 3","message":"a short vendor name","severity":"warn"}]}`

// worker check runs the schema's rules and, with --source, the evidence
// stage: a broken rule or (under require) an ungrounded value is not
// valid, exit 1, its error naming the path and class; a value that keeps
// both is valid with each leaf's grade and code point span; a rule that
// does not compile is a usage error.
func TestCheckRulesAndEvidence(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", ruledSchema)
	source := cliFile(t, "src.txt", "Facture émise par ACME le 1 janvier 2027, valable jusqu'au 15.01.2027.")
	for _, tc := range []struct {
		name, reply string
		args        []string
		code        int
		class       string
		evidence    map[string]fixpoint.Grade
		warned      bool
	}{
		{"grounded", `{"vendor":"Acme","start":"2027-01-01","end":"2027-01-15","note":"x"}`, []string{"--evidence", "require"}, 0, "",
			map[string]fixpoint.Grade{"/vendor": fixpoint.GradeNormalized, "/start": fixpoint.GradeNormalized, "/end": fixpoint.GradeNormalized}, false},
		{"invented", `{"vendor":"Globex","start":"2027-01-01","end":"2027-01-15"}`, []string{"--evidence", "require"}, 1, "evidence",
			map[string]fixpoint.Grade{"/vendor": fixpoint.GradeNone, "/start": fixpoint.GradeNormalized, "/end": fixpoint.GradeNormalized}, false},
		{"invented, only checked", `{"vendor":"Globex","start":"2027-01-01","end":"2027-01-15"}`, nil, 0, "",
			map[string]fixpoint.Grade{"/vendor": fixpoint.GradeNone, "/start": fixpoint.GradeNormalized, "/end": fixpoint.GradeNormalized}, false},
		{"rule broken", `{"vendor":"Acme","start":"2027-01-15","end":"2027-01-01"}`, nil, 1, "semantic", nil, false},
		{"warn rule", `{"vendor":"Ac","start":"2027-01-01","end":"2027-01-15"}`, []string{"--evidence", "off"}, 0, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			args := append([]string{"check", "--schema", schema, "--source", source, "--json"}, tc.args...)
			code := run(context.Background(), append(args, "-"), strings.NewReader(tc.reply), &out, &errOut)
			var got struct {
				Valid    bool                       `json:"valid"`
				Class    string                     `json:"class"`
				Errors   []fixpoint.ValidationError `json:"errors"`
				Warnings []fixpoint.ValidationError `json:"warnings"`
				Evidence []fixpoint.Grounding       `json:"evidence"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("output %q: %v (stderr %s)", out.String(), err, errOut.String())
			}
			if code != tc.code || got.Class != tc.class {
				t.Errorf("exit %d, class %q; want %d, %q (%s)", code, got.Class, tc.code, tc.class, out.String())
			}
			if tc.class != "" && (len(got.Errors) == 0 || got.Errors[0].Path == "") {
				t.Errorf("errors %+v; want one naming its path", got.Errors)
			}
			if (len(got.Warnings) > 0) != tc.warned {
				t.Errorf("warnings %+v; want some: %v", got.Warnings, tc.warned)
			}
			for _, g := range got.Evidence {
				if tc.evidence[g.Path] != g.Grade || (g.Grade != fixpoint.GradeNone && g.End <= g.Start) {
					t.Errorf("evidence %+v; want %v with spans", got.Evidence, tc.evidence)
				}
			}
			if len(got.Evidence) != len(tc.evidence) {
				t.Errorf("evidence %+v; want %v", got.Evidence, tc.evidence)
			}
		})
	}
	var out, errOut bytes.Buffer
	bad := cliFile(t, "bad.json", `{"type":"object","x-fixpoint-rules":[{"rule":"self.nope(","message":"m"}]}`)
	if code := run(context.Background(), []string{"check", "--schema", bad, "-"}, strings.NewReader("{}"), &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "x-fixpoint-rules/0") {
		t.Errorf("a rule that does not compile: exit %d, stderr %q; want 2 naming the rule", code, errOut.String())
	}
}
