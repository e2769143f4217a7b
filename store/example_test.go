package store_test

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint/store"
)

// Two spellings of one schema share a canonical form, hence one hash and one
// row in the schemas table.
func ExampleSchemaHash() {
	a, _ := store.SchemaHash([]byte(`{"type": "object", "required": ["name"]}`))
	b, _ := store.SchemaHash([]byte("{\n  \"required\": [\"name\"],\n  \"type\": \"object\"\n}"))
	c, _ := store.Canonical([]byte(`{"type": "object", "required": ["name"]}`))
	fmt.Println(a == b)
	fmt.Println(string(c))
	// Output:
	// true
	// {"required":["name"],"type":"object"}
}
