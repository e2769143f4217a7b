package validate

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
)

func TestPropertyNamesLocation(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{
		"type": "object",
		"properties": {
			"aa": {"type": "string"},
			"bb": {"type": "object", "propertyNames": {"pattern": "^x"}},
			"cc": {},
			"list": {"type": "array", "items": {"type": "object", "properties": {"m": {"propertyNames": {"maxLength": 2}}, "n": {}}}}
		},
		"additionalProperties": {"propertyNames": {"maxLength": 2}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		want  []string // paths of the errors, sorted
	}{
		// Properties validated after "bb" used to overwrite its location.
		{`{"aa": "x", "bb": {"yyy": 1}, "cc": 1}`, []string{"/bb/yyy"}},
		{`{"aa": "x", "dd": {"yyy": 1}, "cc": 1}`, []string{"/dd/yyy"}},
		{`{"aa": "x", "bb": {"yyy": 1}, "cc": 1, "dd": {"zzz": 1}}`, []string{"/bb/yyy", "/dd/zzz"}},
		{`{"list": [{"m": {"ok": 1}, "n": 1}, {"m": {"long": 1}, "n": 2}, {"m": {}, "n": 3}]}`, []string{"/list/1/m/long"}},
		// The same property name in two objects at one depth: each is found.
		{`{"list": [{"m": {"long": 1}, "n": 1}, {"m": {"long": 1}, "n": 2}]}`, []string{"/list/0/m/long", "/list/1/m/long"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.value), &v); err != nil {
			t.Fatal(err)
		}
		errs := s.Validate(v)
		var got []string
		for _, e := range errs {
			if e.Keyword != "propertyNames" {
				t.Errorf("%s: unexpected error %+v", tc.value, e)
			}
			got = append(got, e.Path)
		}
		if !equalStrings(got, tc.want) {
			t.Errorf("%s: errors at %v, want %v", tc.value, got, tc.want)
		}
	}
}

// Many objects failing on one name: each error is at its own object, and
// placing them takes linear time (a quadratic search took 16 s for 4,000).
func TestPropertyNamesLocationMany(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{"type": "array", "items": {"type": "object", "propertyNames": {"maxLength": 2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	v := make([]any, n)
	for i := range v {
		v[i] = map[string]any{"bad": i, "ok": i}
	}
	errs := s.Validate(v)
	if len(errs) != n {
		t.Fatalf("%d errors, want %d", len(errs), n)
	}
	seen := map[string]bool{}
	for _, e := range errs {
		seen[e.Path] = true
	}
	for i := range n {
		if p := "/" + strconv.Itoa(i) + "/bad"; !seen[p] {
			t.Fatalf("no error at %s", p)
		}
	}
}

// A pattern that does not compile, as a key of "patternProperties", is
// reported there, not at a keyword beside it.
func TestPatternPropertiesKeyLocation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"(": {}}, "title": "t"}`, "/patternProperties/("},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"x": {"type": "object", "patternProperties": {"a[": {}}, "required": ["a"]}}, "title": "t"}`, "/definitions/x/patternProperties/a["},
	} {
		_, err := Compile([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Fatalf("%s: got %v, want a SchemaError", tc.schema, err)
		}
		if se.Location != tc.want || se.Keyword != "patternProperties" {
			t.Errorf("%s: keyword %q at %q, want patternProperties at %q (%v)", tc.schema, se.Keyword, se.Location, tc.want, err)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
