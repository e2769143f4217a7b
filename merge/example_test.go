package merge_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint/merge"
	"github.com/fixpoint-dev/fixpoint/validate"
)

func ExampleValues() {
	schema, err := validate.Compile([]byte(`{"type": "object", "properties": {
		"company": {"type": "string"},
		"subsidiaries": {"type": "array", "x-fixpoint-key": "name"}}}`))
	if err != nil {
		panic(err)
	}
	var values []merge.ChunkValue
	for n, text := range []string{
		`{"company": "Acme AG", "subsidiaries": [{"name": "Acme GmbH", "country": "DE"}, {"name": "Acme Ltd"}]}`,
		`{"company": "Acme", "subsidiaries": [{"name": "Acme Ltd", "country": "UK"}, {"name": "Acme KK", "country": "JP"}]}`,
		`{"company": "Acme AG", "subsidiaries": null}`,
	} {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		values = append(values, merge.ChunkValue{Chunk: n, Value: v})
	}
	merged, conflicts, err := merge.Values(schema, values, merge.Options{})
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(merged)
	fmt.Println(string(out))
	for _, c := range conflicts {
		var given []string
		for _, v := range c.Values {
			given = append(given, string(v))
		}
		fmt.Printf("%s: %s from chunks %v, chose %s\n", c.Path, strings.Join(given, " or "), c.Chunks, c.Chosen)
	}
	// Output:
	// {"company":"Acme AG","subsidiaries":[{"country":"DE","name":"Acme GmbH"},{"country":"UK","name":"Acme Ltd"},{"country":"JP","name":"Acme KK"}]}
	// /company: "Acme AG" or "Acme" from chunks [[0 2] [1]], chose "Acme AG"
}
