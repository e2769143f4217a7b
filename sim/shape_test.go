package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// ticketsSchema is the schema of cmd/internal/tickets, the batch the demo
// and the benchmark run (copied: that package is internal to cmd).
const ticketsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "ticket_triage",
  "type": "object",
  "properties": {
    "category": {"enum": ["billing", "bug", "account", "feature_request", "shipping", "other"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "sentiment": {"enum": ["negative", "neutral", "positive"]},
    "summary": {"type": "string", "minLength": 10, "maxLength": 200},
    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}, "maxItems": 5, "uniqueItems": true},
    "needs_human": {"type": "boolean"}
  },
  "required": ["category", "priority", "sentiment", "summary", "needs_human"],
  "additionalProperties": false
}`

// promptRequest is an OpenAI prompt-mode request of task user for schema.
func promptRequest(user, schema string) map[string]any {
	return map[string]any{
		"model": "gpt-4o",
		"user":  user,
		"messages": []any{
			map[string]any{"role": "system", "content": "Fill in the schema.\n" + fixpoint.SchemaMarkerOpen + "\n" + schema + "\n" + fixpoint.SchemaMarkerClose + "\n"},
			map[string]any{"role": "user", "content": "Task " + user + "."},
		},
	}
}

// headerFault is one entry of X-Sim-Faults.
type headerFault struct {
	kind FaultKind
	ptr  string
}

func parseFaultHeader(h string) []headerFault {
	var out []headerFault
	for _, e := range strings.Split(h, ",") {
		if e == "" {
			continue
		}
		k, p, _ := strings.Cut(e, ":")
		out = append(out, headerFault{FaultKind(k), p})
	}
	return out
}

// decodeJSON decodes JSON text with numbers as json.Number.
func decodeJSON(t testing.TB, text string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", text, err)
	}
	return v
}

// canon is v's JSON text with sorted keys, numbers as written.
func canon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(decodeCanon(t, b))
}

func decodeCanon(t testing.TB, b []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return out
}

// testCoerce is the schema-guided local repair the shape faults are made
// for, written from their description: it returns the value that replaces
// v at a location whose schema node is m (drop: the property goes), or
// refuses.
func testCoerce(m map[string]any, required bool, v any) (out any, drop, ok bool) {
	types, _ := typesOf(m)
	has := func(t string) bool { return slices.Contains(types, t) }
	switch x := v.(type) {
	case nil:
		if !required && !has("null") {
			return nil, true, true
		}
	case string:
		if has("string") && !hasEnum(m) {
			return nil, false, false
		}
		if has("number") || has("integer") {
			if regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`).MatchString(x) {
				return json.Number(x), false, true
			}
		}
		if has("boolean") && (x == "true" || x == "false") {
			return x == "true", false, true
		}
		var match []string
		for _, a := range allowed(m) {
			if strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(x)) {
				match = append(match, a)
			}
		}
		if len(match) == 1 {
			return match[0], false, true
		}
	}
	if _, isArr := v.([]any); !isArr && v != nil && has("array") {
		return []any{v}, false, true
	}
	return nil, false, false
}

// oneKind is a mix with only fault kind k, at probability p.
func oneKind(k FaultKind, p float64) Mix {
	var m Mix
	m.Set(k, p)
	return m
}

// TestShapeFaultsWriteWhatTheySay checks each shape fault against its
// description: where it goes (only allowed places), what it writes, that
// nothing else in the reply differs from the truth, and that the local
// repair gives back the truth for the lossless kinds and refuses the lossy.
func TestShapeFaultsWriteWhatTheySay(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{"order": orderSchema, "tickets": ticketsSchema, "invoice": InvoiceSchema}
	for _, k := range shapeKinds {
		if k == FaultRenamedKey {
			continue // it moves a value rather than writing one: TestRenamedKeyWritesWhatItSays
		}
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			lossless := k != FaultNumberProse && k != FaultEnumSynonym
			for name, schema := range schemas {
				doc, err := parseSchema([]byte(schema))
				if err != nil {
					t.Fatal(err)
				}
				s := New(Config{Seed: 17, Mix: oneKind(k, 1), Now: fixedNow})
				const jobs = 120
				seen := 0
				for i := range jobs {
					user := fmt.Sprintf("%s-%d", name, i)
					text, got, truth, hf := firstReply(t, s, user, schema)
					if len(hf) == 0 {
						if canon(t, got) != canon(t, truth) {
							t.Fatalf("%s: no fault in the header, reply %s differs from the truth", user, text)
						}
						continue
					}
					seen++
					if len(hf) != 1 || hf[0].kind != k {
						t.Fatalf("%s: X-Sim-Faults %v, want one %s", user, hf, k)
					}
					ptr := hf[0].ptr
					checkShapeFault(t, k, doc, ptr, got, truth)
					// Only ptr differs: putting the truth's value back gives the truth.
					fixed := deepCopy(got)
					if tv, ok := pointerGet(truth, ptr); ok {
						pointerSet(fixed, ptr, deepCopy(tv))
					} else {
						pointerDelete(fixed, ptr)
					}
					if canon(t, fixed) != canon(t, truth) {
						t.Fatalf("%s: reply %s differs from the truth elsewhere than %s", user, text, ptr)
					}
					// The local repair.
					i := strings.LastIndexByte(ptr, '/')
					parent := doc.nodeAt(ptr[:i])
					required := requiredSet(parent)[unescapeToken(ptr[i+1:])]
					if pv, _ := pointerGet(got, ptr[:i]); isArray(pv) {
						required = true // an item cannot be dropped
					}
					fv, _ := pointerGet(got, ptr)
					cv, drop, ok := testCoerce(doc.nodeAt(ptr), required, fv)
					if ok != lossless {
						t.Fatalf("%s: local repair of %s %v at %s: ok %v, want %v", user, k, mustJSONString(fv), ptr, ok, lossless)
					}
					if !ok {
						continue
					}
					repaired := deepCopy(got)
					if drop {
						pointerDelete(repaired, ptr)
					} else {
						pointerSet(repaired, ptr, cv)
					}
					if canon(t, repaired) != canon(t, truth) {
						t.Fatalf("%s: repaired %s is not the truth %s", user, canon(t, repaired), canon(t, truth))
					}
				}
				t.Logf("%s on %s: %d of %d replies", k, name, seen, jobs)
				// Every schema has places for every kind in some truths, and
				// for most kinds in every truth.
				min := jobs * 9 / 10
				switch {
				case k == FaultSingleForArray && name == "order", k == FaultSingleForArray && name == "tickets":
					min = jobs / 10 // a one-item array
				case k == FaultSingleForArray && name == "invoice":
					min = jobs / 8 // references, when present with one item
				case k == FaultNullOptional:
					min = jobs / 5 // an optional property left out
				}
				if seen < min {
					t.Errorf("%s on %s: %d of %d replies, want at least %d", k, name, seen, jobs, min)
				}
			}
		})
	}
}

// TestRenamedKeyWritesWhatItSays checks renamed_key against its
// description: the property of the truth is under its misspelling, which no
// property of the node declares, holding the truth's value, and nothing else
// differs; the header names the missing property, the misspelt one, or
// both; and validate's safe coercion gives back the truth with one
// rename_key repair.
func TestRenamedKeyWritesWhatItSays(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{"order": orderSchema, "tickets": ticketsSchema, "invoice": InvoiceSchema}
	for name, schema := range schemas {
		doc, err := parseSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		sch, err := validate.Compile([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		s := New(Config{Seed: 17, Mix: oneKind(FaultRenamedKey, 1), Now: fixedNow})
		const jobs = 120
		seen := 0
		for i := range jobs {
			user := fmt.Sprintf("%s-%d", name, i)
			text, got, truth, hf := firstReply(t, s, user, schema)
			if len(hf) == 0 {
				t.Fatalf("%s: no fault in the header; every truth has a property to misspell", user)
			}
			seen++
			var missing, extra string
			for _, f := range hf {
				if f.kind != FaultRenamedKey {
					t.Fatalf("%s: X-Sim-Faults %v, want only renamed_key", user, hf)
				}
				if _, ok := pointerGet(got, f.ptr); ok {
					extra = f.ptr
				} else {
					missing = f.ptr
				}
			}
			if missing == "" { // an optional property: only the misspelling is reported
				i := strings.LastIndexByte(extra, '/')
				for _, n := range slices.Sorted(maps.Keys(doc.nodeAt(extra[:i])["properties"].(map[string]any))) {
					if misspell(n) == unescapeToken(extra[i+1:]) {
						missing = extra[:i] + "/" + escapeToken(n)
					}
				}
			}
			i := strings.LastIndexByte(missing, '/')
			parent, real := missing[:i], unescapeToken(missing[i+1:])
			wrong := misspell(real)
			if extra != "" && extra != parent+"/"+escapeToken(wrong) {
				t.Fatalf("%s: header %v: %s is not the misspelling of %s", user, hf, extra, missing)
			}
			node := doc.nodeAt(parent)
			props, _ := node["properties"].(map[string]any)
			if _, declared := props[wrong]; declared || !requiredSet(node)[real] && node["additionalProperties"] != false {
				t.Fatalf("%s: %s misspelt as %q: declared, or the rename passes unseen", user, missing, wrong)
			}
			obj, _ := pointerGet(got, parent)
			m := obj.(map[string]any)
			if _, has := m[real]; has {
				t.Fatalf("%s: %s is still there", user, missing)
			}
			tv, _ := pointerGet(truth, missing)
			if canon(t, m[wrong]) != canon(t, tv) {
				t.Fatalf("%s: %q holds %s, the truth at %s is %s", user, wrong, canon(t, m[wrong]), missing, canon(t, tv))
			}
			fixed, fixes, errs := repair.Coerce(sch, got, fixpoint.CoerceSafe)
			if len(errs) != 0 || len(fixes) != 1 || fixes[0].Kind != repair.KindRenameKey || fixes[0].Pointer != missing || canon(t, fixed) != canon(t, truth) {
				t.Fatalf("%s: safe coercion of %s gave %s with %v and errors %v, want the truth with one rename_key at %s", user, text, canon(t, fixed), fixes, errs, missing)
			}
		}
		t.Logf("renamed_key on %s: %d of %d replies", name, seen, jobs)
	}
}

// firstReply asks s for user's first attempt at schema and returns the
// reply's text and value, the truth, and the faults X-Sim-Faults names.
func firstReply(t *testing.T, s *Server, user, schema string) (text string, got, truth any, faults []headerFault) {
	t.Helper()
	body := promptRequest(user, schema)
	rec := do(t, s, "/v1/chat/completions", body)
	text, _ = openAIText(t, rec.Body.Bytes())
	truth, _ = s.Truth(user, []byte(schema), userText(body))
	return text, decodeJSON(t, text), truth, parseFaultHeader(rec.Header().Get("X-Sim-Faults"))
}

func mustJSONString(v any) string { return string(mustJSON(v)) }

func isArray(v any) bool {
	_, ok := v.([]any)
	return ok
}

// checkShapeFault checks what fault k wrote at ptr in got, against the truth.
func checkShapeFault(t *testing.T, k FaultKind, doc *schemaDoc, ptr string, got, truth any) {
	t.Helper()
	gv, gok := pointerGet(got, ptr)
	tv, tok := pointerGet(truth, ptr)
	node := doc.nodeAt(ptr)
	types, inferred := typesOf(node)
	if !gok {
		t.Fatalf("%s at %s: nothing there in the reply", k, ptr)
	}
	if k != FaultNullOptional && !tok {
		t.Fatalf("%s at %s: the truth has nothing there", k, ptr)
	}
	str, isStr := gv.(string)
	switch k {
	case FaultScalarAsString:
		want := ""
		switch x := tv.(type) {
		case json.Number:
			want = string(x)
		case bool:
			want = fmt.Sprint(x)
		default:
			t.Fatalf("scalar_as_string at %s: truth %v is not a number or boolean", ptr, tv)
		}
		if !isStr || str != want || inferred || slices.Contains(types, "string") {
			t.Fatalf("scalar_as_string at %s: wrote %v for %v (types %v), want the string %q", ptr, mustJSONString(gv), tv, types, want)
		}
	case FaultNumberProse:
		n, ok := tv.(json.Number)
		if !ok || !isStr || slices.Contains(types, "string") {
			t.Fatalf("number_prose at %s: wrote %v for %v", ptr, mustJSONString(gv), tv)
		}
		f, _ := n.Float64()
		name := unescapeToken(ptr[strings.LastIndexByte(ptr, '/')+1:])
		about := "about " + roundSig(f, 2)
		unit := unitFor(name)
		if str != about && (unit == "" || str != string(n)+" "+unit) {
			t.Fatalf("number_prose at %s: wrote %q for %s, want %q or %q", ptr, str, n, about, string(n)+" "+unit)
		}
	case FaultEnumCase:
		v, _ := tv.(string)
		cands := []string{capitalize(v), strings.ToUpper(v), strings.ToLower(v), " " + v, v + " "}
		if !isStr || str == v || !slices.Contains(cands, str) || enumMatches(node, str) || foldMatches(node, str) != 1 {
			t.Fatalf("enum_case at %s: wrote %q for %q (allowed %v)", ptr, str, v, allowed(node))
		}
	case FaultEnumSynonym:
		v, _ := tv.(string)
		want, ok := synonyms[strings.ToLower(v)]
		switch {
		case ok:
		case strings.ContainsAny(v, "_-"):
			want = capitalize(strings.NewReplacer("_", " ", "-", " ").Replace(v))
		default:
			want = "similar to " + v
		}
		if !isStr || str != want || enumMatches(node, str) || foldMatches(node, str) != 0 {
			t.Fatalf("enum_synonym at %s: wrote %q for %q, want %q, matching no allowed value", ptr, str, v, want)
		}
	case FaultSingleForArray:
		arr, ok := tv.([]any)
		if !ok || len(arr) != 1 || canon(t, gv) != canon(t, arr[0]) {
			t.Fatalf("single_for_array at %s: wrote %v for %v, want its one item", ptr, mustJSONString(gv), mustJSONString(tv))
		}
	case FaultNullOptional:
		i := strings.LastIndexByte(ptr, '/')
		name := unescapeToken(ptr[i+1:])
		if gv != nil || tok || requiredSet(doc.nodeAt(ptr[:i]))[name] || inferred || slices.Contains(types, "null") {
			t.Fatalf("null_optional at %s: wrote %v (truth has it: %v, types %v)", ptr, mustJSONString(gv), tok, types)
		}
	}
}

// TestShapeFaultRates checks that each shape fault appears at its rate
// where it always has a place (the tickets schema: a number, a boolean,
// two enums), the lossy ones included.
func TestShapeFaultRates(t *testing.T) {
	t.Parallel()
	mix := Mix{Refusal: 0.02, Empty: 0.02, ScalarAsString: 0.10, EnumCase: 0.08, NumberProse: 0.06, EnumSynonym: 0.05}
	s := New(Config{Seed: 23, Mix: mix, Now: fixedNow})
	const n = 4000
	for i := range n {
		if rec := do(t, s, "/v1/chat/completions", promptRequest(fmt.Sprintf("rate-%d", i), ticketsSchema)); rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
	}
	st := s.Stats()
	carrier := 1 - mix.Refusal - mix.Empty
	for _, k := range []FaultKind{FaultScalarAsString, FaultEnumCase, FaultNumberProse, FaultEnumSynonym} {
		within(t, string(k), st.Faults[k], n, mix.Prob(k)*carrier)
	}
	for _, k := range []FaultKind{FaultWrongType, FaultEnumViolation, FaultSingleForArray, FaultNullOptional} {
		if st.Faults[k] != 0 {
			t.Errorf("%s: %d replies, want none", k, st.Faults[k])
		}
	}
}

// TestShapeFaultsLeaveContentFaultsInPlace checks that adding shape faults
// to a mix keeps every other fault of every reply where it was: shape faults
// come from a seed stream of their own.
func TestShapeFaultsLeaveContentFaultsInPlace(t *testing.T) {
	t.Parallel()
	messy, _ := Preset("messy")
	without := messy
	for _, k := range shapeKinds {
		without.Mix.Set(k, 0)
	}
	messy.Seed, without.Seed = 31, 31
	messy.Now, without.Now = fixedNow, fixedNow
	a, b := New(without), New(messy)
	added := 0
	for i := range 400 {
		body := orderRequest(fmt.Sprintf("keep-%d", i))
		fa := parseFaultHeader(do(t, a, "/v1/chat/completions", body).Header().Get("X-Sim-Faults"))
		fb := parseFaultHeader(do(t, b, "/v1/chat/completions", body).Header().Get("X-Sim-Faults"))
		for _, f := range fa {
			if f.kind == FaultTruncation || f.kind == FaultRefusal || f.kind == FaultEmpty || slices.Contains(allFaultKinds[:6], f.kind) {
				if !slices.Contains(fb, f) {
					t.Fatalf("job %d: %v without shape faults, %v with: %v moved", i, fa, fb, f)
				}
				continue
			}
			if !slices.Contains(fb, f) {
				t.Fatalf("job %d: %v without shape faults, %v with: content fault %v moved", i, fa, fb, f)
			}
		}
		for _, f := range fb {
			if !slices.Contains(fa, f) {
				if !slices.Contains(shapeKinds, f.kind) {
					t.Fatalf("job %d: %v with shape faults adds %v", i, fb, f)
				}
				added++
			}
		}
	}
	if added < 50 {
		t.Errorf("messy added %d shape faults to 400 replies, want more", added)
	}
}

// exactFeedbackFor is the correction the repair step writes: validate's
// messages, one a line.
func exactFeedbackFor(res validate.CheckResult) string {
	var b strings.Builder
	b.WriteString("Your reply did not match the JSON Schema. Fix every error below:\n")
	for i, e := range res.Errors {
		fmt.Fprintf(&b, "%d. %s\n", i+1, e.Message)
	}
	return b.String()
}

// TestCorrectionsFixShapeFaults checks that a correction naming a shape
// fault fixes it (back to the truth, null_optional by leaving the property
// out), and that one that does not keeps it under its own kind.
func TestCorrectionsFixShapeFaults(t *testing.T) {
	t.Parallel()
	sch, err := validate.Compile([]byte(ticketsSchema))
	if err != nil {
		t.Fatal(err)
	}
	mix := Mix{ScalarAsString: 0.4, EnumCase: 0.4, SingleForArray: 0.6, NullOptional: 0.6, NumberProse: 0.4, EnumSynonym: 0.4, RenamedKey: 0.4}
	fixing := New(Config{Seed: 41, Mix: mix, FixProb: 1, Now: fixedNow})
	stubborn := New(Config{Seed: 41, Mix: mix, FixProb: -1, Now: fixedNow})
	tested := map[FaultKind]int{}
	for i := range 300 {
		user := fmt.Sprintf("fix-%d", i)
		body := promptRequest(user, ticketsSchema)
		rec := do(t, fixing, "/v1/chat/completions", body)
		text, _ := openAIText(t, rec.Body.Bytes())
		first := parseFaultHeader(rec.Header().Get("X-Sim-Faults"))
		res := validate.Check(sch, text)
		if len(first) == 0 {
			continue
		}
		if res.Valid {
			t.Fatalf("%s: faults %v but the reply validates", user, first)
		}
		for _, f := range first {
			tested[f.kind]++
		}
		msgs := append(body["messages"].([]any), map[string]any{"role": "assistant", "content": text},
			map[string]any{"role": "user", "content": exactFeedbackFor(res)})
		body["messages"] = msgs
		rec = do(t, fixing, "/v1/chat/completions", body)
		fixed, _ := openAIText(t, rec.Body.Bytes())
		truth, _ := fixing.Truth(user, []byte(ticketsSchema), userText(body))
		if got := rec.Header().Get("X-Sim-Faults"); got != "" || canon(t, decodeJSON(t, fixed)) != canon(t, truth) {
			t.Fatalf("%s: correction of %v gave %s (faults %q), want the truth %s", user, first, fixed, got, canon(t, truth))
		}
		rec = do(t, stubborn, "/v1/chat/completions", body)
		if got := parseFaultHeader(rec.Header().Get("X-Sim-Faults")); !reflect.DeepEqual(got, first) {
			t.Fatalf("%s: a correction that fixes nothing has faults %v, want the first attempt's %v", user, got, first)
		}
	}
	for _, k := range shapeKinds {
		if tested[k] < 10 {
			t.Errorf("%s: in %d first attempts, want at least 10", k, tested[k])
		}
	}
}

// classSplit runs jobs first attempts of cfg on schema and returns how
// many end in each class (ClassNone: valid), how many of the failed ones
// have only faults of lossless kinds, and how many have only faults whose
// value testCoerce repairs to the truth (a wrong_type "42" or an
// enum_violation "PENDING" too).
func classSplit(t *testing.T, cfg Config, schema string, jobs int) (counts map[fixpoint.Class]int, byKind, byValue int) {
	t.Helper()
	sch, err := validate.Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := parseSchema([]byte(schema))
	lossless := map[FaultKind]bool{}
	for _, info := range FaultKindInfos() {
		lossless[info.Kind] = info.Lossless
	}
	s := New(cfg)
	counts = map[fixpoint.Class]int{}
	for i := range jobs {
		user := fmt.Sprintf("job-%d", i)
		body := promptRequest(user, schema)
		rec := do(t, s, "/v1/chat/completions", body)
		text, _ := openAIText(t, rec.Body.Bytes())
		res := validate.Check(sch, text)
		counts[res.Class]++
		if res.Valid || res.Class == fixpoint.ClassSyntax {
			continue
		}
		truth, _ := s.Truth(user, []byte(schema), userText(body))
		kinds, values := true, true
		for _, f := range parseFaultHeader(rec.Header().Get("X-Sim-Faults")) {
			kinds = kinds && lossless[f.kind]
			if lossless[f.kind] {
				continue
			}
			v, _ := pointerGet(res.Value, f.ptr)
			tv, _ := pointerGet(truth, f.ptr)
			i := strings.LastIndexByte(f.ptr, '/')
			required := i < 0 || requiredSet(doc.nodeAt(f.ptr[:i]))[unescapeToken(f.ptr[i+1:])]
			if pv, _ := pointerGet(res.Value, f.ptr[:max(i, 0)]); isArray(pv) {
				required = true
			}
			cv, drop, ok := testCoerce(doc.nodeAt(f.ptr), required, v)
			values = values && ok && !drop && canon(t, cv) == canon(t, tv)
		}
		if kinds {
			byKind++
		}
		if values {
			byValue++
		}
	}
	return counts, byKind, byValue
}

// TestMessyFirstAttemptClassSplit measures the failure classes of messy
// first attempts (2,000 on the benchmark's tickets schema, 1,000 on the
// order schema), with and without the shape faults: shape failures stay
// about 60% of the failures.
func TestMessyFirstAttemptClassSplit(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name, schema string
		jobs         int
	}{{"tickets", ticketsSchema, 2000}, {"order", orderSchema, 1000}} {
		jobs := sc.jobs
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			after, _ := Preset("messy")
			after.Seed, after.Now = 1, fixedNow
			before := after
			for _, k := range shapeKinds {
				before.Mix.Set(k, 0)
			}
			share := func(label string, cfg Config) float64 {
				c, byKind, byValue := classSplit(t, cfg, sc.schema, jobs)
				failed := jobs - c[fixpoint.ClassNone]
				pct := func(n int) float64 { return 100 * float64(n) / float64(failed) }
				t.Logf("%s messy %s: %d of %d first attempts failed: syntax %d (%.1f%%), shape %d (%.1f%%), semantic %d (%.1f%%); "+
					"locally repairable: %d (%.1f%%) by fault kind, %d (%.1f%%) by value",
					sc.name, label, failed, jobs, c[fixpoint.ClassSyntax], pct(c[fixpoint.ClassSyntax]), c[fixpoint.ClassShape], pct(c[fixpoint.ClassShape]),
					c[fixpoint.ClassSemantic], pct(c[fixpoint.ClassSemantic]), byKind, pct(byKind), byValue, pct(byValue))
				return float64(c[fixpoint.ClassShape]) / float64(failed)
			}
			b, a := share("before shape faults", before), share("with shape faults", after)
			if a < 0.55 || a > 0.66 || math.Abs(a-b) > 0.03 {
				t.Errorf("shape share of failed first attempts: %.3f with shape faults, %.3f before; want about 0.60 and within 3 points", a, b)
			}
		})
	}
}

// TestTruthAccessors checks Server.Truth (in any formatting of the schema
// a request carried), TruthFor and TaskKey against what a clean server
// answers.
func TestTruthAccessors(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 99, Now: fixedNow})
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(orderSchema)); err != nil {
		t.Fatal(err)
	}
	// A request with a user id, the schema indented in the prompt.
	text, _ := openAIText(t, do(t, s, "/v1/chat/completions", orderRequest("acc-1")).Body.Bytes())
	for _, schema := range []string{orderSchema, compact.String(), "\n" + orderSchema + "\n"} {
		truth, err := s.Truth("acc-1", []byte(schema), userText(orderRequest("acc-1")))
		if err != nil {
			t.Fatal(err)
		}
		if canon(t, truth) != canon(t, decodeJSON(t, text)) {
			t.Fatalf("Truth with the schema as %.20q...: %s, want the reply %s", schema, canon(t, truth), text)
		}
	}
	pure, err := TruthFor([]byte(orderSchema), 99, "acc-1", userText(orderRequest("acc-1")))
	if err != nil || canon(t, pure) != canon(t, decodeJSON(t, text)) {
		t.Fatalf("TruthFor = %v, %v; want the reply %s", pure, err, text)
	}
	// A schema in another formatting than the one sent seeds another truth:
	// TruthFor, with no requests seen, takes the text as given.
	if other, _ := TruthFor(compact.Bytes(), 99, "acc-1", userText(orderRequest("acc-1"))); canon(t, other) == canon(t, pure) {
		t.Errorf("TruthFor of the compact schema equals the indented one's: the seed should be the text")
	}
	// Without a user id the key is a hash of the first user message.
	body := orderRequest("x")
	delete(body, "user")
	text, _ = openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
	key := TaskKey("", body["messages"].([]any)[1].(map[string]any)["content"].(string))
	truth, _ := s.Truth(key, []byte(orderSchema), userText(body))
	if canon(t, truth) != canon(t, decodeJSON(t, text)) {
		t.Fatalf("Truth(TaskKey(first user message)) = %s, want the reply %s", canon(t, truth), text)
	}
	if TaskKey("u-1", "anything") != "u-1" {
		t.Errorf("TaskKey with a user id is not the user id")
	}
}

// TestInvoiceTruths checks the array-heavy schema: schema-valid truths with
// 30 to 60 line items, both ends reached, the same for the same seed.
func TestInvoiceTruths(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, InvoiceSchema)
	s := New(Config{Seed: 8, Now: fixedNow})
	counts := map[int]int{}
	for i := range 250 {
		user := fmt.Sprintf("inv-%d", i)
		truth, err := s.Truth(user, []byte(InvoiceSchema), "Invoice "+user)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(decodeValue(t, mustJSON(truth))); err != nil {
			t.Fatalf("%s: truth does not validate: %v", user, err)
		}
		n := len(truth.(map[string]any)["line_items"].([]any))
		if n < 30 || n > 60 {
			t.Fatalf("%s: %d line items, want 30..60", user, n)
		}
		counts[n]++
		if i%10 == 0 {
			if again, _ := TruthFor([]byte(InvoiceSchema), 8, user, "Invoice "+user); canon(t, again) != canon(t, truth) {
				t.Fatalf("%s: truth differs between calls", user)
			}
		}
	}
	if counts[30] == 0 || counts[60] == 0 || len(counts) < 25 {
		t.Errorf("line item counts %v: want 30 to 60, both ends reached", counts)
	}
	// Arrays with shorter bounds keep their 1 to 3 items (and the replies
	// of existing seeds): minItems 1, maxItems 4.
	for i := range 200 {
		truth, _ := s.Truth(fmt.Sprintf("o-%d", i), []byte(orderSchema), "")
		if n := len(truth.(map[string]any)["items"].([]any)); n < 1 || n > 3 {
			t.Fatalf("order items: %d, want 1..3", n)
		}
	}
}

// TestFaultKindTables checks that every fault kind is described, in the
// order of FaultKinds, and has a Mix field Set and Prob agree on.
func TestFaultKindTables(t *testing.T) {
	t.Parallel()
	infos := FaultKindInfos()
	kinds := FaultKinds()
	if len(infos) != len(kinds) {
		t.Fatalf("%d descriptions for %d kinds", len(infos), len(kinds))
	}
	var m Mix
	for i, k := range kinds {
		if infos[i].Kind != k || infos[i].Description == "" || infos[i].Group == "" {
			t.Errorf("description %d: %+v, want kind %s described", i, infos[i], k)
		}
		p := float64(i+1) / 100
		if !m.Set(k, p) || m.Prob(k) != p {
			t.Errorf("Mix.Set(%s, %v): Prob = %v", k, p, m.Prob(k))
		}
	}
	if m.Set("nope", 0.5) {
		t.Errorf("Mix.Set of an unknown kind reports true")
	}
	lossless := map[FaultKind]bool{}
	for _, info := range infos {
		lossless[info.Kind] = info.Lossless
	}
	for _, k := range shapeKinds {
		if want := k != FaultNumberProse && k != FaultEnumSynonym; lossless[k] != want {
			t.Errorf("%s: Lossless %v, want %v", k, lossless[k], want)
		}
	}
}
