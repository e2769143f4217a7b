package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// testApply is a small RFC 6902 applier (add, remove, replace, test), kept
// apart from the simulator's own: it applies ops to a copy of doc, all or
// nothing.
func testApply(doc any, ops []any) (any, error) {
	doc = deepCopy(doc)
	for i, o := range ops {
		m, ok := o.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("op %d is not an object", i)
		}
		op, _ := m["op"].(string)
		path, ok := m["path"].(string)
		if !ok {
			return nil, fmt.Errorf("op %d has no path", i)
		}
		val, hasVal := m["value"]
		if (op == "add" || op == "replace" || op == "test") != hasVal {
			return nil, fmt.Errorf("op %d: %s with value %v", i, op, hasVal)
		}
		var toks []string
		if path != "" {
			if path[0] != '/' {
				return nil, fmt.Errorf("op %d: bad path %q", i, path)
			}
			for _, t := range strings.Split(path[1:], "/") {
				toks = append(toks, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
			}
		}
		var err error
		if doc, err = testOp(doc, toks, op, val); err != nil {
			return nil, fmt.Errorf("op %d (%s %s): %w", i, op, path, err)
		}
	}
	return doc, nil
}

var errNoPath = errors.New("path does not exist")

// testOp applies one operation at toks under node and returns the new node.
func testOp(node any, toks []string, op string, val any) (any, error) {
	if len(toks) == 0 {
		switch op {
		case "add", "replace":
			return deepCopy(val), nil
		case "test":
			if string(mustJSON(node)) != string(mustJSON(val)) {
				return nil, errors.New("test failed")
			}
			return node, nil
		}
		return nil, fmt.Errorf("%s of the root", op)
	}
	tok, last := toks[0], len(toks) == 1
	switch x := node.(type) {
	case map[string]any:
		child, exists := x[tok]
		if !last {
			if !exists {
				return nil, errNoPath
			}
			nc, err := testOp(child, toks[1:], op, val)
			if err != nil {
				return nil, err
			}
			x[tok] = nc
			return x, nil
		}
		switch {
		case op == "add":
			x[tok] = deepCopy(val)
		case !exists:
			return nil, errNoPath
		case op == "remove":
			delete(x, tok)
		case op == "replace":
			x[tok] = deepCopy(val)
		case op == "test":
			if string(mustJSON(child)) != string(mustJSON(val)) {
				return nil, errors.New("test failed")
			}
		default:
			return nil, fmt.Errorf("unknown op %q", op)
		}
		return x, nil
	case []any:
		i, err := strconv.Atoi(tok)
		if tok == "-" && last && op == "add" {
			i, err = len(x), nil
		}
		if err != nil || i < 0 || i > len(x) || (tok != "0" && strings.HasPrefix(tok, "0")) {
			return nil, errNoPath
		}
		if !last {
			if i == len(x) {
				return nil, errNoPath
			}
			nc, err := testOp(x[i], toks[1:], op, val)
			if err != nil {
				return nil, err
			}
			x[i] = nc
			return x, nil
		}
		if op == "add" {
			return slices.Insert(x, i, deepCopy(val)), nil
		}
		if i == len(x) {
			return nil, errNoPath
		}
		switch op {
		case "remove":
			return slices.Delete(x, i, i+1), nil
		case "replace":
			x[i] = deepCopy(val)
		case "test":
			if string(mustJSON(x[i])) != string(mustJSON(val)) {
				return nil, errors.New("test failed")
			}
		default:
			return nil, fmt.Errorf("unknown op %q", op)
		}
		return x, nil
	}
	return nil, errNoPath
}

func TestTestApply(t *testing.T) {
	t.Parallel()
	doc := decodeJSON(t, `{"a":[1,2,3],"b":{"c":"x"}}`)
	got, err := testApply(doc, decodeJSON(t, `[{"op":"replace","path":"/a/1","value":9},{"op":"add","path":"/a/0","value":0},
		{"op":"remove","path":"/b/c"},{"op":"add","path":"/b/d","value":true},{"op":"add","path":"/a/-","value":4},{"op":"test","path":"/a/2","value":9}]`).([]any))
	if err != nil || canon(t, got) != `{"a":[0,1,9,3,4],"b":{"d":true}}` {
		t.Fatalf("testApply = %s, %v", canon(t, got), err)
	}
	for _, bad := range []string{`[{"op":"replace","path":"/z","value":1}]`, `[{"op":"remove","path":"/a/3"}]`,
		`[{"op":"add","path":"/x/y","value":1}]`, `[{"op":"replace","path":"/a/01","value":1}]`, `[{"op":"add","path":"/a/4","value":1}]`} {
		if _, err := testApply(doc, decodeJSON(t, bad).([]any)); err == nil {
			t.Errorf("testApply(%s) applied", bad)
		}
	}
}

// patchTurn is what a patch request is about: the request, the value it
// asks to patch, the errors, the truth.
type patchTurn struct {
	user  string
	body  map[string]any // the first attempt's request
	prev  string         // its reply
	value any            // the value validate extracted from it
	errs  []fixpoint.ValidationError
	truth any
}

// patchRequest builds the request the repair step's patch strategy sends:
// the first attempt's messages, then one user turn with the value in a
// ```json block between the previous-reply markers, its errors and the ask.
// quoted false sends the conversation form instead (the reply as an
// assistant message, then the ask).
func patchRequest(t *testing.T, base map[string]any, prevText string, value any, errs []fixpoint.ValidationError, quoted bool) map[string]any {
	t.Helper()
	var fb strings.Builder
	for i, e := range errs {
		fmt.Fprintf(&fb, "%d. %s\n", i+1, e.Message)
	}
	body := map[string]any{}
	for k, v := range base {
		body[k] = v
	}
	msgs := slices.Clone(base["messages"].([]any))
	if quoted {
		text := "Correct your previous JSON value with an RFC 6902 JSON Patch.\n\n" + fixpoint.PreviousReplyOpen + "\n```json\n" +
			string(mustJSON(value)) + "\n```\n" + fixpoint.PreviousReplyClose + "\n\nIts errors:\n" + fb.String() +
			"\nReply with the patch only: a JSON array of operations that touch only these locations."
		msgs = append(msgs, map[string]any{"role": "user", "content": text})
	} else {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": prevText},
			map[string]any{"role": "user", "content": "Reply with a JSON Patch (RFC 6902) that fixes only these errors:\n" + fb.String()})
	}
	body["messages"] = msgs
	return body
}

// patchOf extracts the patch array of a reply.
func patchOf(t testing.TB, text string) []any {
	t.Helper()
	cands, err := extract.Extract(text)
	if err != nil {
		t.Fatalf("extract %q: %v", text, err)
	}
	for _, c := range cands {
		if _, ok := c.Value.([]any); ok && !c.Truncated {
			return decodeJSON(t, string(c.JSON)).([]any)
		}
	}
	t.Fatalf("no JSON array in %q", text)
	return nil
}

// inScope reports whether path is at or under one of the errors' paths.
func inScope(path string, errs []fixpoint.ValidationError) bool {
	return slices.ContainsFunc(errs, func(e fixpoint.ValidationError) bool {
		return e.Path == "" || path == e.Path || strings.HasPrefix(path, e.Path+"/")
	})
}

// faultyTurns runs first attempts of s on schema until it has n whose
// value parses and fails the schema.
func faultyTurns(t *testing.T, s *Server, schema, prefix string, n int) []patchTurn {
	t.Helper()
	sch, err := validate.Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	var out []patchTurn
	for i := 0; len(out) < n; i++ {
		if i > 20*n {
			t.Fatalf("%d faulty first attempts in %d", len(out), i)
		}
		user := fmt.Sprintf("%s-%d", prefix, i)
		body := promptRequest(user, schema)
		text, _ := openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
		res := validate.Check(sch, text)
		if res.Valid || res.Class == fixpoint.ClassSyntax {
			continue
		}
		truth, _ := s.Truth(user, []byte(schema), userText(body))
		out = append(out, patchTurn{user: user, body: body, prev: text, value: decodeJSON(t, string(mustJSON(res.Value))), errs: res.Errors, truth: truth})
	}
	return out
}

func (pt patchTurn) request(t *testing.T, quoted bool) map[string]any {
	return patchRequest(t, pt.body, pt.prev, pt.value, pt.errs, quoted)
}

// TestPatchRepliesGiveTheTruth checks that, without patch faults and with
// every named fault fixed, a patch reply applies to the value it was asked
// about and gives the ground truth, touching only the failing locations,
// in both request forms, fenced or not, on the three schemas.
func TestPatchRepliesGiveTheTruth(t *testing.T) {
	t.Parallel()
	mix := Mix{WrongType: 0.3, MissingRequired: 0.3, ExtraProperty: 0.3, EnumViolation: 0.3, OutOfRange: 0.3,
		ScalarAsString: 0.3, EnumCase: 0.3, SingleForArray: 0.5, NullOptional: 0.5, NumberProse: 0.3, EnumSynonym: 0.3,
		Fence: 0.3, Prose: 0.3}
	for name, schema := range map[string]string{"order": orderSchema, "tickets": ticketsSchema, "invoice": InvoiceSchema} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := New(Config{Seed: 5, Mix: mix, FixProb: 1, Now: fixedNow})
			sch, _ := validate.Compile([]byte(schema))
			fenced := 0
			turns := faultyTurns(t, s, schema, name, 150)
			for i, pt := range turns {
				rec := do(t, s, "/v1/chat/completions", pt.request(t, i%2 == 0))
				text, _ := openAIText(t, rec.Body.Bytes())
				if rec.Header().Get("X-Sim-Patch") != "1" {
					t.Fatalf("%s: no X-Sim-Patch on %q", pt.user, text)
				}
				if strings.Contains(text, "```") {
					fenced++
				}
				ops := patchOf(t, text)
				got, err := testApply(pt.value, ops)
				if err != nil {
					t.Fatalf("%s: patch %s does not apply to %s: %v", pt.user, text, canon(t, pt.value), err)
				}
				if canon(t, got) != canon(t, pt.truth) {
					t.Fatalf("%s: patched value %s, want the truth %s", pt.user, canon(t, got), canon(t, pt.truth))
				}
				if errs := sch.Validate(got); len(errs) != 0 {
					t.Fatalf("%s: patched value has errors %v", pt.user, errs)
				}
				for _, o := range ops {
					if p := o.(map[string]any)["path"].(string); !inScope(p, pt.errs) {
						t.Fatalf("%s: op at %s, outside the errors %v", pt.user, p, pt.errs)
					}
				}
				if h := rec.Header().Get("X-Sim-Faults"); strings.Trim(strings.ReplaceAll(strings.ReplaceAll(h, "fence", ""), "prose", ""), ",") != "" {
					t.Fatalf("%s: X-Sim-Faults %q on a patch that gives the truth", pt.user, h)
				}
			}
			if fenced == 0 || fenced == len(turns) {
				t.Errorf("%d of %d patches fenced, want some (Mix.Fence 0.3)", fenced, len(turns))
			}
			if st := s.Stats(); st.Patches != int64(len(turns)) {
				t.Errorf("Stats.Patches = %d, want %d", st.Patches, len(turns))
			}
		})
	}
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// TestPatchFixesWithFixProb checks that a patch fixes each named fault
// with FixProb, like a correction, and names what it left.
func TestPatchFixesWithFixProb(t *testing.T) {
	t.Parallel()
	mix := Mix{WrongType: 0.5, MissingRequired: 0.5, ExtraProperty: 0.5, EnumViolation: 0.5, OutOfRange: 0.5, ScalarAsString: 0.5, NullOptional: 0.5}
	s := New(Config{Seed: 6, Mix: mix, FixProb: 0.7, Now: fixedNow})
	faults, left := 0, 0
	for _, pt := range faultyTurns(t, s, orderSchema, "fp", 400) {
		rec := do(t, s, "/v1/chat/completions", pt.request(t, true))
		text, _ := openAIText(t, rec.Body.Bytes())
		got, err := testApply(pt.value, patchOf(t, text))
		if err != nil {
			t.Fatalf("%s: %v", pt.user, err)
		}
		before := len(parseFaultHeader(firstFaults(t, s, pt.user)))
		after := parseFaultHeader(rec.Header().Get("X-Sim-Faults"))
		faults += before
		left += len(after)
		for _, f := range after {
			gv, _ := pointerGet(got, f.ptr)
			tv, inTruth := pointerGet(pt.truth, f.ptr)
			if inTruth && f.kind != FaultMissingRequired && canon(t, gv) == canon(t, tv) {
				t.Fatalf("%s: %v listed as left, but the patched value has the truth there", pt.user, f)
			}
		}
	}
	within(t, "faults left by patches", int64(left), faults, 0.3)
}

// firstFaults is the X-Sim-Faults of user's first attempt on orderSchema.
func firstFaults(t *testing.T, s *Server, user string) string {
	return do(t, s, "/v1/chat/completions", promptRequest(user, orderSchema)).Header().Get("X-Sim-Faults")
}

// TestPatchFaults checks each patch fault: what it does to the patch, and
// that it appears at its rate.
func TestPatchFaults(t *testing.T) {
	t.Parallel()
	// Every first attempt misses a required property (an add to spoil) and
	// has a wrong type (a replace); the order schema always has a value
	// without an error for an extra op.
	base := Mix{MissingRequired: 1, WrongType: 1, ScalarAsString: 0.5}
	for _, k := range patchKinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			const p = 0.3
			mix := base
			mix.Set(k, p)
			s := New(Config{Seed: 12, Mix: mix, FixProb: 1, Now: fixedNow})
			turns := faultyTurns(t, s, orderSchema, string(k), 500)
			hits := 0
			for _, pt := range turns {
				rec := do(t, s, "/v1/chat/completions", pt.request(t, false))
				text, _ := openAIText(t, rec.Body.Bytes())
				ops := patchOf(t, text)
				var spoiled []headerFault
				for _, f := range parseFaultHeader(rec.Header().Get("X-Sim-Faults")) {
					if slices.Contains(patchKinds, f.kind) {
						spoiled = append(spoiled, f)
					}
				}
				got, err := testApply(pt.value, ops)
				if len(spoiled) == 0 {
					if err != nil || canon(t, got) != canon(t, pt.truth) {
						t.Fatalf("%s: unspoiled patch %s: %v, %s; want the truth", pt.user, text, err, canon(t, got))
					}
					continue
				}
				hits++
				if len(spoiled) != 1 || spoiled[0].kind != k {
					t.Fatalf("%s: patch faults %v, want one %s", pt.user, spoiled, k)
				}
				path := spoiled[0].ptr
				var op map[string]any
				for _, o := range ops {
					if o.(map[string]any)["path"] == path {
						op = o.(map[string]any)
					}
				}
				if op == nil {
					t.Fatalf("%s: no op at %s in %s", pt.user, path, text)
				}
				switch k {
				case FaultPatchBadPointer:
					if err == nil || inScope(path, pt.errs) {
						t.Fatalf("%s: bad pointer %s: patch %s applied (%v) or the path is an error's", pt.user, path, text, err)
					}
					if op["op"] == "add" {
						i := strings.LastIndexByte(path, '/')
						parent, ok := pointerGet(pt.value, path[:i])
						_, isObj := parent.(map[string]any)
						n, err := strconv.Atoi(path[i+1:])
						if arr, isArr := parent.([]any); ok && (isObj || isArr && err == nil && n <= len(arr)) {
							t.Fatalf("%s: bad pointer %s for add: its parent takes it", pt.user, path)
						}
					} else if _, ok := pointerGet(pt.value, path); ok {
						t.Fatalf("%s: bad pointer %s exists", pt.user, path)
					}
				case FaultPatchWrongOp:
					// The op is the wrong one for the error at its path.
					var e *fixpoint.ValidationError
					for i := range pt.errs {
						if pt.errs[i].Path == path {
							e = &pt.errs[i]
						}
					}
					if e == nil {
						t.Fatalf("%s: wrong op at %s, no error there (%v)", pt.user, path, pt.errs)
					}
					want := "replace"
					if e.Keyword == "required" {
						want = "add"
					}
					if op["op"] == want {
						t.Fatalf("%s: wrong op at %s is %s, the right one for %s", pt.user, path, want, e.Keyword)
					}
					if err == nil && canon(t, got) == canon(t, pt.truth) {
						t.Fatalf("%s: patch with a wrong op %s gives the truth", pt.user, text)
					}
				case FaultPatchExtraOp:
					if inScope(path, pt.errs) || op["op"] != "replace" {
						t.Fatalf("%s: extra op %v inside the errors %v", pt.user, op, pt.errs)
					}
					if err != nil {
						t.Fatalf("%s: patch with an extra op does not apply: %v", pt.user, err)
					}
				}
			}
			within(t, string(k), int64(hits), len(turns), p)
		})
	}
}

// TestPatchFallsBackToTheFullValue checks the requests a patch cannot
// answer, and that a request without the marker is a plain correction.
func TestPatchFallsBackToTheFullValue(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 2, Mix: Mix{Truncation: 1, WrongType: 1}, FixProb: 1, Now: fixedNow})
	body := orderRequest("fb-1")
	first, _ := openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
	truth, _ := s.Truth("fb-1", []byte(orderSchema), userText(body))
	ask := func(prev string) (string, string) {
		b := orderRequest("fb-1")
		b["messages"] = append(b["messages"].([]any), map[string]any{"role": "assistant", "content": prev},
			map[string]any{"role": "user", "content": "Send a JSON Patch fixing /total and /items/0/qty."})
		rec := do(t, s, "/v1/chat/completions", b)
		text, _ := openAIText(t, rec.Body.Bytes())
		return text, rec.Header().Get("X-Sim-Patch")
	}
	for name, prev := range map[string]string{"truncated": first, "refused": RefusalText, "root wrong": `[1, 2]`, "empty": ""} {
		text, patch := ask(prev)
		if patch != "" {
			t.Fatalf("%s: a patch %q, want the full value", name, text)
		}
		// The full value: the corrected truth, or for a root at fault
		// (which a correction cannot name) the value again.
		if v := decodeJSON(t, text); !isObject(v) && name != "root wrong" || isArray(v) && name != "root wrong" {
			t.Fatalf("%s: reply %q is not the full value", name, text)
		}
	}
	// No faults named: an empty patch.
	clean := New(Config{Seed: 2, Now: fixedNow})
	tv := string(mustJSON(truth))
	b := orderRequest("fb-1")
	b["messages"] = append(b["messages"].([]any), map[string]any{"role": "assistant", "content": tv},
		map[string]any{"role": "user", "content": "Reply with a JSON Patch fixing /notes."})
	if text, _ := openAIText(t, do(t, clean, "/v1/chat/completions", b).Body.Bytes()); text != "[]" {
		t.Errorf("patch of a value without faults: %q, want []", text)
	}
	// Without the marker: a correction, the full value.
	b["messages"] = append(b["messages"].([]any)[:2:2], map[string]any{"role": "assistant", "content": `{"total": "x"}`},
		map[string]any{"role": "user", "content": "Fix /total; reply with the whole JSON (a json patch would do too)."})
	rec := do(t, s, "/v1/chat/completions", b)
	if rec.Header().Get("X-Sim-Patch") != "" {
		t.Errorf("a request without %q got a patch", PatchMarker)
	}
}

// TestPatchTokensOnInvoices compares the output tokens of patch and full
// re-asks on invoices of 30 to 60 line items: a patch's usage is its own
// size.
func TestPatchTokensOnInvoices(t *testing.T) {
	t.Parallel()
	messy, _ := Preset("messy")
	messy.Mix.Refusal, messy.Mix.Empty, messy.Mix.Truncation = 0, 0, 0
	messy.Seed, messy.FixProb, messy.NewFaultProb, messy.Now = 3, 1, 0, fixedNow
	s := New(messy)
	usage := func(body map[string]any) (string, int) {
		rec := do(t, s, "/v1/chat/completions", body)
		var r struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		text, _ := openAIText(t, rec.Body.Bytes())
		if r.Usage.CompletionTokens != tokens(len(text)) {
			t.Fatalf("completion tokens %d for %d bytes", r.Usage.CompletionTokens, len(text))
		}
		return text, r.Usage.CompletionTokens
	}
	var patchTok, fullTok int
	turns := faultyTurns(t, s, InvoiceSchema, "tok", 40)
	for _, pt := range turns {
		_, pTok := usage(pt.request(t, true))
		full := pt.request(t, true)
		msgs := full["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		msgs[len(msgs)-1] = map[string]any{"role": "user", "content": strings.ReplaceAll(last["content"].(string), "RFC 6902 JSON Patch", "edit")}
		text, fTok := usage(full)
		if v, ok := parseReply(text); !ok || !isObject(v) {
			t.Fatalf("full re-ask reply %.80q is not a value", text)
		}
		patchTok += pTok
		fullTok += fTok
	}
	t.Logf("invoices: %d patch requests, output tokens: patch %d (%.0f a reply), full re-ask %d (%.0f a reply)",
		len(turns), patchTok, float64(patchTok)/float64(len(turns)), fullTok, float64(fullTok)/float64(len(turns)))
	if patchTok*10 > fullTok {
		t.Errorf("patch replies use %d output tokens, full re-asks %d: want patches under a tenth", patchTok, fullTok)
	}
}

// TestPatchDeterministic checks that a patch reply is a function of the
// seed and the request.
func TestPatchDeterministic(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Seed, cfg.Now = 13, fixedNow
	turns := faultyTurns(t, New(cfg), orderSchema, "det", 30)
	a, b := New(cfg), New(cfg)
	other := cfg
	other.Seed = 14
	c := New(other)
	differ := 0
	for _, pt := range turns {
		ra := do(t, a, "/v1/chat/completions", pt.request(t, true)).Body.String()
		if rb := do(t, b, "/v1/chat/completions", pt.request(t, true)).Body.String(); ra != rb {
			t.Fatalf("%s: patch replies differ:\n%s\n%s", pt.user, ra, rb)
		}
		if rc := do(t, c, "/v1/chat/completions", pt.request(t, true)).Body.String(); ra != rc {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("seeds 13 and 14 gave the same patch replies")
	}
}
