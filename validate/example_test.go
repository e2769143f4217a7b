package validate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint/satisfy"
	"github.com/fixpoint-dev/fixpoint/validate"
)

func ExampleCompile() {
	s, err := validate.Compile([]byte(`{
		"type": "object",
		"required": ["sku", "qty", "email"],
		"properties": {
			"sku":      {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
			"qty":      {"type": "integer", "minimum": 1},
			"priority": {"enum": ["low", "medium", "high"]}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dec := json.NewDecoder(strings.NewReader(`{"sku": "abc-1", "qty": "2", "priority": "urgent"}`))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		fmt.Println(err)
		return
	}
	errs := s.Validate(v)
	for _, e := range errs {
		fmt.Printf("%-8s %s\n", e.Class, e.Message)
	}
	fmt.Println("class:", validate.ClassOf(errs))
	// Output:
	// shape    /email: missing required property "email"
	// semantic /priority: "urgent" is not one of ["low","medium","high"]
	// shape    /qty: expected integer, got string "2"
	// semantic /sku: "abc-1" does not match ^[A-Z]{3}-[0-9]{4}$
	// class: shape
}

func ExampleCompile_externalRef() {
	_, err := validate.Compile([]byte(`{"properties": {"a": {"$ref": "https://example.com/a.json"}}}`))
	fmt.Println(err)
	// Output:
	// invalid schema: keyword "$ref" at /properties/a/$ref: references outside the schema document are not allowed (no network or file access): cannot use "https://example.com/a.json"
}

func ExampleCheck() {
	s, err := validate.Compile([]byte(`{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := validate.Check(s, `{"name": 42}`)
	b, err := r.MarshalJSON()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"valid":false,"value":{"name":42},"class":"shape","errors":[{"path":"/name","keyword":"type","class":"shape","message":"/name: expected string, got number 42"}],"repairs":[],"source":"raw","truncated":false}
}

func ExampleSchema_Satisfiable() {
	for _, schema := range []string{
		`{"$ref": "#"}`,
		`{"type": "object", "required": ["child"], "properties": {"child": {"$ref": "#"}}}`,
		`{"type": "object", "properties": {"child": {"$ref": "#"}}}`,
	} {
		s, err := validate.Compile([]byte(schema))
		if err != nil {
			fmt.Println(err)
			return
		}
		err = s.Satisfiable()
		fmt.Println(errors.Is(err, satisfy.ErrUnsatisfiable), err)
	}
	// Output:
	// true invalid schema: keyword "$ref" at /$ref: no value satisfies the schema: $ref refers back to (root) without consuming any part of the value
	// true invalid schema: keyword "$ref" at /properties/child/$ref: no value satisfies the schema: $ref refers back to (root), which only an infinitely deep value could satisfy (via required at /required)
	// false <nil>
}
