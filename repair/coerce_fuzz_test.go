package repair

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// coerceFuzzSchemas are the schemas FuzzCoerce picks from: every repair,
// alternatives, recursion, draft-07.
var coerceFuzzSchemas = []string{
	schematest.TypicalSchema,
	objSchema,
	petSchema,
	listSchema,
	intSchema,
	`{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","required":["q"],"properties":{"q":{"type":"integer"},"ok":{"type":"boolean"},"s":{"enum":["Low","low ","HIGH"]}}}}`,
	`{"anyOf":[{"type":"number","maximum":10},{"type":"null"},{"type":"array","items":{"enum":["a","B"]}}]}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"integer"}},"type":"object","additionalProperties":false,
	  "properties":{"a":{"$ref":"#/definitions/n"},"b":{"type":"array","items":[{"type":"boolean"}],"additionalItems":false},"c":{"const":"Yes"}}}`,
	renameSchema,
	`{"type":"object","required":["a_b"],"properties":{"a_b":{"type":"integer"},"ab_c":{"enum":["x"]}},"dependentRequired":{"a_b":["c"]},
	  "oneOf":[{"properties":{"k":{"const":"Yes"}}},{"required":["Id"]}]}`,
	`{"type":"object","properties":{"u":{"type":"array","uniqueItems":true,"items":{"type":"integer"}},"m":{"type":"integer","multipleOf":3,"minimum":0}},
	  "patternProperties":{"^x":{"type":"boolean"}},"minProperties":1,"dependentRequired":{"m":["u"]}}`,
}

// FuzzCoerce checks Coerce's invariants for any value against the schemas
// above: with fixpoint.CoerceNone nothing changes; otherwise the value returned has
// exactly the errors returned, never more than the input had; replaying the
// repairs on the input, each one's Before is the value at its Pointer and
// the result is the value returned; a number keeps its value and text, a
// string loses only surrounding white space and letter case; the input is
// not modified.
func FuzzCoerce(f *testing.F) {
	schemas := make([]*validate.Schema, len(coerceFuzzSchemas))
	for i, src := range coerceFuzzSchemas {
		schemas[i] = mustCompile(f, src)
	}
	for _, tc := range coerceCases {
		for i := range schemas {
			f.Add(tc.value, uint8(i))
		}
	}
	f.Add(schematest.TypicalInvalid, uint8(0))
	f.Add(`{"id":"INV-004217","status":" Paid","created":"2025-03-01T10:15:00Z","customer":{"name":"A","email":"a@b.co","tier":"PRO"},"lines":{"sku":"ABC-1234","qty":2,"price":"0.5"},"notes":null}`, uint8(0))
	f.Add(`[{"q":"1","s":"LOW"},{"q":2,"ok":"false","s":"high"}]`, uint8(5))
	f.Add(`{"u":["1",1],"m":"6","x1":"true"}`, uint8(10))
	f.Add(`{"CustomerName":" x","Total":"4","TOTAL":1}`, uint8(8))
	f.Add(`{"aB":"1","AbC":"X","id":2}`, uint8(9))
	f.Fuzz(func(t *testing.T, value string, which uint8) {
		v, err := decode([]byte(value))
		if err != nil {
			return
		}
		s := schemas[int(which)%len(schemas)]
		if err := checkCoerce(s, v); err != nil {
			t.Fatalf("schema %d, value %s: %v", int(which)%len(schemas), value, err)
		}
	})
}

// checkCoerce checks Coerce's invariants for one value.
func checkCoerce(s *validate.Schema, v any) error {
	orig, err := encode(v)
	if err != nil {
		return nil
	}
	before := s.Validate(v)
	got, fixes, errs := Coerce(s, v, fixpoint.CoerceNone)
	if len(fixes) != 0 || !reflect.DeepEqual(got, v) || !reflect.DeepEqual(errs, before) {
		return fmt.Errorf("mode none changed something: %v %v", fixes, errs)
	}
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		got, fixes, errs := Coerce(s, v, mode)
		if now, _ := encode(v); !bytes.Equal(now, orig) {
			return fmt.Errorf("%s: input modified: %s, was %s", mode, now, orig)
		}
		if !reflect.DeepEqual(errs, s.Validate(got)) {
			return fmt.Errorf("%s: returned errors %v, the value has %v", mode, errs, s.Validate(got))
		}
		if len(errs) > len(before) {
			return fmt.Errorf("%s: %d errors after, %d before", mode, len(errs), len(before))
		}
		cur := v
		for i, r := range fixes {
			if err := checkRepair(r, mode); err != nil {
				return fmt.Errorf("%s: repair %d %+v: %v", mode, i, r, err)
			}
			toks := validate.SplitPointer(r.Pointer)
			if r.Kind == KindRenameKey {
				var from, to string
				_ = json.Unmarshal(r.Before, &from)
				_ = json.Unmarshal(r.After, &to)
				obj, isObj := lookup(cur, toks[:len(toks)-1]).(map[string]any)
				if !isObj || to != toks[len(toks)-1] {
					return fmt.Errorf("%s: repair %d: no object to rename %q in, or %q is not the pointer's name", mode, i, from, to)
				}
				val, has := obj[from]
				if _, taken := obj[to]; !has || taken {
					return fmt.Errorf("%s: repair %d: %q is not there or %q is", mode, i, from, to)
				}
				renamed := maps.Clone(obj)
				delete(renamed, from)
				renamed[to] = val
				cur = setAt(cur, toks[:len(toks)-1], renamed, false)
				continue
			}
			at, ok := lookupOK(cur, toks)
			if !ok {
				return fmt.Errorf("%s: repair %d: nothing at %q", mode, i, r.Pointer)
			}
			if b, _ := encode(at); !bytes.Equal(b, r.Before) {
				return fmt.Errorf("%s: repair %d: before %s, but the value at %q is %s", mode, i, r.Before, r.Pointer, b)
			}
			if r.After == nil {
				if len(toks) == 0 {
					return fmt.Errorf("%s: repair %d drops the root", mode, i)
				}
				if _, isObj := lookup(cur, toks[:len(toks)-1]).(map[string]any); !isObj {
					return fmt.Errorf("%s: repair %d drops from a non-object", mode, i)
				}
				cur = setAt(cur, toks, nil, true)
				continue
			}
			after, err := decode(r.After)
			if err != nil {
				return fmt.Errorf("%s: repair %d: after %s: %v", mode, i, r.After, err)
			}
			cur = setAt(cur, toks, after, false)
		}
		want, _ := encode(got)
		if replayed, _ := encode(cur); !bytes.Equal(replayed, want) {
			return fmt.Errorf("%s: replaying the repairs gives %s, Coerce returned %s", mode, replayed, want)
		}
		if len(fixes) == 0 && !reflect.DeepEqual(got, v) {
			return fmt.Errorf("%s: no repair but the value changed", mode)
		}
		if err := sameNumbers(v, got, nil); err != nil {
			return fmt.Errorf("%s: %v", mode, err)
		}
	}
	return nil
}

// checkRepair checks one repair keeps what the value meant.
func checkRepair(r fixpoint.Repair, mode fixpoint.CoerceMode) error {
	var before, after any
	if err := json.Unmarshal(r.Before, &before); err != nil {
		return fmt.Errorf("before: %v", err)
	}
	if r.After != nil {
		if err := json.Unmarshal(r.After, &after); err != nil {
			return fmt.Errorf("after: %v", err)
		}
	}
	bs, isStr := before.(string)
	switch r.Kind {
	case KindCoerceNumber:
		if !isStr {
			return fmt.Errorf("before is not a string")
		}
		text := strings.Trim(bs, jsonWhitespace)
		if string(r.After) != text {
			return fmt.Errorf("number text %s, the string held %q", r.After, text)
		}
		b, ok1 := new(big.Rat).SetString(text)
		a, ok2 := new(big.Rat).SetString(string(r.After))
		if !ok1 || !ok2 || a.Cmp(b) != 0 {
			return fmt.Errorf("number value changed")
		}
	case KindCoerceBoolean:
		if !isStr || strconv.Quote(strings.Trim(bs, jsonWhitespace)) != `"`+string(r.After)+`"` {
			return fmt.Errorf("boolean from %q", bs)
		}
	case KindEnumCase, KindConstCase:
		as, ok := after.(string)
		canon := func(s string) string { return norm.NFC.String(strings.TrimSpace(s)) }
		if !isStr || !ok || !strings.EqualFold(canon(bs), canon(as)) || bs == as {
			return fmt.Errorf("%q -> %q is not a case, whitespace or canonical-equivalence change", bs, as)
		}
	case KindWrapArray:
		if string(r.After) != "["+string(r.Before)+"]" || before == nil {
			return fmt.Errorf("not a wrap")
		}
	case KindDropNull:
		if before != nil || r.After != nil {
			return fmt.Errorf("not a null dropped")
		}
	case KindRenameKey:
		as, ok := after.(string)
		if !isStr || !ok || !sameKey(bs, as) {
			return fmt.Errorf("%q -> %q is not a change of case or separators", bs, as)
		}
	case KindDropAdditional:
		if mode != fixpoint.CoerceAll || r.After != nil {
			return fmt.Errorf("drop_additional in mode %s", mode)
		}
	default:
		return fmt.Errorf("unknown kind")
	}
	return nil
}

// sameNumbers checks every number of a that is still at its place in b, as
// a number, has the same value (big.Rat) and text.
func sameNumbers(a, b any, toks []string) error {
	switch x := a.(type) {
	case map[string]any:
		for k, e := range x {
			if err := sameNumbers(e, b, append(toks, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := sameNumbers(e, b, append(toks, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	case json.Number:
		y, ok := lookupOK(b, toks)
		n, isNum := y.(json.Number)
		if !ok || !isNum {
			return nil // dropped, or wrapped: the replay covers them
		}
		ra, ok1 := new(big.Rat).SetString(string(x))
		rb, ok2 := new(big.Rat).SetString(string(n))
		if ok1 != ok2 || ok1 && ra.Cmp(rb) != 0 || x != n {
			return fmt.Errorf("number at %q changed: %s -> %s", validate.Pointer(toks), x, n)
		}
	}
	return nil
}

// TestCoerceInvariants runs FuzzCoerce's checks on the table cases against
// every fuzz schema, so that they run without -fuzz too.
func TestCoerceInvariants(t *testing.T) {
	t.Parallel()
	schemas := make([]*validate.Schema, len(coerceFuzzSchemas))
	for i, src := range coerceFuzzSchemas {
		schemas[i] = mustCompile(t, src)
	}
	for _, tc := range coerceCases {
		v := mustDecode(t, tc.value)
		for i, s := range schemas {
			if err := checkCoerce(s, v); err != nil {
				t.Errorf("schema %d, value %s: %v", i, tc.value, err)
			}
		}
		if err := checkCoerce(mustCompile(t, tc.schema), v); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
