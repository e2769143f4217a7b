package tickets

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/template"
)

func TestDatasetIsTheSameForTheSameSeed(t *testing.T) {
	t.Parallel()
	a, b, c := Dataset(50, 1), Dataset(50, 1), Dataset(50, 2)
	if a != b {
		t.Error("two datasets of seed 1 differ")
	}
	if a == c {
		t.Error("seeds 1 and 2 give the same dataset")
	}
	if !strings.HasPrefix(Dataset(60, 1), a) {
		t.Error("a longer dataset does not start with the shorter one")
	}
}

func TestEveryTicketRendersThroughTheTemplate(t *testing.T) {
	t.Parallel()
	if !json.Valid([]byte(Schema)) {
		t.Fatal("Schema is not JSON")
	}
	tmpl := template.Must(template.New("t").Option("missingkey=error").Parse(Template))
	lines := strings.Split(strings.TrimSuffix(Dataset(100, 7), "\n"), "\n")
	if len(lines) != 100 {
		t.Fatalf("got %d lines, want 100", len(lines))
	}
	for i, line := range lines {
		var row map[string]string
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if want := fmt.Sprintf("T%06d", i+1); row["ticket_id"] != want {
			t.Errorf("line %d: ticket_id %q, want %q", i+1, row["ticket_id"], want)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, row); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
	}
}
