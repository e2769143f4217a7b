package sim

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// TestMergeRequest: a merge request over the document schema is answered
// with its chunk values merged, in part order whatever the order of the
// lines: a scalar the first non-null, list items united by name (case
// and spacing folded) with the fields of both, the rest appended.
func TestMergeRequest(t *testing.T) {
	t.Parallel()
	text := "The values of the parts:\n" + fixpoint.MergeValuesOpen + "\n" +
		`{"part": 2, "start": 90, "end": 200, "value": {"provider": "Acme GmbH", "subsidiaries": [{"name": "Acme KK", "country": "Japan"}]}}` + "\n" +
		`{"part": 1, "start": 0, "end": 100, "value": {"provider": "ACME", "customer": null, "subsidiaries": [{"name": "acme  kk", "ownership_percent": 100}]}}` + "\n" +
		`{"part": 3, "start": 190, "end": 300, "value": {"customer": "Zeta Ltd", "subsidiaries": [{"name": "Acme Ltd", "country": "UK"}]}}` + "\n" +
		fixpoint.MergeValuesClose + "\nMerge them.\n"
	got, _ := askDoc(t, New(Config{Seed: 1}), "job-merge", text)
	want := decodeJSON(t, `{"provider": "ACME", "customer": "Zeta Ltd",
		"subsidiaries": [{"name": "acme  kk", "ownership_percent": 100, "country": "Japan"}, {"name": "Acme Ltd", "country": "UK"}]}`)
	if !jsonEqual(got, want) {
		t.Errorf("merge reply %v, want %v", got, want)
	}
}

// TestMergeValuesNone: a text without the merge markers has no values.
func TestMergeValuesNone(t *testing.T) {
	t.Parallel()
	if v := mergeValues("a chunk of a document"); v != nil {
		t.Errorf("got %v", v)
	}
}
