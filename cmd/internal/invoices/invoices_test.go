package invoices

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/validate"
)

// The schema compiles and can be satisfied; the dataset is n rows of JSON,
// the same for the same seed, each with 30 to 60 lines of text.
func TestDataset(t *testing.T) {
	s, err := validate.Compile([]byte(Schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Satisfiable(); err != nil {
		t.Fatal(err)
	}
	if Dataset(5, 1) != Dataset(5, 1) || Dataset(5, 1) == Dataset(5, 2) {
		t.Fatal("the dataset is not determined by its seed")
	}
	sc := bufio.NewScanner(strings.NewReader(Dataset(20, 1)))
	sc.Buffer(nil, 1<<20)
	rows := 0
	for sc.Scan() {
		var row struct{ ID, Vendor, Text string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("row %d: %v", rows+1, err)
		}
		if n := strings.Count(row.Text, "\n") - 1; n < 30 || n > 60 {
			t.Errorf("row %s has %d lines, want 30 to 60", row.ID, n)
		}
		rows++
	}
	if rows != 20 {
		t.Fatalf("%d rows, want 20", rows)
	}
}
