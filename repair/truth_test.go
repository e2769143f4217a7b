package repair_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// truthSchema has a place for every kind of schema-guided fix: integers,
// numbers and booleans, enums, an optional property, arrays.
const truthSchema = `{
  "type": "object",
  "properties": {
    "category": {"enum": ["billing", "bug", "account", "feature_request", "shipping", "other"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "score": {"type": "number", "minimum": 0, "maximum": 1},
    "sentiment": {"enum": ["negative", "neutral", "positive"]},
    "summary": {"type": "string", "minLength": 10, "maxLength": 200},
    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}, "maxItems": 5},
    "needs_human": {"type": "boolean"}
  },
  "required": ["category", "priority", "sentiment", "summary", "needs_human"],
  "additionalProperties": false
}`

// Over 10,000 first replies of the messy simulator, every value the safe
// schema-guided repairs changed equals the simulator's ground truth at that
// place, and a dropped property is one the truth does not have: coercion
// never changes what the model meant. And no error is left for the model
// that a safe fix would have turned into the truth: none is missed. (The simulator's lossy faults, like
// "about 4" for an integer, are refused and go to the model.)
func TestCoercionsMatchTheTruth(t *testing.T) {
	t.Parallel()
	n := 10000
	if testing.Short() {
		n = 1000
	}
	cfg, err := sim.Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 5
	srv, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	client, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: url + "/v1", APIKey: "sim",
		Lane: llm.LaneConfig{MaxConcurrency: 64, InitialConcurrency: 64}})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := validate.Compile([]byte(truthSchema))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fixes, checked, lossyRefused := map[string]int{}, 0, 0
	missed := map[string]int{} // errors a fix of the safe kinds would have turned into the truth
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				job := &repair.Job{ID: fmt.Sprintf("truth-%05d", i), Schema: schema, SchemaRaw: []byte(truthSchema), Model: "sim-messy",
					Prompt: fmt.Sprintf("Triage ticket %d.", i), Limits: fixpoint.Limits{MaxAttempts: 1}}
				step, err := repair.Start(job, nil, repair.Config{})
				if err != nil {
					t.Error(err)
					return
				}
				act := step.Next()
				started := time.Now()
				resp, err := client.Complete(context.Background(), *act.Request)
				if err != nil {
					t.Errorf("job %s: %v", job.ID, err)
					return
				}
				a, _ := step.Feed(resp, nil, started)
				truth, err := srv.Truth(job.ID, []byte(truthSchema), job.Prompt)
				if err != nil {
					t.Error(err)
					return
				}
				var value any
				if len(a.Value) > 0 {
					dec := json.NewDecoder(strings.NewReader(string(a.Value)))
					dec.UseNumber()
					_ = dec.Decode(&value)
				}
				if a.Class == fixpoint.OutcomeTruncated && a.Coerced != 0 {
					t.Errorf("job %s: a reply cut off at max_tokens got %d fixes; want none (what it ends in is cut)", job.ID, a.Coerced)
				}
				mu.Lock()
				for _, e := range a.Errors {
					if a.Class == fixpoint.OutcomeTruncated {
						break // not coerced: see above
					}
					if e.Keyword == "type" && strings.Contains(e.Message, "got string") {
						lossyRefused++
					}
					if kind := missedFix(value, truth, e); kind != "" {
						missed[kind]++
						if missed[kind] <= 3 {
							t.Errorf("job %s: %s error at %q left for the model, but a %s fix would give the truth", job.ID, e.Keyword, e.Path, kind)
						}
					}
				}
				for _, f := range a.Repairs[len(a.Repairs)-a.Coerced:] {
					fixes[f.Kind]++
					checked++
					want, ok := at(truth, f.Pointer)
					if f.Kind == repair.KindRenameKey {
						// The value moved is the truth's (or was made so by a
						// later fix, checked on its own); the old name is not
						// the truth's.
						got, _ := at(value, f.Pointer)
						var from string
						_ = json.Unmarshal(f.Before, &from)
						old := f.Pointer[:strings.LastIndexByte(f.Pointer, '/')] + "/" + strings.ReplaceAll(strings.ReplaceAll(from, "~", "~0"), "/", "~1")
						if _, inTruth := at(truth, old); !ok || inTruth || !equalValues(got, want) {
							t.Errorf("job %s: %s moved %s to %s holding %v, the truth there is %v", job.ID, f.Kind, from, f.Pointer, got, want)
						}
						continue
					}
					switch {
					case f.After == nil && ok:
						t.Errorf("job %s: %s dropped %s, which the truth has (%v)", job.ID, f.Kind, f.Pointer, want)
					case f.After != nil && !sameJSON(f.After, want):
						t.Errorf("job %s: %s set %s to %s, the truth is %v (before %s)", job.ID, f.Kind, f.Pointer, f.After, want, f.Before)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d fixes checked against the truth over %d jobs: %v; %d string values refused; %v errors left that a safe fix would have turned into the truth", checked, n, fixes, lossyRefused, missed)
	for _, kind := range []string{repair.KindCoerceNumber, repair.KindCoerceBoolean, repair.KindEnumCase, repair.KindDropNull, repair.KindWrapArray, repair.KindRenameKey} {
		if fixes[kind] == 0 {
			t.Errorf("no %s fix in %d jobs: the check did not cover it", kind, n)
		}
	}
	if len(missed) > 0 {
		t.Errorf("errors left for the model that a safe fix would have turned into the truth: %v", missed)
	}
	if lossyRefused == 0 {
		t.Error("no lossy string was refused: the simulator's lossy faults did not reach the check")
	}
}

// missedFix names the safe fix that would have turned the value at e's
// location into the truth there, if one would have: the coercions' recall
// against the simulator's lossless faults (with --coerce none, it names
// every fix safe makes). "" when none would.
func missedFix(value, truth any, e fixpoint.ValidationError) string {
	ptr := e.Path
	if kind := missedRename(value, truth, e); kind != "" {
		return kind
	}
	got, gotOK := at(value, ptr)
	want, wantOK := at(truth, ptr)
	switch {
	case gotOK && got == nil && !wantOK:
		return repair.KindDropNull
	case !gotOK || !wantOK:
		return ""
	}
	if s, ok := got.(string); ok {
		t := strings.TrimSpace(s)
		switch w := want.(type) {
		case bool:
			if t == strconv.FormatBool(w) {
				return repair.KindCoerceBoolean
			}
		case string:
			if s != w && strings.EqualFold(t, w) {
				return repair.KindEnumCase
			}
		default:
			if n := json.Number(t); t != "" && equalValues(n, want) {
				return repair.KindCoerceNumber
			}
		}
	}
	if arr, ok := want.([]any); ok && len(arr) == 1 && equalValues(got, arr[0]) {
		return repair.KindWrapArray
	}
	return ""
}

// missedRename is missedFix for a property under another case or
// separators of its name: a missing required one the value holds under
// such a name, or an extra one that is such a name of a property of the
// truth the value lacks, holding the truth's value.
func missedRename(value, truth any, e fixpoint.ValidationError) string {
	i := strings.LastIndexByte(e.Path, '/')
	if i < 0 {
		return ""
	}
	parent, name := e.Path[:i], e.Path[i+1:]
	obj, _ := at(value, parent)
	tobj, _ := at(truth, parent)
	have, _ := obj.(map[string]any)
	want, _ := tobj.(map[string]any)
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	switch e.Keyword {
	case "required":
		for k, v := range have {
			if k != name && fold(k) == fold(name) && equalValues(v, want[name]) {
				return repair.KindRenameKey
			}
		}
	case "additionalProperties":
		for k, v := range want {
			if _, has := have[k]; !has && k != name && fold(k) == fold(name) && equalValues(have[name], v) {
				return repair.KindRenameKey
			}
		}
	}
	return ""
}

// at returns the value at a JSON pointer.
func at(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			x, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// sameJSON compares a fix's value with the truth's, numbers by value.
func sameJSON(raw json.RawMessage, want any) bool {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var got any
	if dec.Decode(&got) != nil {
		return false
	}
	return equalValues(got, want)
}

func equalValues(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		ra, ok1 := new(big.Rat).SetString(x.String())
		var rb *big.Rat
		ok2 := false
		switch y := b.(type) {
		case json.Number:
			rb, ok2 = new(big.Rat).SetString(y.String())
		case float64:
			rb, ok2 = new(big.Rat).SetFloat64(y), true
		case int:
			rb, ok2 = big.NewRat(int64(y), 1), true
		case int64:
			rb, ok2 = big.NewRat(y, 1), true
		}
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !equalValues(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}
