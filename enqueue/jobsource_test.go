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

// What enqueue sends as a job's evidence source, computed from the row it
// read, is what the worker, the revalidation and the dashboard compute
// from the ledger's copy of the row (evidence.JobSource), for every value
// kind, escapes, numbers as written and each source setting.
func TestRenderedSourceIsTheLedgersJobSource(t *testing.T) {
	t.Parallel()
	data := `{"id":"a","s":"caf\u00e9 \ud83d\ude00 <b> & \"q\"","n":1249.990,"e":1e2,"neg":-0.0,"t":true,"z":null,` +
		`"o":{"name":"Dana","tags":["x",2,{"k":"<v>"}]},"a":[1,"two",null,[3]]}` + "\n" +
		`{"id":"b","s":"\ud800 lone","n":7,"e":"","o":{},"a":[]}` + "\n"
	for _, setting := range []string{"row", "prompt", "field:s", "field:o", "field:a"} {
		cfg := Config{Batch: "b", Schema: []byte(`{"type":"object"}`), Format: FormatJSONL, IDField: "id", Provider: "openai", Model: "m",
			Template: `{{.s}} {{.n}} {{.e}} {{.o}} {{.a}} {{with index . "t"}}{{.}}{{end}}`, EvidenceSource: setting}
		tmpl, hash, err := cfg.prepare()
		if err != nil {
			t.Fatal(err)
		}
		r := &renderer{cfg: &cfg, tmpl: tmpl, base: cfg.settings(hash).envelope(cfg.Batch)}
		rows := newRowReader(FormatJSONL, strings.NewReader(data))
		for {
			row, line, err := rows.next()
			if err != nil {
				break
			}
			job, source, _, err := r.render(row, line)
			if err != nil {
				t.Fatalf("%s: line %d: %v", setting, line, err)
			}
			want, err := evidence.JobSource(job.Metadata, job.Prompt, setting)
			if err != nil || source != want {
				t.Errorf("%s: line %d: rendered source %q, the ledger's row gives %q (%v)", setting, line, source, want, err)
			}
		}
	}
}
