package merge

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fixpoint-dev/fixpoint/validate"
)

// BenchmarkValues merges the values of 15 chunks of a document: a few
// scalars each (some disagreeing) and 500 keyed list items of 4 fields,
// 37 a chunk, the 4 at each boundary repeated by the overlap.
func BenchmarkValues(b *testing.B) {
	schema, err := validate.Compile([]byte(`{"type":"object","properties":{"company":{"type":"string"},"year":{"type":"integer"},
		"subsidiaries":{"type":"array","x-fixpoint-key":"name","items":{"type":"object","properties":{"name":{"type":"string"},"country":{"type":"string"},"share":{"type":"number"},"since":{"type":"integer"}}}}}}`))
	if err != nil {
		b.Fatal(err)
	}
	var values []ChunkValue
	for start, n := 0, 0; start < 500; start, n = start+33, n+1 {
		var list []any
		for i := start; i < min(500, start+37); i++ {
			list = append(list, map[string]any{"name": fmt.Sprintf("Subsidiary %03d", i), "country": "DE",
				"share": json.Number(fmt.Sprint(i % 100)), "since": json.Number(fmt.Sprint(1990 + i%30))})
		}
		values = append(values, ChunkValue{Chunk: n, Value: map[string]any{"company": "Acme", "year": json.Number(fmt.Sprint(2024 + n%2)), "subsidiaries": list}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Values(schema, values, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
