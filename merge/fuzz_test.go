package merge

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzValues: for any two JSON values a and b, merging does not fail; a
// value merged alone, or with itself from another chunk, is itself with
// no conflict; and the merge of a and b does not depend on their order in
// the input.
func FuzzValues(f *testing.F) {
	f.Add(`{"a":1,"b":[1,2,{"c":null}]}`, `{"a":2,"b":[2,3],"d":"x"}`)
	f.Add(`[1,1,"1",1.0,{"a":[]}]`, `[{"a":[]},null]`)
	f.Add(`{"x":{"y":"z"}}`, `{"x":"z"}`)
	f.Add(`null`, `{"a":null}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		va, okA := decodeOK(a)
		vb, okB := decodeOK(b)
		if !okA || !okB {
			return
		}
		for _, v := range []any{va, vb} {
			for _, values := range [][]ChunkValue{{{Chunk: 0, Value: v}}, {{Chunk: 0, Value: v}, {Chunk: 1, Value: v}}} {
				merged, conflicts, err := Values(nil, values, Options{})
				if err != nil {
					t.Fatalf("Values: %v", err)
				}
				if len(conflicts) != 0 || mustCanonical(merged) != mustCanonical(v) {
					t.Fatalf("%d copies of %s merged into %s, conflicts %v", len(values), mustCanonical(v), mustCanonical(merged), conflicts)
				}
			}
		}
		m1, c1, err1 := Values(nil, []ChunkValue{{Chunk: 0, Value: va}, {Chunk: 1, Value: vb}}, Options{})
		m2, c2, err2 := Values(nil, []ChunkValue{{Chunk: 1, Value: vb}, {Chunk: 0, Value: va}}, Options{})
		if err1 != nil || err2 != nil {
			t.Fatalf("Values: %v, %v", err1, err2)
		}
		if mustCanonical(m1) != mustCanonical(m2) || len(c1) != len(c2) {
			t.Fatalf("the input's order changed the merge: %s (%d conflicts) and %s (%d)", mustCanonical(m1), len(c1), mustCanonical(m2), len(c2))
		}
	})
}

// decodeOK decodes s as one JSON value whose numbers canonical accepts.
func decodeOK(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	_, err := canonical(v, "")
	return v, err == nil
}
