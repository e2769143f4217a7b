package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// Reasons that differ only in their numbers are one reason (each spend-cap
// error names its call's own estimate: 248 jobs read as 113 reasons, the
// list cut at 15 without a word), and every row carries how many reasons
// and jobs there are in all.
func TestEndReasonsGroupNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if err := st.PutBatch(ctx, store.BatchParams{Name: "er", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for i := 1; i <= 23; i++ {
		jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("er:%d", i), Batch: "er", RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	var results []store.Result
	for i := 1; i <= 20; i++ {
		results = append(results, store.Result{JobID: fmt.Sprintf("er:%d", i), Status: fixpoint.StatusOverBudget,
			Error: fmt.Sprintf("batch spend cap reached: $%d.%06d spent of $20.000000, and this call may cost up to $1.%03d", i, i*7, i)})
	}
	for i := 21; i <= 23; i++ {
		results = append(results, store.Result{JobID: fmt.Sprintf("er:%d", i), Status: fixpoint.StatusFailed, Error: fmt.Sprintf("reason %c", 'a'+i-21)})
	}
	// A model's version is no amount: two reasons. A reason of 150
	// characters is shown whole (cut at 120, the cap's advice lost its
	// end), one over 200 is cut with a mark.
	results[20].Error = `the batch's cost cap cannot be enforced: this worker has no price for model "claude-sonnet-4-20250514" (give it one with --prices) ` + strings.Repeat("x", 10)
	results[21].Error = `no price for model "gpt-5.1-mini"` + strings.Repeat(" y", 150)
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	got, err := st.EndReasons(ctx, "er", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Status != string(fixpoint.StatusOverBudget) || got[0].Jobs != 20 || got[0].Reasons != 4 || got[0].AllJobs != 23 {
		t.Errorf("EndReasons = %+v; want the 20 cap errors as one reason first, of 4 reasons and 23 jobs in all", got)
	}
	all, err := st.EndReasons(ctx, "er", 10)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	for _, r := range all {
		texts[r.Error] = true
	}
	if !texts[results[20].Error] {
		t.Errorf("reasons %v: want the 150-character one whole", texts)
	}
	if cut := `no price for model "gpt-5.1-mini"` + strings.Repeat(" y", 83) + "…"; !texts[cut] {
		t.Errorf("reasons %v: want the long one cut at 200 characters with …", texts)
	}
}
