package enqueue

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// The reader keeps the dataset's columns in file order: a CSV's header
// (without a BOM), a JSONL file's keys as first written (a BOM before the
// first line is not data either).
func TestRowReaderColumns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, format, data string
		want               []string
		rows               int
	}{
		{"jsonl", FormatJSONL, `{"zeta":1,"alpha":"a"}` + "\n\n" + `{"alpha":"b","mid":true,"zeta":2}` + "\n", []string{"zeta", "alpha", "mid"}, 2},
		{"csv", FormatCSV, "\ufeffzeta,alpha\n1,a\n2,b\n", []string{"zeta", "alpha"}, 2},
		// Excel's export: a BOM, then quoted header fields (the BOM left in
		// the stream made the first a "bare quote" and refused the file).
		{"csv with a BOM and quotes", FormatCSV, "\ufeff\"id\",\"text\"\r\n\"r1\",\"good\"\r\n", []string{"id", "text"}, 1},
		// ",,," is a spreadsheet's blank line: skipped, not a job of nothing.
		{"csv with empty rows", FormatCSV, "a,b,c\n1,2,3\n,,\n\"\",,\n4,5,6\n", []string{"a", "b", "c"}, 2},
		{"jsonl with a BOM", FormatJSONL, "\ufeff" + `{"zeta":1,"alpha":"a"}` + "\r\n" + `{"alpha":"b","zeta":2}` + "\r\n", []string{"zeta", "alpha"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := newRowReader(tc.format, strings.NewReader(tc.data))
			n := 0
			for {
				_, _, err := rr.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != tc.rows || !slices.Equal(rr.columns(), tc.want) {
				t.Errorf("%d rows, columns %q; want %d, %q", n, rr.columns(), tc.rows, tc.want)
			}
		})
	}
}

// An id is a string as it is or a number as written: 1 and "1" are one id,
// 1.0 another; anything else is refused with what it is.
func TestRowID(t *testing.T) {
	t.Parallel()
	row := func(js string) map[string]any {
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		row, want, wantErr string
	}{
		{`{"id":"1"}`, "1", ""},
		{`{"id":1}`, "1", ""},
		{`{"id":1.0}`, "1", ""},
		{`{"id":1e2}`, "100", ""},
		{`{"id":2.50}`, "2.5", ""},
		{`{"id":-0.0}`, "0", ""},
		{`{"id":1.5e-3}`, "0.0015", ""},
		{`{"id":"1e2"}`, "1e2", ""},
		{`{"id":"a b"}`, "a b", ""},
		{`{"id":null}`, "", "is null"},
		{`{}`, "", "is missing"},
		{`{"id":" "}`, "", "is empty"},
		{`{"id":{"a":1}}`, "", "an object"},
		{`{"id":[1]}`, "", "an array"},
		{`{"id":true}`, "", "a boolean"},
		{`{"id":"a\u0000b"}`, "", "holds a NUL character"},
		{`{"id":"` + strings.Repeat("x", IDMaxBytes+1) + `"}`, "", "over the limit"},
	} {
		got, err := rowID(row(tc.row), "id")
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("rowID(%.40s) = %q, %v; want %q, error naming %q", tc.row, got, err, tc.want, tc.wantErr)
		}
	}
}

// Settings differences are named one per line; a cap difference too.
func TestSettingsDiff(t *testing.T) {
	t.Parallel()
	a := BatchSettings{Provider: "openai", Model: "m1", MaxTokens: 100, SchemaHash: "abc", TemplateSHA256: "t1"}
	b := a
	if d := a.diff(b); len(d) != 0 {
		t.Fatalf("equal settings differ: %q", d)
	}
	b.Model, b.Limits.MaxAttempts = "m2", 5
	d := a.diff(b)
	if len(d) != 2 || d[0] != "model: recorded m1, now m2" || d[1] != "max attempts: recorded 3, now 5" {
		t.Errorf("diff = %q", d)
	}
	one, two := 1.0, int64(2)
	if got := capDiff(store.Cap{MaxCostUSD: &one}, store.Cap{MaxTotalTokens: &two}); got != "max cost: recorded $1, now none; max total tokens: recorded none, now 2" {
		t.Errorf("capDiff = %q", got)
	}
}

// A JSONL line longer than a row may be is a bad row, read to its end: the
// rows after it are read, with their own line numbers. Lines longer than
// the read buffer but within the limit are rows like any other, and the
// last line needs no newline.
func TestRowReaderLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 100<<10)
	data := `{"id":"a"}` + "\n" +
		`{"id":"b","text":"` + long + `"}` + "\n" +
		`{"id":"c","text":"` + strings.Repeat("z", maxLineBytes) + `"}` + "\n" +
		`{"id":"d"}`
	rr := newRowReader(FormatJSONL, strings.NewReader(data))
	type got struct {
		id   string
		line int
		err  string
	}
	var rows []got
	for {
		row, line, err := rr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		g := got{line: line}
		if err != nil {
			g.err = err.Error()
		} else {
			g.id = row["id"].(string)
			if g.id == "b" && row["text"] != long {
				t.Errorf("row b's text was not read whole")
			}
		}
		rows = append(rows, g)
	}
	if len(rows) != 4 || rows[0].id != "a" || rows[1].id != "b" || rows[3].id != "d" || rows[3].line != 4 ||
		rows[2].line != 3 || !strings.Contains(rows[2].err, "over the 16 MiB a row may have") {
		t.Errorf("rows %+v; want a, b, line 3 too long, d at line 4", rows)
	}
}

// A CSV header naming a column twice would make every row keep only one of
// the two values: the dataset is refused, naming the column.
func TestRowReaderDuplicateColumns(t *testing.T) {
	t.Parallel()
	rr := newRowReader(FormatCSV, strings.NewReader("id,text,text\n1,a,b\n"))
	_, _, err := rr.next()
	var fatal *fatalReadError
	if !errors.As(err, &fatal) || !strings.Contains(err.Error(), `column "text" twice (columns 2 and 3)`) {
		t.Errorf("next() = %v; want a fatal error naming the column twice", err)
	}
	rr = newRowReader(FormatCSV, strings.NewReader("id,,text\n1,x,a\n"))
	if _, _, err := rr.next(); !errors.As(err, &fatal) || !strings.Contains(err.Error(), "column 2 has no name") {
		t.Errorf("next() = %v; want a fatal error naming the column with no name", err)
	}
}

// A row that is not UTF-8 (a Latin-1 export) is a bad row naming the byte,
// in JSONL and in CSV: decoded, each bad byte would silently become U+FFFD.
func TestRowReaderNotUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ format, data string }{
		{FormatJSONL, "{\"id\":\"1\",\"text\":\"caf\xe9\"}\n{\"id\":\"2\",\"text\":\"ok\"}\n"},
		{FormatCSV, "id,text\n1,caf\xe9\n2,ok\n"},
	} {
		rr := newRowReader(tc.format, strings.NewReader(tc.data))
		_, line, err := rr.next()
		if err == nil || !strings.Contains(err.Error(), "not UTF-8 (byte 0xe9") {
			t.Errorf("%s: line %d: %v; want a bad row naming byte 0xe9", tc.format, line, err)
		}
		if row, _, err := rr.next(); err != nil || row["text"] != "ok" {
			t.Errorf("%s: the next row: %v %v; want it read", tc.format, row, err)
		}
	}
}

// What a dataset reader refuses by name rather than as noise: a JSONL line
// that is null, a file in UTF-16, a CSV header that is not UTF-8, a CSV
// record over the row limit (a quote left open), read without holding it.
func TestRowReaderRefusals(t *testing.T) {
	t.Parallel()
	first := func(format, data string) error {
		rr := newRowReader(format, strings.NewReader(data))
		for {
			_, _, err := rr.next()
			if err != nil {
				return err
			}
		}
	}
	utf16 := "\xff\xfei\x00d\x00\n\x00"
	for _, tc := range []struct {
		name, format, data, want string
		fatal                    bool
	}{
		{"null line", FormatJSONL, "null\n", "not a JSON object: null", false},
		// Said in the dataset's words, not Go's ("cannot unmarshal array
		// into Go value of type map[string]interface {}").
		{"array line", FormatJSONL, "[1,2]\n", "not a JSON object: the line holds a JSON array", false},
		{"string line", FormatJSONL, "\"x\"\n", "holds a JSON string", false},
		{"number line", FormatJSONL, "-12\n", "holds a JSON number", false},
		{"boolean line", FormatJSONL, "true\n", "holds a JSON boolean", false},
		// Text that only starts as a literal would is no JSON at all.
		{"text from t", FormatJSONL, "this is text\n", `not JSON: the line begins "this is text", which is no JSON value`, false},
		{"text from f", FormatJSONL, "foo,bar\n", `not JSON: the line begins "foo,bar"`, false},
		{"text from a digit", FormatJSONL, "12 monkeys\n", "begins with a JSON number and goes on", false},
		{"UTF-16 JSONL", FormatJSONL, utf16, "UTF-16", true},
		{"UTF-16 CSV", FormatCSV, utf16, "UTF-16", true},
		// A compressed file was hundreds of "not UTF-8" bad rows (JSONL)
		// or a CSV parse error.
		{"gzip JSONL", FormatJSONL, gzipped(t, "{\"id\":1}\n"), "gzip-compressed: decompress it first", true},
		{"gzip CSV", FormatCSV, gzipped(t, "id,text\n1,\"a\"\n"), "gzip-compressed: decompress it first", true},
		{"zstd CSV", FormatCSV, "\x28\xb5\x2f\xfd rest", "zstd-compressed", true},
		{"Latin-1 header", FormatCSV, "caf\xe9,text\n1,a\n", "the CSV header is not UTF-8", true},
		{"quote left open", FormatCSV, "id,text\n1,\"" + strings.Repeat("x", maxLineBytes+100<<10) + "\n", "over the 16 MiB", true},
		// The reader went to the end of the file for the field's end: the
		// rows after it were one bad row, and enqueue exited 0 without them.
		{"quote open to the end", FormatCSV, "id,text\nE1,\"He said \"\"wow\nE2,fine\nE3,fine\n", "a quoted field opens on line 2 and runs on to line 4", true},
		{"quote open for lines", FormatCSV, "id,text\nE1,a\nE2,\"c\nE3,d\" e\nE4,f\n", "opens on line 3 and runs on to line 4", true},
		{"lines end in CR alone", FormatCSV, "id,product,text\rr1,Lamp,good\rr2,Lamp,ok\r", "lines end in CR alone", true},
		{"text after the object", FormatJSONL, `{"id":"j1","t":"a"} xyz` + "\n", `text after the JSON object: "xyz"`, false},
		{"two objects", FormatJSONL, `{"id":"j1"} {"id":"j2"}` + "\n", "more than one JSON value", false},
	} {
		err := first(tc.format, tc.data)
		var fatal *fatalReadError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &fatal) != tc.fatal {
			t.Errorf("%s: %v (fatal %v), want an error naming %q, fatal %v", tc.name, err, errors.As(err, &fatal), tc.want, tc.fatal)
		}
	}
	if f, err := DetectFormat("DATA.CSV"); f != FormatCSV || err != nil {
		t.Errorf("DetectFormat(DATA.CSV) = %q, %v", f, err)
	}
	// A compressed file's name says so (it said "pass --format").
	if _, err := DetectFormat("rows.jsonl.gz"); err == nil || !strings.Contains(err.Error(), "gzip-compressed: decompress it first, e.g. gzip -dc rows.jsonl.gz") {
		t.Errorf("DetectFormat(rows.jsonl.gz): %v; want the decompress hint", err)
	}
}

func gzipped(t *testing.T, text string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A field name with a NUL is a bad row (JSONL) or refuses the file (a CSV
// header): the batch records its columns as text, and its insert failed
// after the first pass had accepted the rows.
func TestRowReaderNULFieldNames(t *testing.T) {
	t.Parallel()
	rr := newRowReader(FormatJSONL, strings.NewReader(`{"id":1,"text":"ok"}`+"\n"+`{"id":2,"k\u0000":"x"}`+"\n"))
	if _, _, err := rr.next(); err != nil {
		t.Fatal(err)
	}
	if _, line, err := rr.next(); err == nil || line != 2 || !strings.Contains(err.Error(), "holds a NUL") {
		t.Errorf("line %d: %v; want line 2 refused for its field name", line, err)
	}
	rr = newRowReader(FormatCSV, strings.NewReader("id,k\x00\n1,x\n"))
	var fatal *fatalReadError
	if _, _, err := rr.next(); !errors.As(err, &fatal) || !strings.Contains(err.Error(), "holds a NUL") {
		t.Errorf("CSV header with a NUL: %v; want the file refused", err)
	}
}

// Malformed CSV quoting is a bad row with its line, not a crash: after
// some parse errors the CSV reader holds no record, and asking it where
// the record was panicked.
func TestRowReaderMalformedQuotes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		badLine    int
	}{
		{"quote left open at the end", "subject,body\n\"x\n", 2},
		{"text after a closing quote", "subject,body\na,b\n\"x\" y,z\n", 3},
		{"bare quote in a field", "subject,body\na,b\"c\nd,e\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := newRowReader(FormatCSV, strings.NewReader(tc.data))
			var bad []int
			for {
				_, line, err := rr.next()
				if errors.Is(err, io.EOF) {
					break
				}
				var fatal *fatalReadError
				if errors.As(err, &fatal) {
					t.Fatalf("line %d: %v; want a bad row", line, err)
				}
				if err != nil {
					if !strings.Contains(err.Error(), "malformed CSV") {
						t.Errorf("line %d: %v; want it called malformed CSV", line, err)
					}
					bad = append(bad, line)
				}
			}
			if len(bad) == 0 || bad[0] != tc.badLine {
				t.Errorf("bad rows at lines %v, want the first at line %d", bad, tc.badLine)
			}
		})
	}
}

// A template that renders more than the workers take is a bad row, read
// only up to the limit: {{range 300000000}} used to grow the prompt until
// the process ran out of memory.
func TestRenderIsCapped(t *testing.T) {
	t.Parallel()
	cfg := Config{Batch: "cap", Schema: []byte(`{"type":"object"}`), Provider: "openai", Model: "m", Format: FormatJSONL, MaxPromptBytes: 1000,
		Template: `{{range 300000000}}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{end}}{{.subject}}`}
	rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(`{"subject":"a"}`+"\n"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Bad) != 1 || !strings.Contains(rep.Bad[0].Error(), "line 1: the template renders a prompt over the workers' limit of 1000 bytes") ||
		!strings.Contains(rep.Bad[0].Error(), "--max-prompt-bytes") {
		t.Errorf("bad rows %v; want line 1 refused for its prompt's size", rep.Bad)
	}
}

// A JSONL row whose object repeats a key, at any depth, is a bad row naming
// the key and where: decoding would keep one of the values and lose the
// other unseen. Equal keys written with other escapes are the same key;
// the same key in sibling objects is not a repeat.
func TestRowReaderDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{`{"id":1,"text":"a","text":"b"}`, `key "text" appears twice in one object (at /text)`},
		{`{"id":1,"c":{"n":1,"x":[1,{"a":"}","a":2}]}}`, `key "a" appears twice in one object (at /c/x/1/a)`},
		{`{"id":1,"t\u0065xt":"a","text":"b"}`, `key "text" appears twice`},
		{`{"id":1,"a/b~":1,"a/b~":2}`, `(at /a~1b~0)`},
		{`{"id":1,"q":"\"text\":","text":"a","r":{"text":1},"s":[{"text":1},{"text":2}]}`, ""},
		{`{"id":1,"e":{},"f":[],"g":"{","text":"a"}`, ""},
	} {
		rr := newRowReader(FormatJSONL, strings.NewReader(tc.line+"\n"))
		_, _, err := rr.next()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want it read", tc.line, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error with %q", tc.line, err, tc.want)
		}
	}
}

// A NUL in a row's value is a bad row naming where: Postgres cannot store
// it, and the row, prompt and export held U+FFFD in its place, unsaid.
func TestRowReaderRefusesNUL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ format, data, want string }{
		{FormatJSONL, `{"id":2,"text":"a\u0000b"}`, "the value at /text holds a NUL"},
		{FormatJSONL, `{"id":2,"c":{"tags":["x","\u0000"]}}`, "the value at /c/tags/1 holds a NUL"},
		// Unescaped, the decoder refuses it: the walk above runs only
		// on a line that writes \u0000.
		{FormatJSONL, "{\"id\":2,\"text\":\"a\x00b\"}", "invalid character '\\x00'"},
		{FormatJSONL, "{\"id\":2,\"k\x00\":\"b\"}", "invalid character '\\x00'"},
		{FormatCSV, "id,text\n2,a\x00b", `column "text" holds a NUL`},
	} {
		rr := newRowReader(tc.format, strings.NewReader(tc.data+"\n"))
		if _, _, err := rr.next(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v; want a bad row saying %q", tc.format, tc.data, err, tc.want)
		}
	}
}

// A row's null, objects and arrays reach the prompt as JSON text: Go
// printed them as "<no value>" and "map[k:1.50]", into prompts that were
// paid for without a word. Navigation, range, index and if work as on the
// decoded row (null is false); json writes any value; a row lacking a
// field others have is a bad row that says how to write an optional one.
func TestTemplateSeesJSON(t *testing.T) {
	t.Parallel()
	cfg := Config{Batch: "tv", Schema: []byte(`{"type":"object"}`), Provider: "openai", Model: "m", Format: FormatJSONL, MaxBadRows: -1,
		Template: `T={{.text}} A={{.arr}} O={{.obj}} K={{.obj.k}} B={{.b}} J={{json .}} I={{index .arr 0}} {{if .text}}text{{else}}none{{end}} {{range .arr}}[{{.}}]{{end}} {{len .arr}} R={{range .lst}}x{{else}}empty{{end}} H={{.obj.h}}{{if .note}} N={{.note}}{{end}}`}
	data := `{"text":null,"arr":[1,"x",{"a":null}],"obj":{"k":1.50,"h":"<b>&</b>"},"b":true,"note":"n","lst":null}` + "\n" + `{"text":"t","arr":[2],"obj":{"k":2,"h":""},"b":false,"lst":[]}` + "\n"
	rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(data), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `T=null A=[1,"x",{"a":null}] O={"h":"<b>&</b>","k":1.50} K=1.50 B=true J={"arr":[1,"x",{"a":null}],"b":true,"lst":null,"note":"n","obj":{"h":"<b>&</b>","k":1.50},"text":null} I=1 none [1][x][{"a":null}] 3 R=empty H=<b>&</b> N=n`
	if rep.Prompt != want {
		t.Errorf("prompt\n%s\nwant\n%s", rep.Prompt, want)
	}
	if len(rep.Bad) != 1 || !strings.Contains(rep.Bad[0].Error(), `line 2: render template:`) ||
		!strings.Contains(rep.Bad[0].Error(), `{{with index . "note"}}...{{end}} writes it only where it is`) {
		t.Errorf("bad rows %v; want line 2 refused for its missing note, saying how to write an optional field", rep.Bad)
	}
}

// A nested field no row has is a typo (a usage error naming the path), as
// a top-level one is; one some rows have makes the others bad rows.
func TestNestedFieldTypo(t *testing.T) {
	t.Parallel()
	cfg := Config{Batch: "nt", Schema: []byte(`{"type":"object"}`), Provider: "openai", Model: "m", Format: FormatJSONL,
		Template: `X {{.customer.nmae}}`}
	data := `{"customer":{"name":"a"}}` + "\n" + `{"customer":{"name":"b","nmae":"x"}}` + "\n"
	// (A row without the parent object, or with null there, does not hide it.)
	if _, err := DryRun(t.Context(), nil, cfg, strings.NewReader(`{"customer":{"name":"a"}}`+"\n"+`{"other":1}`+"\n"+`{"customer":null}`+"\n"), 0, nil); !errors.Is(err, ErrBadConfig) ||
		!strings.Contains(err.Error(), "the template uses .customer.nmae, which no row of the dataset has") {
		t.Errorf("a nested field no row has: %v; want a usage error naming .customer.nmae", err)
	}
	rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(data), 0, nil)
	if err != nil || len(rep.Bad) != 1 || rep.Jobs != 1 {
		t.Errorf("a nested field one row has: %v, %d bad, %d jobs; want line 1 bad and line 2 a job", err, len(rep.Bad), rep.Jobs)
	}
	// --limit 1 has not seen the row that has it: bad rows, no typo.
	if rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(data), 1, nil); err != nil || len(rep.Bad) != 1 {
		t.Errorf("--limit 1: %v, bad %v; want line 1 bad, no usage error", err, rep.Bad)
	}
}

// Ids that are one number written two ways (5 and 5.0, as a float column
// writes them) are a bad row naming both: they were two jobs, the same
// row paid for twice.
func TestNumericIDsWrittenTwoWays(t *testing.T) {
	t.Parallel()
	cfg := Config{Batch: "ni", Schema: []byte(`{"type":"object"}`), Provider: "openai", Model: "m", Format: FormatJSONL,
		Template: `{{.text}}`, IDField: "id", MaxBadRows: -1}
	data := `{"id":5,"text":"a"}` + "\n" + `{"id":5.0,"text":"a"}` + "\n" + `{"id":1e0,"text":"b"}` + "\n" + `{"id":7,"text":"c"}` + "\n"
	rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(data), 0, nil)
	if err != nil || rep.Jobs != 3 || len(rep.Bad) != 1 || !strings.Contains(rep.Bad[0].Error(), "line 2: id 5.0 is the number of line 1's id 5, written another way") {
		t.Errorf("dry run: %v, %d jobs, bad %v; want line 2 refused naming line 1", err, rep.Jobs, rep.Bad)
	}
}

// A stray quote closed by another a few rows on folds the rows between
// into one field: valid CSV, so the row is read, with a warning naming
// it; a field whose lines do not read as rows of the file has none.
func TestRowReaderFoldedRows(t *testing.T) {
	t.Parallel()
	data := "id,product,text\n1,lamp,\"Bright \n2,desk,fine\n3,chair,ok\"\n4,mug,\"two\nlines, one comma\"\n5,pen,plain\n"
	rr := newRowReader(FormatCSV, strings.NewReader(data))
	var suspects []string
	for {
		row, _, err := rr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rr.suspect != "" {
			suspects = append(suspects, row["id"].(string)+": "+rr.suspect)
		}
	}
	if len(suspects) != 1 || !strings.HasPrefix(suspects[0], `1: column "text" spans 3 lines, and 2 of them read as rows`) {
		t.Errorf("suspects %q; want row 1 alone, its 2 folded rows named", suspects)
	}
	// One line of three commas in a three-column file is an address, not
	// a row: no warning.
	rr = newRowReader(FormatCSV, strings.NewReader("name,addr,note\nAnn,\"1 Main St, Apt 4, Springfield\nIL, 62701, USA\",ok\n"))
	if _, _, err := rr.next(); err != nil || rr.suspect != "" {
		t.Errorf("an address over two lines: %v, warned %q", err, rr.suspect)
	}
}

// canonicalNumber writes one number one way: no exponent, no leading or
// trailing zeros, no sign on zero; an exponent only past 40 digits.
func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"100": "100", "1e2": "100", "1E+02": "100", "100.000": "100", "0100": "100",
		"2.50": "2.5", "-2.50": "-2.5", "0.5": "0.5", ".5e0": ".5e0", "5e-1": "0.5", "1.5e-3": "0.0015",
		"0": "0", "-0": "0", "-0.0e5": "0", "0.000": "0",
		"123.4500e2": "12345", "12345678901234567890": "12345678901234567890",
		"1e39": "1" + strings.Repeat("0", 39), "1e40": "1e40", "1e400": "1e400", "1.50e400": "1.5e400", "1.5e-45": "1.5e-45",
		"abc": "abc", "1e": "1e", "1ex": "1ex",
	} {
		if got := canonicalNumber(in); got != want {
			t.Errorf("canonicalNumber(%s) = %s; want %s", in, got, want)
		}
	}
}
