package ledgerrow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A result written as rows and read back is the job's result so far: the
// attempts in order with what the step goes on from, and the totals.
func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &fixpoint.Result{JobID: "j1", Status: fixpoint.StatusValid, StartedAt: start, Wall: 3 * time.Second,
		Attempts: []fixpoint.Attempt{
			{No: 1, Raw: `{"a":`, Class: string(fixpoint.ClassSyntax), TokensIn: 10, TokensOut: 5, CostUSD: 0.01, StartedAt: start,
				Errors: []fixpoint.ValidationError{{Path: "/a", Keyword: "type", Class: fixpoint.ClassShape}}},
			{No: 2, Raw: `{"a":1}`, Valid: true, TokensIn: 12, TokensOut: 4, CostUSD: 0.02, StartedAt: start.Add(time.Second)},
		}}
	env := &queue.Envelope{JobID: "j1", Batch: "b", Run: 2, Provider: "openai", Model: "m"}
	row := ledgerrow.Result(res, env, 3)
	if row.JobID != "j1" || row.Run != 2 || row.Deliveries != 3 || row.Attempts != 2 || len(row.AttemptRows) != 2 ||
		row.Job == nil || row.Job.Batch != "b" || !row.FinishedAt.Equal(start.Add(3*time.Second)) {
		t.Fatalf("Result = %+v", row)
	}
	back := ledgerrow.ResultFrom("j1", row.AttemptRows)
	if len(back.Attempts) != 2 || back.Calls != 2 || back.TokensIn != 22 || back.TokensOut != 9 || !back.StartedAt.Equal(start) {
		t.Fatalf("ResultFrom = %+v", back)
	}
	if a := back.Attempts[0]; a.Raw != `{"a":` || a.Class != string(fixpoint.ClassSyntax) || len(a.Errors) != 1 || a.Errors[0].Path != "/a" {
		t.Errorf("first attempt back = %+v", a)
	}
	if ledgerrow.ResultFrom("j1", []store.Attempt{}) != nil {
		t.Error("ResultFrom of no rows: a result, want nil (the job starts afresh)")
	}
}

// The ledger's value of a job that is not valid is its last attempt's
// candidate, so that the export can give it (it was always null); a job
// whose last attempt found none has none, whatever an earlier one found.
func TestResultKeepsTheLastCandidate(t *testing.T) {
	t.Parallel()
	first, last := json.RawMessage(`{"a":"x"}`), json.RawMessage(`{"a":"y"}`)
	for _, tc := range []struct {
		name string
		res  fixpoint.Result
		want string
	}{
		{"invalid", fixpoint.Result{Status: fixpoint.StatusInvalid,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Value: last}}}, `{"a":"y"}`},
		{"over budget after an invalid reply", fixpoint.Result{Status: fixpoint.StatusOverBudget,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}}}, `{"a":"x"}`},
		{"invalid, the last reply unparsed", fixpoint.Result{Status: fixpoint.StatusInvalid,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Raw: "no"}}}, ""},
		{"failed on a provider error", fixpoint.Result{Status: fixpoint.StatusFailed,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Class: fixpoint.OutcomeProvider}}}, ""},
		{"valid", fixpoint.Result{Status: fixpoint.StatusValid, Value: json.RawMessage(`{"a":1}`),
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Value: json.RawMessage(`{"a":1}`), Valid: true}}}, `{"a":1}`},
		{"no attempt", fixpoint.Result{Status: fixpoint.StatusFailed}, ""},
	} {
		tc.res.JobID = "j"
		if got := ledgerrow.Result(&tc.res, nil, 1).Value; string(got) != tc.want {
			t.Errorf("%s: value %s, want %q", tc.name, got, tc.want)
		}
	}
}

// A document job's attempts keep their step, chunk, tool calls and merge
// conflicts through the rows and back, and a step's value leaves the
// count of its fields; an attempt of another strategy keeps none of them.
func TestStepsRoundTrip(t *testing.T) {
	t.Parallel()
	conflict := fixpoint.Conflict{Path: "/parties/0/name", Values: []json.RawMessage{json.RawMessage(`"ACME"`), json.RawMessage(`"Acme Ltd"`)},
		Chunks: [][]int{{0, 2}, {1}}, Chosen: json.RawMessage(`"ACME"`)}
	res := &fixpoint.Result{JobID: "d1", Attempts: []fixpoint.Attempt{
		{No: 1, Step: fixpoint.StepChunk, Chunk: &fixpoint.ChunkRef{N: 0, Start: 0, End: 1200}, Valid: true,
			Value: json.RawMessage(`{"name":"ACME","items":[{"sku":"a","qty":2},{"sku":"b","qty":null}],"note":null,"ok":false}`)},
		{No: 2, Step: fixpoint.StepMerge, Valid: true, Value: json.RawMessage(`{}`), Conflicts: []fixpoint.Conflict{conflict}},
		{No: 3, Step: fixpoint.StepAgent, ToolCalls: []fixpoint.ToolCall{{ID: "call_1", Name: "read_chunk", Arguments: `{"n":1`}}},
		{No: 4, Raw: "{}", Valid: true, Value: json.RawMessage(`{"a":1}`)},
	}}
	rows := ledgerrow.Result(res, nil, 1).AttemptRows
	c := rows[0]
	if c.Step != "chunk" || c.Chunk == nil || *c.Chunk != (fixpoint.ChunkRef{N: 0, Start: 0, End: 1200}) || c.Fields == nil || *c.Fields != 5 {
		t.Errorf("chunk row: step %q chunk %v fields %v, want chunk 0 [0, 1200) with 5 fields", c.Step, c.Chunk, c.Fields)
	}
	if m := rows[1]; m.Step != "merge" || m.Fields == nil || *m.Fields != 0 || m.ToolCalls != nil || len(m.Conflicts) == 0 {
		t.Errorf("merge row: %+v, want a merge with 0 fields and its conflicts", m)
	}
	if a := rows[2]; a.Step != "agent" || a.Fields != nil || a.Conflicts != nil {
		t.Errorf("agent row: %+v, want an agent turn with no value (fields nil) and no conflicts", a)
	}
	if o := rows[3]; o.Step != "" || o.Chunk != nil || o.Fields != nil || o.ToolCalls != nil || o.Conflicts != nil {
		t.Errorf("ordinary row: %+v, want no step columns", o)
	}
	back := ledgerrow.ResultFrom("d1", rows).Attempts
	if back[0].Step != fixpoint.StepChunk || back[0].Chunk.End != 1200 {
		t.Errorf("chunk back: %+v", back[0])
	}
	if got := back[1].Conflicts; len(got) != 1 || got[0].Path != conflict.Path || len(got[0].Chunks) != 2 || string(got[0].Chosen) != `"ACME"` {
		t.Errorf("conflicts back: %+v, want %+v", got, conflict)
	}
	if got := back[2].ToolCalls; len(got) != 1 || got[0].ID != "call_1" || got[0].Name != "read_chunk" || got[0].Arguments != `{"n":1` {
		t.Errorf("tool calls back: %+v", got)
	}
	if back[3].Step != "" || back[3].Chunk != nil || back[3].ToolCalls != nil || back[3].Conflicts != nil {
		t.Errorf("ordinary attempt back: %+v, want no step", back[3])
	}
}

func TestCountFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		n    int
		isOK bool
	}{
		{`{"a":1,"b":"x","c":[true,false,null],"d":{"e":null}}`, 4, true},
		{`[]`, 0, true},
		{`null`, 0, true},
		{`"x"`, 1, true},
		{``, 0, false},
		{`{"a":`, 0, false},
	} {
		n, ok := ledgerrow.CountFields(json.RawMessage(tc.v))
		if n != tc.n || ok != tc.isOK {
			t.Errorf("CountFields(%s) = %d, %v; want %d, %v", tc.v, n, ok, tc.n, tc.isOK)
		}
	}
}
