package enqueue

import (
	"encoding/json"
	"strings"
	"text/template"
)

// A row reaches the prompt template as JSON values that print as JSON: a
// string as its text, a number as written (json.Number), and null, an
// object or an array as JSON text. Go's own printing of them ("<no value>"
// for null, "map[a:<nil>]" for an object) went into prompts, and was paid
// for, without a word. Fields, index, range, len and if work on them as on
// the decoded row: an object is a map, an array a slice, and null is false.

// tmplObject is a JSON object in a template: it prints as JSON.
type tmplObject map[string]any

func (o tmplObject) String() string { return jsonText(o) }

// tmplArray is a JSON array in a template: it prints as JSON.
type tmplArray []any

func (a tmplArray) String() string { return jsonText(a) }

// tmplNull is a JSON null in a template, always a nil tmplNull: it prints
// as null, is false in {{if}}, and {{range}} over it runs its {{else}}, as
// over a missing value.
type tmplNull []any

func (tmplNull) String() string { return "null" }

// MarshalJSON writes null.
func (tmplNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// jsonText is v as compact JSON: numbers as written, object keys sorted,
// and <, > and & as themselves (a prompt is no HTML page).
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// templateView is row as the template sees it: {{.}} prints the row as
// JSON too.
func templateView(row map[string]any) tmplObject {
	flat := true
	for _, v := range row {
		switch v.(type) {
		case nil, map[string]any, []any:
			flat = false
		}
	}
	if flat {
		// Strings, numbers and booleans print as themselves: the row is
		// its own view, without a copy of every row.
		return tmplObject(row)
	}
	out := make(tmplObject, len(row))
	for k, v := range row {
		out[k] = viewOf(v)
	}
	return out
}

func viewOf(v any) any {
	switch x := v.(type) {
	case nil:
		return tmplNull(nil)
	case map[string]any:
		o := make(tmplObject, len(x))
		for k, e := range x {
			o[k] = viewOf(e)
		}
		return o
	case []any:
		a := make(tmplArray, len(x))
		for i, e := range x {
			a[i] = viewOf(e)
		}
		return a
	}
	return v
}

// templateFuncs are the functions a prompt template may call besides the
// built-in ones: json writes a value as compact JSON ({{json .}} is the
// whole row, {{json .customer}} one object).
var templateFuncs = template.FuncMap{"json": jsonText}
