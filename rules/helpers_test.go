package rules

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// decode decodes a JSON value the way the worker does, with UseNumber.
func decode(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

// mustCompile compiles schema, failing the test on an error.
func mustCompile(t testing.TB, schema string) *Set {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// check runs s on the JSON value value, failing the test on an error.
func check(t testing.TB, s *Set, value string) []Finding {
	t.Helper()
	fs, err := s.Check(context.Background(), decode(t, value))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return fs
}

// texts returns the Text of each finding.
func texts(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Text()
	}
	return out
}

// objectWith returns the schema of an object with the given properties
// (JSON of the properties keyword's value) and one rule.
func objectWith(props, rule string) string {
	r, _ := json.Marshal(rule)
	return `{"type":"object","properties":` + props + `,"x-fixpoint-rules":[{"rule":` + string(r) + `,"message":"m"}]}`
}
