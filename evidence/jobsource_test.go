package evidence_test

import (
	"encoding/json"
	"testing"

	"github.com/fixpoint-dev/fixpoint/evidence"
)

// A row job's evidence source is the row's values the prompt holds, as
// the template printed them, never the text the template adds.
func TestJobSource(t *testing.T) {
	t.Parallel()
	row := json.RawMessage(`{"id": 7, "text": "Charged twice for order 1249.99", "customer": {"name": "Dana Cohen", "tier": "gold"}, "unused": "Globex"}`)
	prompt := "Extract the vendor, e.g. \"Acme\".\nTicket 7 from Dana Cohen: Charged twice for order 1249.99"
	for _, tc := range []struct {
		source, want string
	}{
		{"row", "Dana Cohen\n7\nCharged twice for order 1249.99"},
		{"prompt", prompt},
		{"field:text", "Charged twice for order 1249.99"},
		{"field:customer", `{"name":"Dana Cohen","tier":"gold"}`},
	} {
		got, err := evidence.JobSource(row, prompt, tc.source)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.source, got, err, tc.want)
		}
	}
	if _, err := evidence.JobSource(row, prompt, "field:vendor"); err == nil {
		t.Error("field:vendor, which the row lacks: no error")
	}
	if _, err := evidence.JobSource(json.RawMessage(`[1]`), prompt, "row"); err == nil {
		t.Error("a row that is not an object: no error")
	}
}
