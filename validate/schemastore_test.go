package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// SchemaStore's schemas and their test instances, run through the compile
// path a job's schema takes (compile, with only the loader seam set so that
// references between SchemaStore schemas resolve from the local copy) and
// Schema.Validate, and Check given the instance's text as a reply.
// SchemaStore's layout: src/schemas/json/<name>.json, valid
// instances in src/test/<name>/, invalid ones in src/negative_test/<name>/,
// and src/schema-validation.jsonc, whose "skiptest" list names schemas
// SchemaStore itself does not test.
//
// TestSchemaStoreSample runs over the committed sample in
// testdata/schemastore (Apache-2.0, see its LICENSE and README.md) and holds
// every disagreement to schemaStoreSampleExceptions. TestSchemaStoreFull
// measures a full copy: SCHEMASTORE_DIR=/path/to/schemastore go test -run
// TestSchemaStoreFull -v ./validate/ (see docs/schemastore.md).

// schemaStoreHosts are the URL prefixes SchemaStore publishes its schemas
// under: a reference to <prefix><file> (or without ".json") is that file.
// The base URL compile gives the document stands for the one SchemaStore
// serves it from: a schema without "$id" (or one whose root "$ref" makes
// draft-07 ignore its "$id") resolves a relative reference such as
// "base.json" against it.
var schemaStoreHosts = []string{
	subschema.URL[:strings.LastIndexByte(subschema.URL, '/')+1],
	"https://json.schemastore.org/",
	"http://json.schemastore.org/",
	"https://www.schemastore.org/",
	"http://www.schemastore.org/",
}

// schemaStoreLoader serves SchemaStore's schemas from a local copy: by their
// published URL, or by the "$id" ("id" in draft-04) they declare. Anything
// else is refused, as Compile refuses every external reference.
type schemaStoreLoader struct {
	dir  string            // src/schemas/json
	byID map[string]string // declared id without fragment -> file name
}

func newSchemaStoreLoader(dir string) (*schemaStoreLoader, error) {
	l := &schemaStoreLoader{dir: dir, byID: map[string]string{}}
	names, err := schemaStoreNames(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		var head struct {
			ID  string `json:"$id"`
			ID4 string `json:"id"`
		}
		if json.Unmarshal(b, &head) != nil {
			continue // reported when the schema itself is compiled
		}
		for _, id := range []string{head.ID, head.ID4} {
			id = strings.TrimSuffix(id, "#")
			if _, taken := l.byID[id]; id != "" && !taken && !strings.Contains(id, "#") {
				l.byID[id] = name
			}
		}
	}
	return l, nil
}

func (l *schemaStoreLoader) Load(u string) (any, error) {
	u, _, _ = strings.Cut(u, "#")
	name := ""
	for _, h := range schemaStoreHosts {
		if rest, ok := strings.CutPrefix(u, h); ok && !strings.Contains(rest, "/") {
			for _, n := range []string{rest, rest + ".json"} {
				if _, err := os.Stat(filepath.Join(l.dir, n)); err == nil {
					name = n
					break
				}
			}
		}
	}
	if name == "" {
		name = l.byID[u]
	}
	if name == "" {
		return nil, fmt.Errorf("load %q: not a schema of the local SchemaStore copy: %w", u, errExternalRef)
	}
	b, err := os.ReadFile(filepath.Join(l.dir, name))
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// schemaStoreNames lists the schema files of dir, sorted.
func schemaStoreNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// schemaStoreConfig is the part of src/schema-validation.jsonc that bears on
// verdicts. Its other lists (ajvNotStrictMode, highSchemaVersion, the
// unknownKeywords and unknownFormat options) only quiet Ajv's strict-mode
// lint of the schema text: unknown keywords and formats are ignored here
// anyway, and externalSchema's files are served by the loader.
type schemaStoreConfig struct {
	SkipTest []string `json:"skiptest"`
}

// readSchemaStoreConfig reads schema-validation.jsonc (JSON with comments and
// trailing commas).
func readSchemaStoreConfig(path string) (schemaStoreConfig, error) {
	var cfg schemaStoreConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(stripJSONC(b), &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// stripJSONC removes // and /* */ comments outside strings, and a comma
// followed by nothing but space before a closing bracket or brace.
func stripJSONC(b []byte) []byte {
	var out []byte
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out = append(out, '\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
		default:
			out = append(out, c)
		}
	}
	// Trailing commas: drop a comma whose next non-space byte closes.
	var res []byte
	inStr = false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inStr {
			res = append(res, c)
			if c == '\\' && i+1 < len(out) {
				i++
				res = append(res, out[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			j := i + 1
			for j < len(out) && strings.IndexByte(" \t\r\n", out[j]) >= 0 {
				j++
			}
			if j < len(out) && (out[j] == ']' || out[j] == '}') {
				continue
			}
		}
		res = append(res, c)
	}
	return res
}

// ssOutcome is one SchemaStore case: a schema's compile (File "") or one
// test instance's verdict.
type ssOutcome struct {
	Schema string // file name under src/schemas/json
	Kind   string // "schema", "test" (expected valid) or "negative_test"
	File   string // instance file name, "" for the schema
	Agree  bool
	Detail string // why it disagrees: the compile error or the verdict's first errors
}

// key names the case as schemaStoreSampleExceptions does:
// "<schema>" for a compile, "<schema>/<kind>/<file>" for an instance.
func (o ssOutcome) key() string {
	if o.Kind == "schema" {
		return o.Schema
	}
	return o.Schema + "/" + o.Kind + "/" + o.File
}

// ssRun is the result of running one SchemaStore copy.
type ssRun struct {
	outcomes []ssOutcome
	// skipped schemas: SchemaStore's skiptest list; schemas with no test
	// directory are compiled and counted like any other.
	skipTest []string
	// nonJSON counts instance files skipped for their format (YAML, TOML),
	// by extension, valid and invalid together.
	nonJSON map[string]int
	// orphan lists test directories whose schema is not in the copy.
	orphan []string
	// unsatisfiable lists compiled schemas that Satisfiable refuses, as
	// enqueue does, with its error.
	unsatisfiable []ssOutcome
	// compileTime is each schema's compile and satisfiability check.
	compileTime map[string]time.Duration
}

// runSchemaStore runs every schema of the SchemaStore copy at src (the
// repository's src directory).
func runSchemaStore(t *testing.T, src string) ssRun {
	t.Helper()
	schemaDir := filepath.Join(src, "schemas", "json")
	cfg, err := readSchemaStoreConfig(filepath.Join(src, "schema-validation.jsonc"))
	if err != nil {
		t.Fatalf("read SchemaStore config: %v", err)
	}
	loader, err := newSchemaStoreLoader(schemaDir)
	if err != nil {
		t.Fatalf("index SchemaStore schemas: %v", err)
	}
	names, err := schemaStoreNames(schemaDir)
	if err != nil || len(names) == 0 {
		t.Fatalf("no schemas under %s: %v", schemaDir, err)
	}
	run := ssRun{nonJSON: map[string]int{}, compileTime: map[string]time.Duration{}}
	for _, kind := range []string{"test", "negative_test"} {
		ents, _ := os.ReadDir(filepath.Join(src, kind))
		for _, e := range ents {
			if e.IsDir() && !slices.Contains(names, e.Name()+".json") && !slices.Contains(run.orphan, e.Name()) {
				run.orphan = append(run.orphan, e.Name())
			}
		}
	}
	opts := compileOptions{loader: loader}
	for _, name := range names {
		if slices.Contains(cfg.SkipTest, name) {
			run.skipTest = append(run.skipTest, name)
			continue
		}
		raw, err := os.ReadFile(filepath.Join(schemaDir, name))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s, err := compile(raw, opts)
		run.outcomes = append(run.outcomes, ssOutcome{Schema: name, Kind: "schema", Agree: err == nil, Detail: errText(err)})
		if err == nil {
			if serr := s.Satisfiable(); serr != nil {
				run.unsatisfiable = append(run.unsatisfiable, ssOutcome{Schema: name, Kind: "schema", Detail: serr.Error()})
			}
		}
		run.compileTime[name] = time.Since(start)
		base := strings.TrimSuffix(name, ".json")
		for _, kind := range []string{"test", "negative_test"} {
			dir := filepath.Join(src, kind, base)
			ents, err := os.ReadDir(dir)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.IsDir() || e.Name() == ".DS_Store" {
					continue
				}
				ext := filepath.Ext(e.Name())
				if ext != ".json" {
					run.nonJSON[ext]++
					continue
				}
				o := ssOutcome{Schema: name, Kind: kind, File: e.Name()}
				if s == nil {
					o.Detail = "schema refused"
					run.outcomes = append(run.outcomes, o)
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				v, err := decodeInstance(b)
				if err != nil {
					o.Detail = "instance is not JSON: " + err.Error()
					run.outcomes = append(run.outcomes, o)
					continue
				}
				errs := s.Validate(v)
				valid := len(errs) == 0
				o.Agree = valid == (kind == "test")
				if !o.Agree {
					if valid {
						o.Detail = "accepted"
					} else {
						o.Detail = describeErrors(errs)
					}
				}
				// The worker checks a reply: extracted, then validated.
				// The file as a reply must get the same verdict.
				if r := Check(s, string(b)); r.Valid != valid {
					o.Agree = false
					o.Detail = fmt.Sprintf("Check, given the file as a reply, says valid=%v where Validate says %v (%d candidates)", r.Valid, valid, r.Candidates)
				}
				run.outcomes = append(run.outcomes, o)
			}
		}
	}
	return run
}

// decodeInstance decodes one JSON value as the worker does (numbers kept
// exact), refusing trailing data.
func decodeInstance(b []byte) (any, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return oneLine(err.Error())
}

// describeErrors summarises a verdict's errors: at most three, each as
// keyword at path: message.
func describeErrors(errs []fixpoint.ValidationError) string {
	var parts []string
	for i, e := range errs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("(+%d more)", len(errs)-3))
			break
		}
		p := e.Path
		if p == "" {
			p = "/"
		}
		parts = append(parts, fmt.Sprintf("%s at %s: %s", e.Keyword, p, oneLine(e.Message)))
	}
	return strings.Join(parts, "; ")
}

// counts returns the run's counts: schemas compiled and refused, instances
// agreeing and disagreeing (an instance of a refused schema disagrees).
func (r ssRun) counts() (compiled, refused, agree, disagree int) {
	for _, o := range r.outcomes {
		switch {
		case o.Kind == "schema" && o.Agree:
			compiled++
		case o.Kind == "schema":
			refused++
		case o.Agree:
			agree++
		default:
			disagree++
		}
	}
	return
}

// causeOf groups a disagreement: the error with its locations, quoted
// values and numbers blanked, so that one cause collects its cases.
var (
	causeQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	causeLoc    = regexp.MustCompile(` at /\S*`)
	causeNum    = regexp.MustCompile(`\b\d+(\.\d+)?\b`)
)

func causeOf(o ssOutcome) string {
	d := o.Detail
	if o.Kind != "schema" && d != "accepted" && d != "schema refused" && !strings.HasPrefix(d, "instance is not JSON") {
		// The first error's keyword and message.
		d, _, _ = strings.Cut(d, "; ")
	}
	d = causeQuoted.ReplaceAllString(d, `"…"`)
	d = causeLoc.ReplaceAllString(d, " at …")
	d = causeNum.ReplaceAllString(d, "N")
	if r := []rune(d); len(r) > 160 {
		d = string(r[:160]) + "…"
	}
	return o.Kind + ": " + d
}

// report writes the run's counts and every disagreement, grouped by cause.
func (r ssRun) report(w io.Writer) {
	compiled, refused, agree, disagree := r.counts()
	fmt.Fprintf(w, "schemas: %d compiled, %d refused (%d in SchemaStore's skiptest, not run)\n", compiled, refused, len(r.skipTest))
	fmt.Fprintf(w, "instances (JSON): %d agree, %d disagree\n", agree, disagree)
	var ext []string
	for e, n := range r.nonJSON {
		ext = append(ext, fmt.Sprintf("%s %d", e, n))
	}
	sort.Strings(ext)
	fmt.Fprintf(w, "instances skipped, not JSON: %s\n", strings.Join(ext, ", "))
	fmt.Fprintf(w, "compiled schemas the satisfiability check (enqueue) refuses: %d\n", len(r.unsatisfiable))
	for _, o := range r.unsatisfiable {
		fmt.Fprintf(w, "  %s: %s\n", o.Schema, o.Detail)
	}
	var total time.Duration
	slow := make([]string, 0, len(r.compileTime))
	for name, d := range r.compileTime {
		total += d
		slow = append(slow, name)
	}
	sort.Slice(slow, func(i, j int) bool { return r.compileTime[slow[i]] > r.compileTime[slow[j]] })
	var top []string
	for _, name := range slow[:min(5, len(slow))] {
		top = append(top, fmt.Sprintf("%s %v", name, r.compileTime[name].Round(time.Millisecond)))
	}
	fmt.Fprintf(w, "compile and satisfiability check: %v in all; slowest: %s\n", total.Round(time.Millisecond), strings.Join(top, ", "))
	if len(r.orphan) > 0 {
		fmt.Fprintf(w, "test directories without a schema in the copy: %s\n", strings.Join(r.orphan, ", "))
	}
	groups := map[string][]ssOutcome{}
	for _, o := range r.outcomes {
		if !o.Agree {
			c := causeOf(o)
			groups[c] = append(groups[c], o)
		}
	}
	causes := make([]string, 0, len(groups))
	for c := range groups {
		causes = append(causes, c)
	}
	sort.Slice(causes, func(i, j int) bool {
		if len(groups[causes[i]]) != len(groups[causes[j]]) {
			return len(groups[causes[i]]) > len(groups[causes[j]])
		}
		return causes[i] < causes[j]
	})
	for _, c := range causes {
		fmt.Fprintf(w, "\n[%d] %s\n", len(groups[c]), c)
		for _, o := range groups[c] {
			fmt.Fprintf(w, "  %s\t%s\n", o.key(), o.Detail)
		}
	}
}

func TestSchemaStoreFull(t *testing.T) {
	dir := os.Getenv("SCHEMASTORE_DIR")
	if dir == "" {
		t.Skip("SCHEMASTORE_DIR is not set: this measures a full SchemaStore copy (see docs/schemastore.md); TestSchemaStoreSample runs over the committed sample")
	}
	src := filepath.Join(dir, "src")
	if _, err := os.Stat(filepath.Join(src, "schemas", "json")); err != nil {
		t.Fatalf("SCHEMASTORE_DIR=%s is not a SchemaStore copy (no src/schemas/json): %v", dir, err)
	}
	run := runSchemaStore(t, src)
	var sb strings.Builder
	run.report(&sb)
	t.Log("\n" + sb.String())
	if out := os.Getenv("SCHEMASTORE_REPORT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// schemaStoreSampleExceptions lists every case of the committed sample whose
// outcome differs from SchemaStore's: a schema refused ("<schema>"; its
// instances are covered too) or an instance whose verdict disagrees
// ("<schema>/<test|negative_test>/<file>"), each with its reason.
// TestSchemaStoreSample fails on a disagreement not listed here and on a
// listed case that agrees.
// Reasons shared by several exceptions.
const (
	// base-04.json's "license" refers to "osi-license", which it meant as the
	// draft-04 "id" of its "osi-license" definition, but that definition has
	// none (its siblings do). Ajv compiles only what the root reaches and
	// never sees it; compile checks every reference in the document.
	ssDanglingRef = `SchemaStore's schema is wrong: "$ref": "osi-license" names no schema (the definition lacks "id": "osi-license")`
	// "const" arrived in draft-06: under a draft-04 "$schema" it is an
	// unknown keyword and is ignored, as the spec says, so a oneOf branch
	// holding only consts matches every value. Ajv's draft-04 mode applies
	// "const" anyway.
	ssDraft04Const = `the draft-04 schema uses "const" (draft-06 and later), ignored in draft-04: a oneOf branch of consts matches everything`
	// Draft-07 and earlier ignore every keyword beside "$ref" (the
	// JSON-Schema-Test-Suite holds validators to it); Ajv 8 applies them.
	ssRefSiblings = `the draft-07 schema puts "required" beside "$ref", where draft-07 ignores it: the local_repo branch accepts a hook without "entry"`
	// RFC 3339 requires a UTC offset (Z or ±hh:mm); ajv-formats 2.1.1, which
	// SchemaStore uses, compares a missing offset (undefined) with "" and so
	// accepts none.
	ssDateTimeOffset = `SchemaStore's test is wrong: "2018-12-14T10:00:00" has no UTC offset, which RFC 3339 date-time requires`
)

var schemaStoreSampleExceptions = map[string]string{
	// Refused schemas.
	"base-04.json": ssDanglingRef,
	// Verdicts.
	"pre-commit-config.json/negative_test/local-missing-entry.json": ssRefSiblings,
	"es6importsorterrc.json/test/es6importsorterrc-test.json":       ssDraft04Const,
	"function.json/test/BlobTrigger.json":                           ssDraft04Const,
	"function.json/test/EventHubTrigger.json":                       ssDraft04Const,
	"function.json/test/ExternalFileTrigger.json":                   ssDraft04Const,
	"function.json/test/ExternalTable.json":                         ssDraft04Const,
	"function.json/test/FaceLocator.json":                           ssDraft04Const,
	"function.json/test/GenericWebHook.json":                        ssDraft04Const,
	"function.json/test/GitHubCommenter.json":                       ssDraft04Const,
	"function.json/test/GitHubWebHook.json":                         ssDraft04Const,
	"function.json/test/HttpGET(CRUD).json":                         ssDraft04Const,
	"function.json/test/HttpPOST(CRUD).json":                        ssDraft04Const,
	"function.json/test/HttpPUT(CRUD).json":                         ssDraft04Const,
	"function.json/test/HttpTrigger.json":                           ssDraft04Const,
	"function.json/test/ImageResizer.json":                          ssDraft04Const,
	"function.json/test/Kusto.json":                                 ssDraft04Const,
	"function.json/test/ManualTrigger.json":                         ssDraft04Const,
	"function.json/test/MySql.json":                                 ssDraft04Const,
	"function.json/test/QueueTrigger.json":                          ssDraft04Const,
	"function.json/test/SasToken.json":                              ssDraft04Const,
	"function.json/test/ScheduledMail.json":                         ssDraft04Const,
	"function.json/test/SendGrid.json":                              ssDraft04Const,
	"function.json/test/ServiceBusQueueTrigger.json":                ssDraft04Const,
	"function.json/test/ServiceBusTopicTrigger.json":                ssDraft04Const,
	"function.json/test/Sql.json":                                   ssDraft04Const,
	"function.json/test/TimerTrigger.json":                          ssDraft04Const,
	"function.json/test/function.json":                              ssDraft04Const,
	"web-manifest.json/test/W3C Example 1.json":                     ssDraft04Const,
	"webjob-publish-settings.json/test/scheduled.json":              ssDateTimeOffset,
}

func TestSchemaStoreSample(t *testing.T) {
	t.Parallel()
	run := runSchemaStore(t, filepath.Join("testdata", "schemastore", "src"))
	compiled, refused, agree, disagree := run.counts()
	t.Logf("SchemaStore sample: %d schemas compiled, %d refused; %d instances agree, %d disagree", compiled, refused, agree, disagree)
	// The sample must not shrink unnoticed into a test that checks little.
	if compiled+refused < 50 || agree+disagree < 250 {
		t.Fatalf("the sample has %d schemas and %d instances; want at least 50 and 250", compiled+refused, agree+disagree)
	}
	if len(run.nonJSON) > 0 || len(run.orphan) > 0 {
		t.Errorf("the sample holds instances that are not JSON (%v) or test directories without a schema (%v)", run.nonJSON, run.orphan)
	}
	for _, o := range run.unsatisfiable {
		t.Errorf("%s: compiled but the satisfiability check refuses it: %s", o.Schema, o.Detail)
	}
	refusedSchemas := map[string]bool{}
	seen := map[string]bool{}
	for _, o := range run.outcomes {
		if o.Kind == "schema" && !o.Agree {
			refusedSchemas[o.Schema] = true
		}
		if o.Kind != "schema" && refusedSchemas[o.Schema] {
			continue // covered by the schema's entry
		}
		k := o.key()
		seen[k] = true
		reason, listed := schemaStoreSampleExceptions[k]
		switch {
		case !o.Agree && !listed:
			t.Errorf("%s disagrees with SchemaStore and is not an exception: %s", k, o.Detail)
		case o.Agree && listed:
			t.Errorf("%s now agrees with SchemaStore: remove it from the exceptions (%s)", k, reason)
		}
	}
	for k := range schemaStoreSampleExceptions {
		if !seen[k] {
			t.Errorf("exception %s names no case of the sample", k)
		}
	}
}
