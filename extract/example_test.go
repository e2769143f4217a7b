package extract_test

import (
	"errors"
	"fmt"

	"github.com/fixpoint-dev/fixpoint/extract"
)

func ExampleExtract() {
	reply := "Sure! Here is the result:\n```json\n{name: 'Ada', \"langs\": [\"en\", \"fr\",], \"admin\": True}\n```"
	cands, err := extract.Extract(reply)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cands[0]
	fmt.Println(c.Source, string(c.JSON))
	for _, r := range c.Repairs {
		fmt.Println(r.Kind, r.Offset)
	}
	// Output:
	// fence {"name":"Ada","langs":["en","fr"],"admin":true}
	// unquoted_key 35
	// single_quotes 41
	// trailing_comma 68
	// python_literal 81
}

func ExampleExtract_refusal() {
	_, err := extract.Extract("I'm sorry, but I can't help with that.")
	fmt.Println(err)
	fmt.Println(errors.Is(err, extract.ErrNoJSON))
	// Output:
	// no JSON value: prose only ("I'm sorry, but I can't help with that.")
	// true
}

func ExampleRepairText() {
	c, err := extract.RepairText(`{"items": [1, 2, {"id": 3, "tags": ["a", "b`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(c.JSON), c.Truncated)
	// Output:
	// {"items":[1,2,{"id":3,"tags":["a","b"]}]} true
}
