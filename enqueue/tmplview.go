package enqueue

import (
	"encoding/json"
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

// tmplNull is a JSON null in a template, as a nil *tmplNull: it prints as
// null and is false in {{if}}.
type tmplNull struct{}

func (*tmplNull) String() string { return "null" }

// MarshalJSON writes null.
func (*tmplNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// jsonText is v as compact JSON, as the row wrote it (numbers as written).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// templateView is row as the template sees it.
func templateView(row map[string]any) map[string]any {
	out := make(map[string]any, len(row))
	for k, v := range row {
		out[k] = viewOf(v)
	}
	return out
}

func viewOf(v any) any {
	switch x := v.(type) {
	case nil:
		return (*tmplNull)(nil)
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
