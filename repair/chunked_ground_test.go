package repair_test

import (
	"encoding/json"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// inventedCountry: chunk 0 (the parties) invents the country of a
// subsidiary its text never names, chunk 2 (the subsidiaries) gives the
// real one; one chunk each, so the count ties and the earliest chunk
// would win.
var inventedCountry = map[int]string{
	0: `{"party": "Acme GmbH", "items": [{"name": "Acme Ltd", "country": "Germany"}]}`,
	1: `{"party": "Acme GmbH", "amount": 1200}`,
	2: `{"items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "Japan"}]}`,
}

// mergedCountry runs the agreement through parallel with the evidence
// stage in mode and returns the merged value's first item's country and
// the merge attempt's conflicts.
func mergedCountry(t *testing.T, mode fixpoint.EvidenceMode) (string, []fixpoint.Conflict) {
	t.Helper()
	job := agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) {
		if mode != fixpoint.EvidenceOff {
			j.Evidence, j.Source, j.Exempt = mode, evidence.New(j.Document), evidence.Exempt(j.SchemaRaw)
		}
	})
	m := startDoc(t, job, nil)
	drive(t, m, byChunk(inventedCountry, nil, ""))
	res := m.Result()
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 4 || res.Attempts[3].Step != fixpoint.StepMerge {
		t.Fatalf("evidence %s: status %s, %d attempts (%s), want valid, 3 chunks and a merge", mode, res.Status, len(res.Attempts), res.Error)
	}
	var v struct {
		Items []map[string]string `json:"items"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil || len(v.Items) != 2 || v.Items[0]["name"] != "Acme Ltd" {
		t.Fatalf("evidence %s: merged %s, want Acme Ltd once, then Acme KK", mode, res.Value)
	}
	return v.Items[0]["country"], res.Attempts[3].Conflicts
}

// TestMergePrefersGroundedValue: with the evidence stage on, a value its
// chunk grades none (an invention) loses to the value another chunk
// grounds, though an earlier chunk gave it; the conflict keeps both and
// says grounding chose. With the stage off the merge is as before.
func TestMergePrefersGroundedValue(t *testing.T) {
	t.Parallel()
	country, conflicts := mergedCountry(t, fixpoint.EvidenceCheck)
	if country != "UK" {
		t.Errorf("evidence check: country %q, want UK, the value chunk 2 grounds", country)
	}
	if len(conflicts) != 1 {
		t.Fatalf("evidence check: conflicts %+v, want one at /items/0/country", conflicts)
	}
	c := conflicts[0]
	if c.Path != "/items/0/country" || string(c.Chosen) != `"UK"` || c.By != fixpoint.ConflictByGrounding ||
		len(c.Values) != 2 || string(c.Values[0]) != `"Germany"` || c.Chunks[0][0] != 0 || string(c.Values[1]) != `"UK"` || c.Chunks[1][0] != 2 {
		t.Errorf("evidence check: conflict %+v, want UK chosen by grounding over Germany (chunk 0), UK (chunk 2)", c)
	}

	country, conflicts = mergedCountry(t, fixpoint.EvidenceOff)
	if country != "Germany" || len(conflicts) != 1 || conflicts[0].By != "" {
		t.Errorf("evidence off: country %q, conflicts %+v; want Germany, the earliest chunk's, chosen by count", country, conflicts)
	}
}
