package repair

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

var updatePrompts = flag.Bool("update-prompts", false, "rewrite the system prompt golden files in testdata/prompt")

// TestSystemPromptGolden pins the system prompt, schema description included,
// byte for byte, for the schemas in testdata/prompt: demo.json is a copy of
// demoSchema in cmd/worker/demo.go, nested.json and rootarray.json use $ref,
// $defs, items, nested objects past the description's depth and escaped
// names. The simulator and other tests read these prompts, so any change to
// them must be deliberate: run with -update-prompts and review the diff.
func TestSystemPromptGolden(t *testing.T) {
	t.Parallel()
	schemas, err := filepath.Glob(filepath.Join("testdata", "prompt", "*.json"))
	if err != nil || len(schemas) == 0 {
		t.Fatalf("no schemas in testdata/prompt: %v", err)
	}
	for _, file := range schemas {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			job := &Job{SchemaRaw: raw, Mode: fixpoint.ModePrompt, System: "  Be brief.  "}
			got := systemPrompt(job)
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *updatePrompts {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update-prompts to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("system prompt for %s changed:\n--- got\n%s\n--- want\n%s", name, got, want)
			}
		})
	}
}

// TestDescribeSchemaRecursive: a schema whose references loop (through
// items, properties or $defs alone) or that nests deeply is described in
// bounded time and bytes, with a note where the description stops; the
// schema block is still given in full.
func TestDescribeSchemaRecursive(t *testing.T) {
	t.Parallel()
	deep := `{"type":"string"}`
	for i := range 50 {
		if i%2 == 0 {
			deep = `{"type":"object","properties":{"p":` + deep + `}}`
		} else {
			deep = `{"type":"array","items":` + deep + `}`
		}
	}
	deepItems := `{"type":"object","properties":{"leaf":{"type":"string"}}}`
	for range 50 {
		deepItems = `{"type":"array","properties":{"n":{"type":"string"}},"items":` + deepItems + `}`
	}
	wide := `{"type":"object","properties":{`
	for i := range 2000 {
		if i > 0 {
			wide += ","
		}
		wide += `"property_with_a_long_name_` + strconv.Itoa(i) + `":{"$ref":"#/$defs/obj"}`
	}
	wide += `},"$defs":{"obj":{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}},"c":{"type":"string"}}}}}`
	tests := []struct {
		name     string
		schema   string
		want     []string // lines (or parts of lines) the description must have
		wantNote string   // "" when the description must not stop early
	}{
		{
			name:   "items loop to a node with properties",
			schema: `{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`,
			want:   []string{"- an object or an array\n"}, wantNote: recursiveNote,
		},
		{
			// The validator follows them: the prompt must not say "any JSON value".
			name:   "references through an $id or an $anchor are not any value",
			schema: `{"$id":"https://example.com/s/root.json","type":"object","properties":{"a":{"$ref":"item.json"},"b":{"$ref":"#num"}},"$defs":{"it":{"$id":"item.json","type":"integer"},"n":{"$anchor":"num","type":"number"}}}`,
			want: []string{"  - `a` (optional): as its $ref \"item.json\" in the schema below defines it\n",
				"  - `b` (optional): as its $ref \"#num\" in the schema below defines it\n"},
		},
		{
			// A pointer in a URI fragment is percent-encoded; a $ref to a
			// node that is itself a $ref is followed on.
			name:   "percent-encoded references are followed",
			schema: `{"type":"object","properties":{"a":{"$ref":"#/$defs/x%20y"},"d":{"$ref":"#/properties/a"}},"$defs":{"x y":{"type":"integer"}}}`,
			want:   []string{"  - `a` (optional): an integer\n", "  - `d` (optional): an integer\n"},
		},
		{
			name:   "pattern properties are allowed",
			schema: `{"type":"object","properties":{"meta":{"type":"object","patternProperties":{"^x_":{"type":"number"}},"additionalProperties":false}}}`,
			want:   []string{"  - `meta` (optional): an object, no other properties than those its patternProperties in the schema below allow\n"},
		},
		{
			name:   "combinators are not any value",
			schema: `{"type":"object","properties":{"n":{"anyOf":[{"type":"integer"},{"type":"string"}]},"a":{"allOf":[{"required":["x"]},{"properties":{"x":{"type":"integer"}}}]}}}`,
			want: []string{"  - `a` (optional): matching every part of its allOf in the schema below\n",
				"  - `n` (optional): matching at least one of its anyOf alternatives in the schema below\n"},
		},
		{
			name:   "root refers to itself",
			schema: `{"$ref":"#"}`,
			want:   []string{"- any JSON value\n"},
		},
		{
			name:   "mutual recursion through $defs",
			schema: `{"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"type":"array","items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`,
			want:   []string{"- an object\n", "  - `b` (optional): an array\n"}, wantNote: recursiveNote,
		},
		{
			name:   "references that loop without a node",
			schema: `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a"}}}`,
			want:   []string{"- an object\n", "  - `x` (optional): any JSON value\n"},
		},
		{
			name:   "required self-reference",
			schema: `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`,
			want:   []string{"- an object\n", "  - `c` (required): an object"}, wantNote: recursiveNote,
		},
		{
			name:   "tree of nodes",
			schema: `{"$defs":{"node":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
			want:   []string{"- an object\n", "  - `children` (optional): an array\n", "  - `name` (required): a string\n"}, wantNote: recursiveNote,
		},
		{
			name:   "depth 50, objects and arrays",
			schema: deep,
			want:   []string{"- an array\n", "  - `[].p` (optional): an array\n", "      - `[].p[].p[].p` (optional): an array\n"},
		},
		{
			name:   "depth 50, arrays of arrays",
			schema: deepItems,
			want:   []string{"- an array\n"}, wantNote: deepNote,
		},
		{
			name:   "wide and repeated",
			schema: wide,
			want:   []string{"- an object\n"}, wantNote: cutNote,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := &Job{SchemaRaw: []byte(tc.schema), Mode: fixpoint.ModePrompt}
			sp := systemPrompt(job)
			desc := describeSchema([]byte(tc.schema))
			if len(desc) > describeMaxBytes {
				t.Errorf("description is %d bytes, over the bound %d", len(desc), describeMaxBytes)
			}
			if !strings.Contains(sp, desc) || !strings.Contains(sp, fixpoint.SchemaMarkerOpen+"\n"+string(compactJSON([]byte(tc.schema)))+"\n"+fixpoint.SchemaMarkerClose) {
				t.Errorf("system prompt lacks the description or the full schema:\n%s", sp)
			}
			for _, w := range tc.want {
				if !strings.Contains(desc, w) {
					t.Errorf("description lacks %q:\n%s", w, desc)
				}
			}
			for _, note := range []string{recursiveNote, deepNote, cutNote} {
				if got, want := strings.Contains(desc, note), note == tc.wantNote; got != want {
					t.Errorf("note %q in description = %v, want %v:\n%s", note, got, want, desc)
				}
			}
		})
	}
}

// FuzzDescribeSchema: any schema text is described within the bound, and the
// system prompt always ends with the schema block.
func FuzzDescribeSchema(f *testing.F) {
	for _, s := range []string{
		`{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`,
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"type":"array","items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`,
		`{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`,
		`{"type":"array","items":{"type":"object","properties":{"a~1b":{"$ref":"#/items/properties/a~01b"}}}}`,
		ticketSchema,
	} {
		f.Add([]byte(s))
	}
	if files, err := filepath.Glob(filepath.Join("testdata", "prompt", "*.json")); err == nil {
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		desc := describeSchema(schema)
		if len(desc) > describeMaxBytes {
			t.Fatalf("description is %d bytes, over the bound %d", len(desc), describeMaxBytes)
		}
		sp := systemPrompt(&Job{SchemaRaw: schema, Mode: fixpoint.ModePrompt})
		if !strings.HasSuffix(sp, "\n"+fixpoint.SchemaMarkerClose) {
			t.Fatalf("system prompt does not end with the schema block:\n%s", sp)
		}
	})
}

// TestFeedbackRequired: a missing property is named by its own pointer in
// both feedback formats, which is what the simulator (and a model) matches a
// correction on.
func TestFeedbackRequired(t *testing.T) {
	t.Parallel()
	s, err := validate.Compile([]byte(`{"type":"object","required":["customer","paid"],"properties":{"customer":{"type":"object","required":["email"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	check := validate.Check(s, `{"customer":{}}`)
	a := &fixpoint.Attempt{Class: string(check.Class), Errors: check.Errors}
	tests := []struct {
		format fixpoint.FeedbackFormat
		want   []string
	}{
		{fixpoint.FeedbackText, []string{
			"1. /customer/email: missing required property \"email\"\n",
			"2. /paid: missing required property \"paid\"",
		}},
		{fixpoint.FeedbackXML, []string{
			`<error path="/customer/email" keyword="required">/customer/email: missing required property "email"</error>`,
			`<error path="/paid" keyword="required">/paid: missing required property "paid"</error>`,
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.format), func(t *testing.T) {
			t.Parallel()
			fb := feedback(tc.format, a, false)
			for _, w := range tc.want {
				if !strings.Contains(fb, w) {
					t.Errorf("feedback lacks %q:\n%s", w, fb)
				}
			}
		})
	}
}

// ticketSchema is the schema of pipeline's loop tests (a copy: the tests of
// both packages describe it).
const ticketSchema = `{
  "type": "object",
  "properties": {
    "category": {"enum": ["billing", "bug", "account"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "summary": {"type": "string", "minLength": 3}
  },
  "required": ["category", "priority", "summary"],
  "additionalProperties": false
}`

// A reply of many wrong items keeps its first errors and one that counts
// the rest: 500,000 errors were kept in memory and in the attempt's row.
// The feedback and the job's error still count them all.
func TestAttemptKeepsBoundedErrors(t *testing.T) {
	t.Parallel()
	var errs []fixpoint.ValidationError
	for i := range 5000 {
		errs = append(errs, fixpoint.ValidationError{Path: fmt.Sprintf("/%d", i), Keyword: "type", Class: fixpoint.ClassShape, Message: fmt.Sprintf("/%d: expected integer", i)})
	}
	kept := keepErrors(errs)
	if len(kept) != MaxAttemptErrors || kept[len(kept)-1].Keyword != KeywordMoreErrors || kept[len(kept)-1].Class != fixpoint.ClassShape {
		t.Fatalf("kept %d errors, last %+v", len(kept), kept[len(kept)-1])
	}
	if n := errorCount(kept); n != 5000 {
		t.Errorf("errorCount = %d; want 5000", n)
	}
	a := fixpoint.Attempt{Class: "shape", Errors: kept}
	if got := attemptError(&a); !strings.HasSuffix(got, "(and 4999 more)") {
		t.Errorf("attemptError = %q; want it to count all 5000", got)
	}
	if fb := textErrors(kept); !strings.Contains(fb, "... and 4950 more errors of the same kinds (type 4950)") {
		t.Errorf("feedback ends %q", fb[len(fb)-120:])
	}
	// Kinds past the first 50 errors are shown one each: the count of the
	// rest is of kinds the model saw.
	mixed := append(slices.Clone(errs[:2000]), fixpoint.ValidationError{Path: "/x", Keyword: "required", Class: fixpoint.ClassShape, Message: "/x: missing"})
	fb := textErrors(keepErrors(mixed))
	if !strings.Contains(fb, "50. /x: missing") || !strings.Contains(fb, "... and 1951 more errors of the same kinds (type 1951)") {
		t.Errorf("feedback of 2,000 type errors then a missing property:\n%s", fb[len(fb)-200:])
	}
	if small := keepErrors(errs[:10]); len(small) != 10 {
		t.Errorf("10 errors kept as %d", len(small))
	}
}

// A reply with more errors than validate keeps (validate.MaxErrors) comes
// with one that counts the others: the attempt keeps its bound and the
// feedback and the job's error count every error, by keyword, as when
// validate kept them all.
func TestAttemptCountsErrorsValidateDidNotKeep(t *testing.T) {
	t.Parallel()
	s, err := validate.Compile([]byte(`{"type":"array","items":{"type":"object","required":["sku","price"],"properties":{"sku":{"type":"string","pattern":"^[A-Z]+$"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := range 15000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"sku":"a"}`)
	}
	b.WriteString(`,"x"]`)
	r := validate.Check(s, b.String())
	if n := errorCount(r.Errors); n != 30001 || len(r.Errors) > validate.MaxErrors+3 {
		t.Fatalf("%d errors kept, standing for %d; want 30001", len(r.Errors), n)
	}
	kept := keepErrors(r.Errors)
	last := kept[len(kept)-1]
	if len(kept) != MaxAttemptErrors || last.Keyword != KeywordMoreErrors || errorCount(kept) != 30001 {
		t.Fatalf("kept %d errors standing for %d, last %+v", len(kept), errorCount(kept), last)
	}
	// The first of each kind is kept, the type error of the last item too.
	if !slices.ContainsFunc(kept, func(e fixpoint.ValidationError) bool { return e.Path == "/15000" && e.Keyword == "type" }) {
		t.Error("the one type error is not kept")
	}
	if want := "29002 more errors, not kept: pattern 14501, required 14501"; last.Message != want {
		t.Errorf("last message %q; want %q", last.Message, want)
	}
	fb := textErrors(kept)
	if !strings.Contains(fb, "... and 29951 more errors of the same kinds (pattern 14976, required 14975): fix them the same way.") {
		t.Errorf("feedback ends %q", fb[len(fb)-160:])
	}
	a := fixpoint.Attempt{Class: "shape", Errors: kept}
	if got := attemptError(&a); !strings.HasSuffix(got, "(and 30000 more)") {
		t.Errorf("attemptError = %q; want it to count all 30001", got)
	}
}
