package repair_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestGroundedMergeFromLedgerRows: a job continued from its attempts as
// the ledger keeps them (no values, no grades) merges as the machine that
// fed the chunks did: the grades are taken again from the chunks' values,
// so the repair it asks for holds the grounded value.
func TestGroundedMergeFromLedgerRows(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: inventedCountry[0], 1: `{"party": "Acme GmbH"}`, 2: inventedCountry[2]}
	job := agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) {
		j.Limits.MaxAttempts = 1
		j.Evidence, j.Source, j.Exempt = fixpoint.EvidenceCheck, evidence.New(j.Document), evidence.Exempt(j.SchemaRaw)
	})
	m := startDoc(t, job, nil)
	reply := byChunk(first, nil, `{}`)
	var repairReq *fixpoint.Request
	act := m.Next()
	for queue := act.Requests; len(queue) > 0 && repairReq == nil; {
		req := queue[0]
		queue = queue[1:]
		if partOf(req) < 0 {
			repairReq = req
			continue
		}
		resp, err := reply(req)
		_, act = m.Feed(req, resp, err, time.Now())
		queue = append(queue, act.Requests...)
	}
	rows := slices.Clone(m.Result().Attempts)
	if repairReq == nil || len(rows) != 4 || rows[3].Step != fixpoint.StepMerge {
		t.Fatalf("%d attempts and repair request %v, want 3 chunks, the merge (no amount) and its repair", len(rows), repairReq)
	}
	if !strings.Contains(string(rows[3].Value), `"country":"UK"`) || len(rows[3].Conflicts) != 1 || rows[3].Conflicts[0].By != fixpoint.ConflictByGrounding {
		t.Fatalf("merged %s, conflicts %+v; want UK chosen by grounding", rows[3].Value, rows[3].Conflicts)
	}
	for i := range rows {
		rows[i].Value, rows[i].Evidence = nil, nil // the ledger keeps neither per attempt
	}
	again := startDoc(t, job, &fixpoint.Result{JobID: job.ID, Attempts: rows})
	next := again.Next()
	if len(next.Requests) != 1 {
		t.Fatalf("resumed machine asks for %d requests, want the repair", len(next.Requests))
	}
	got, _ := json.Marshal(next.Requests[0])
	want, _ := json.Marshal(repairReq)
	if string(got) != string(want) {
		t.Errorf("resumed repair request\n%s\nwant\n%s", got, want)
	}
}

// TestInvalidChunkDropsWhatItsEvidenceRefuses: under require, a chunk
// whose replies the schema refused to the end was never graded; what its
// errors leave is graded against its text, and what that refuses goes
// too: an invented root value, and a list item whose invented name went
// (it then lacks its required name). What the chunk read right is merged.
func TestInvalidChunkDropsWhatItsEvidenceRefuses(t *testing.T) {
	t.Parallel()
	first := map[int]string{
		0: `{"party": "Acme GmbH"}`,
		1: `{"amount": 1200}`,
		2: `{"party": "Zorro Holdings", "amount": "twelve", "items": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Invented Co", "country": "Japan"}, {"name": "Acme KK", "country": "Japan"}]}`,
	}
	m := startDoc(t, agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) {
		j.Evidence, j.Source, j.Exempt = fixpoint.EvidenceRequire, evidence.New(j.Document), evidence.Exempt(j.SchemaRaw)
	}), nil)
	drive(t, m, byChunk(first, nil, ""))
	res := m.Result()
	want := `{"amount":1200,"items":[{"country":"UK","name":"Acme Ltd"},{"country":"Japan","name":"Acme KK"}],"party":"Acme GmbH"}`
	if res.Status != fixpoint.StatusValid || string(res.Value) != want {
		t.Errorf("status %s, value %s (%s), want valid %s", res.Status, res.Value, res.Error, want)
	}
}
