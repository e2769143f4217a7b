package enqueue

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"text/template"

	"github.com/fixpoint-dev/fixpoint/evidence"
)

// The evidence source's field:NAME is the field as the prompt template
// prints it: evidence.JobSource, which the worker, the revalidation and
// the dashboard call, prints each kind of JSON value as {{.NAME}} does.
func TestJobSourcePrintsAsTheTemplate(t *testing.T) {
	t.Parallel()
	row := `{"s":"a <b> & c","n":1249.990,"i":-3,"t":true,"f":false,"z":null,"e":"",
		"o":{"name":"Dana","tier":null,"tags":["x",2,{"k":"<v>"}],"ok":true},"a":[1,"two",null,[3]]}`
	dec := json.NewDecoder(strings.NewReader(row))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		t.Fatal(err)
	}
	for name := range fields {
		tmpl := template.Must(template.New("p").Option("missingkey=error").Funcs(templateFuncs).Parse("{{." + name + "}}"))
		var b bytes.Buffer
		if err := tmpl.Execute(&b, templateView(fields)); err != nil {
			t.Fatal(err)
		}
		got, err := evidence.JobSource(json.RawMessage(row), b.String(), "field:"+name)
		if err != nil || got != b.String() {
			t.Errorf("field %s: JobSource %q (%v); the template prints %q", name, got, err, b.String())
		}
	}
}
