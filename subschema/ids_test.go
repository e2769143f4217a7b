package subschema

import "testing"

// documentOrder numbers values in the order the text opens them.
func TestDocumentOrder(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"b":{"x":[1,{"y":2}]},"a/~":3,"c":[]}`)
	want := map[string]int{"": 0, "/b": 1, "/b/x": 2, "/b/x/0": 3, "/b/x/1": 4, "/b/x/1/y": 5, "/a~1~0": 6, "/c": 7}
	ask := map[string]bool{}
	for p := range want {
		ask[p] = true
	}
	got := documentOrder(raw, ask)
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%q: %d, want %d", p, got[p], n)
		}
	}
}
