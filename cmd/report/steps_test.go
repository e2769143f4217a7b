package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// stepsFixture makes batch "doc" (strategy parallel: two jobs of chunk,
// merge and repair steps, one graded) and batch "plain" (conversation).
func stepsFixture(t *testing.T) string {
	t.Helper()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for b, strategy := range map[string]string{"doc": "parallel", "plain": "conversation"} {
		settings := json.RawMessage(fmt.Sprintf(`{"limits":{"strategy":%q}}`, strategy))
		if err := st.PutBatch(ctx, store.BatchParams{Name: b, Settings: settings}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("%s-%d", b, i), Batch: b, RowNo: i, SchemaHash: hash,
				Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt", Strategy: strategy, Metadata: json.RawMessage(`{}`)})
		}
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	n := func(v int) *int { return &v }
	chunk := func(no, c, fields int, class string, cost float64) store.Attempt {
		return store.Attempt{No: no, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: c, Start: c * 1000, End: c*1000 + 1100}, Fields: n(fields),
			Class: class, Valid: class == "", TokensIn: 1000, TokensOut: 100, CostUSD: cost}
	}
	conflict := `{"path":"/parties/%d/name","values":["A","B"],"chunks":[[0],[1]],"chosen":"A"}`
	results := []store.Result{
		{JobID: "doc-1", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), AttemptRows: []store.Attempt{
			chunk(1, 0, 6, "", 0.01), chunk(2, 1, 4, "", 0.01),
			{No: 3, Step: "merge", Fields: n(10), Class: "shape", Conflicts: json.RawMessage("[" + fmt.Sprintf(conflict, 0) + "," + fmt.Sprintf(conflict, 1) + "]")},
			{No: 4, Step: "repair", Valid: true, TokensIn: 500, TokensOut: 50, CostUSD: 0.005,
				Evidence: json.RawMessage(`[{"path":"/a","grade":"exact","start":0,"end":1},{"path":"/b","grade":"none","start":0,"end":0}]`)},
		}},
		{JobID: "doc-2", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), AttemptRows: []store.Attempt{
			chunk(1, 0, 0, "", 0.01), chunk(2, 1, 2, "semantic", 0.01),
			{No: 3, Step: "merge", Fields: n(2), Valid: true},
		}},
		{JobID: "plain-1", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), AttemptRows: []store.Attempt{{No: 1, Valid: true, Raw: "{}"}}},
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func runSteps(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(append([]string{"steps"}, args...), "--database-url", dsn), &out, &errOut); code != 0 {
		t.Fatalf("steps %v: exit %d: %s", args, code, errOut.String())
	}
	return out.String()
}

// report steps prints a document batch's calls by step, fields per chunk,
// merge conflicts and grounding, with figures added up from the ledger.
func TestReportSteps(t *testing.T) {
	t.Parallel()
	dsn := stepsFixture(t)
	got := runSteps(t, dsn, "doc")
	for _, want := range []string{
		"batch doc (strategy parallel): calls by step, every run's\n",
		"chunk   4         75.0    4000       400         0.0400  0           semantic 1\n",
		"merge   2         50.0    0          0           0.0000  0           shape 1\n",
		"repair  1         100.0   500        50          0.0050  0           -\n",
		"CHUNK  CALLS  VALID%  MEAN FIELDS  NONE FOUND\n0      2      100.0   3.0          1\n1      2      50.0    3.0          0\n",
		"merge conflicts: 2, in 1 of 2 merges\n",
		"/parties/*/name  2          1\n",
		"repair  1       2       50.0    0.0          0.0     50.0\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report steps doc lacks %q:\n%s", want, got)
		}
	}

	var data stepsJSON
	js := runSteps(t, dsn, "doc", "--format", "json")
	if err := json.Unmarshal([]byte(js), &data); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(js), &generic); err != nil {
		t.Fatal(err)
	}
	documented(t, string(doc), "steps", generic)
	if !data.DocumentJobs || len(data.Steps) != 3 || data.Steps[0].Step != "chunk" || data.Steps[0].Attempts != 4 ||
		*data.Steps[0].ValidRate != 0.75 || data.Steps[0].Classes["semantic"] != 1 || data.Steps[2].Grounding == nil ||
		data.Steps[2].Grounding.None != 1 || data.Steps[0].Grounding != nil {
		t.Errorf("steps JSON: %+v", data.Steps)
	}
	if len(data.Chunks) != 2 || *data.Chunks[0].MeanFields != 3 || data.Chunks[0].Empty != 1 {
		t.Errorf("chunks JSON: %+v", data.Chunks)
	}
	if c := data.Conflicts; c.Merges != 2 || c.Conflicts != 2 || c.Conflicted != 1 || len(c.Paths) != 1 || c.Paths[0].Path != "/parties/*/name" {
		t.Errorf("conflicts JSON: %+v", c)
	}

	plain := runSteps(t, dsn, "plain")
	if want := "batch plain has no document jobs (strategy conversation): its calls have no steps."; !strings.HasPrefix(plain, want) ||
		strings.Count(plain, "\n") != 1 {
		t.Errorf("report steps plain:\n%s\nwant one line starting %q", plain, want)
	}
	if err := json.Unmarshal([]byte(runSteps(t, dsn, "plain", "--format", "json")), &data); err != nil || data.DocumentJobs || len(data.Steps) != 0 {
		t.Errorf("steps JSON of plain: %+v (%v), want no document jobs and no steps", data, err)
	}
}

func TestReportStepsUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"steps", "--help"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "report steps BATCH") || !strings.Contains(out.String(), "-top") || !strings.Contains(out.String(), "Exit status:") {
		t.Errorf("steps --help: exit %d:\n%s", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"steps", "b", "--top", "0", "--database-url", "postgres://nobody@127.0.0.1:1/none"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "--top 0: want 1 to 1000") {
		t.Errorf("steps --top 0: exit %d, stderr %q; want 2", code, errOut.String())
	}
}

// report export --steps gives each document job its steps, and null to a
// job of another strategy; the CSV's job_steps column comes last.
func TestExportSteps(t *testing.T) {
	t.Parallel()
	dsn := stepsFixture(t)
	export := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(append([]string{"export"}, args...), "--database-url", dsn), &out, &errOut); code != 0 {
			t.Fatalf("export %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	type step struct {
		No        int                 `json:"no"`
		Step      string              `json:"step"`
		Chunk     *fixpoint.ChunkRef  `json:"chunk"`
		Fields    *int                `json:"fields"`
		Class     string              `json:"class"`
		Valid     bool                `json:"valid"`
		Conflicts []fixpoint.Conflict `json:"conflicts"`
	}
	lines := strings.Split(strings.TrimSpace(export("doc", "--steps")), "\n")
	var first struct {
		ID    string `json:"id"`
		Steps []step `json:"steps"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	s := first.Steps
	if first.ID != "doc-1" || len(s) != 4 || s[0].Step != "chunk" || s[0].Chunk == nil || s[0].Chunk.End != 1100 || *s[0].Fields != 6 ||
		s[2].Step != "merge" || s[2].Chunk != nil || s[2].Class != "shape" || len(s[2].Conflicts) != 2 || s[3].Step != "repair" || !s[3].Valid {
		t.Errorf("doc-1 steps: %+v", first)
	}
	if plain := export("plain", "--steps"); !strings.Contains(plain, `"steps":null`) {
		t.Errorf("export plain --steps:\n%s\nwant steps null", plain)
	}
	if without := export("doc"); strings.Contains(without, `"steps"`) {
		t.Errorf("export without --steps has steps:\n%s", without)
	}
	csvOut := export("doc", "--steps", "--format", "csv")
	if header := strings.SplitN(csvOut, "\n", 2)[0]; !strings.HasSuffix(header, ",job_error,job_errors,job_steps") {
		t.Errorf("CSV header %q, want job_steps last", header)
	}
}

// report job lists a document job's steps after its cards, and nothing
// of the kind for a job of another strategy.
func TestReportJobSteps(t *testing.T) {
	t.Parallel()
	dsn := stepsFixture(t)
	job := func(id string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"job", id, "--database-url", dsn}, &out, &errOut); code != 0 {
			t.Fatalf("job %s: exit %d: %s", id, code, errOut.String())
		}
		return out.String()
	}
	want := "steps:\n  1 chunk 0 [0, 1100): valid, 6 fields\n  2 chunk 1 [1000, 2100): valid, 4 fields\n" +
		"  3 merge: shape, 10 fields, 2 conflicts at /parties/0/name /parties/1/name\n  4 repair: valid\n"
	if got := job("doc-1"); !strings.Contains(got, want) {
		t.Errorf("report job doc-1:\n%s\nwant it to hold:\n%s", got, want)
	}
	if got := job("plain-1"); strings.Contains(got, "steps:") {
		t.Errorf("report job plain-1 lists steps:\n%s", got)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"job", "doc-1", "--format", "json", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("job --format json: exit %d: %s", code, errOut.String())
	}
	var data jobJSON
	if err := json.Unmarshal(out.Bytes(), &data); err != nil {
		t.Fatal(err)
	}
	a := data.AttemptList
	if len(a) != 4 || a[0].Step != "chunk" || a[0].Chunk == nil || a[0].Chunk.N != 0 || *a[0].Fields != 6 || a[3].Chunk != nil ||
		!strings.Contains(string(a[2].Conflicts), "/parties/1/name") || string(a[3].ToolCalls) != "[]" {
		t.Errorf("job JSON attempts: %+v", a)
	}
}
