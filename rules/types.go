package rules

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// tkind is the CEL type a place of a value gets from its schema.
type tkind uint8

const (
	tDyn tkind = iota
	tNull
	tBool
	tInt
	tDouble
	tString
	tList
	tMap
	tStruct
)

// ctype is the CEL type of a place of a value, as the schema says, and
// how its JSON value becomes a CEL value.
type ctype struct {
	kind     tkind
	nullable bool
	// name and fields for tStruct: an object with declared properties.
	name   string
	fields map[string]*ctype
	// elem for tList and tMap.
	elem *ctype
}

var dynType = &ctype{kind: tDyn}

// cel returns the CEL type of t.
func (t *ctype) cel() *types.Type {
	var out *types.Type
	switch t.kind {
	case tNull:
		return types.NullType
	case tBool:
		out = types.BoolType
	case tInt:
		out = types.IntType
	case tDouble:
		out = types.DoubleType
	case tString:
		out = types.StringType
	case tList:
		out = types.NewListType(t.elem.cel())
	case tMap:
		out = types.NewMapType(types.StringType, t.elem.cel())
	case tStruct:
		out = types.NewObjectType(t.name)
	default:
		return types.DynType
	}
	if t.nullable {
		return types.NewNullableType(out)
	}
	return out
}

// maxTypes bounds the types one schema's rules make: the places of a
// schema a rule can see, each named by the subschemas that apply there.
const maxTypes = 10_000

// typer gives the places of a schema their CEL types. A place is named by
// the subschemas that apply there (an entry set); an object with declared
// properties becomes an object type of its own, named after them, so that
// a rule naming an undeclared field fails to compile.
type typer struct {
	byKey   map[string]*ctype
	structs map[string]*ctype
	names   map[string]int // how many object types have had a name
	err     error
}

// entry is a subschema that applies at a place, where the value has one
// of the kinds guard (kAll: always).
type entry struct {
	n     *node
	guard kinds
}

// closure returns entries with the subschemas they refer to, their allOf
// and their followed anyOf/oneOf branches, each once, in pointer order.
func closure(entries []entry) []entry {
	at := map[*node]int{}
	var out []entry
	var add func(e entry)
	add = func(e entry) {
		if e.n == nil || e.guard == 0 {
			return
		}
		if i, ok := at[e.n]; ok {
			if out[i].guard|e.guard == out[i].guard {
				return
			}
			out[i].guard |= e.guard
		} else {
			at[e.n] = len(out)
			out = append(out, e)
		}
		for _, r := range e.n.refs {
			add(entry{r, e.guard})
		}
		for _, b := range e.n.branches {
			add(entry{b.n, e.guard & b.kinds})
		}
	}
	for _, e := range entries {
		add(e)
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.n.ptr, b.n.ptr) })
	return out
}

// key names an entry set, compactly: a schema may have thousands of
// sets of many entries each.
func key(entries []entry) string {
	b := make([]byte, 0, 4*len(entries))
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(e.n.id))
		b = append(b, byte(e.guard))
	}
	return string(b)
}

// structName returns a name for the object type of entries, unique among
// the typer's: the pointer of its first subschema, the others counted.
func (ty *typer) structName(entries []entry) string {
	name := "object(#" + entries[0].n.ptr
	if len(entries) > 1 {
		name += fmt.Sprintf(" and %d more", len(entries)-1)
	}
	name += ")"
	ty.names[name]++
	if n := ty.names[name]; n > 1 {
		name += fmt.Sprintf("#%d", n)
	}
	return name
}

// typeOf returns the type of a place where the closed entry set entries
// applies.
func (ty *typer) typeOf(entries []entry) *ctype {
	if len(entries) == 0 {
		return dynType
	}
	k := key(entries)
	if t, ok := ty.byKey[k]; ok {
		return t
	}
	if len(ty.byKey) >= maxTypes {
		if ty.err == nil {
			ty.err = fmt.Errorf("the schema has more than %d places of distinct types for rules to check", maxTypes)
		}
		return dynType
	}
	// A place that contains itself other than through an object (an
	// array of such arrays) is dyn inside itself; an object type takes
	// this entry over with its own before its fields are typed.
	ty.byKey[k] = dynType
	allowed, declared, guarded := kAll, false, kinds(0)
	for _, e := range entries {
		if e.guard != kAll {
			guarded |= e.guard
			continue
		}
		if d, ok := declaredKinds(e.n.obj); ok {
			allowed &= d
			declared = true
		}
	}
	if guarded != 0 {
		allowed &= guarded
	} else if !declared {
		allowed = inferKinds(entries)
	}
	nonNull := allowed &^ kNull
	t := &ctype{kind: tDyn}
	switch nonNull {
	case kObject:
		t = ty.objectType(k, applicable(entries, kObject))
	case kArray:
		t = ty.listType(applicable(entries, kArray))
	case kString:
		t = &ctype{kind: tString}
	case kBool:
		t = &ctype{kind: tBool}
	case kInteger:
		t = &ctype{kind: tInt}
	case kNumber, kFraction:
		t = &ctype{kind: tDouble}
	case 0:
		if allowed == kNull {
			t = &ctype{kind: tNull}
		}
	}
	if allowed&kNull != 0 && t.kind != tDyn && t.kind != tNull {
		n := *t
		n.nullable = true
		t = &n
	}
	ty.byKey[k] = t
	return t
}

// inferKinds returns the kinds of a place no "type" speaks of: an object
// where a keyword of objects is, an array where one of arrays is, any
// value else.
func inferKinds(entries []entry) kinds {
	var obj, arr bool
	for _, e := range entries {
		for _, kw := range []string{"properties", "additionalProperties", "patternProperties", "required"} {
			_, ok := e.n.obj[kw]
			obj = obj || ok
		}
		for _, kw := range []string{"items", "prefixItems"} {
			_, ok := e.n.obj[kw]
			arr = arr || ok
		}
	}
	switch {
	case obj && !arr:
		return kObject
	case arr && !obj:
		return kArray
	}
	return kAll
}

// applicable returns the entries that apply where the value has kind k.
func applicable(entries []entry, k kinds) []entry {
	var out []entry
	for _, e := range entries {
		if e.guard&k != 0 {
			out = append(out, e)
		}
	}
	return out
}

// objectType returns the type of an object where entries apply (k their
// key): an object type with the properties they declare, or, without
// any, a map.
func (ty *typer) objectType(k string, entries []entry) *ctype {
	names := map[string][]entry{}
	for _, e := range entries {
		for name, n := range e.n.props {
			names[name] = append(names[name], entry{n, kAll})
		}
	}
	if len(names) == 0 {
		var adds []entry
		patterns := false
		for _, e := range entries {
			if e.n.additional != nil {
				adds = append(adds, entry{e.n.additional, kAll})
			}
			patterns = patterns || len(e.n.patterns) > 0
		}
		if len(adds) == 1 && !patterns {
			return &ctype{kind: tMap, elem: ty.typeOf(closure(adds))}
		}
		return &ctype{kind: tMap, elem: dynType}
	}
	t := &ctype{kind: tStruct, name: ty.structName(entries), fields: map[string]*ctype{}}
	ty.byKey[k] = t // before the fields: a recursive schema refers to itself
	ty.structs[t.name] = t
	for _, name := range sortedKeys(names) {
		t.fields[name] = ty.typeOf(closure(names[name]))
	}
	return t
}

// listType returns the type of an array where entries apply: a list of
// the type of their "items", of dyn when one of them is a tuple.
func (ty *typer) listType(entries []entry) *ctype {
	var items []entry
	for _, e := range entries {
		if len(e.n.prefix) > 0 {
			return &ctype{kind: tList, elem: dynType}
		}
		if e.n.rest != nil {
			items = append(items, entry{e.n.rest, kAll})
		}
	}
	return &ctype{kind: tList, elem: ty.typeOf(closure(items))}
}

// provider tells the CEL type checker the fields of the schema's object
// types, and leaves every other type to the environment's own provider.
// At run time an object is a map: its fields are read as map keys.
type provider struct {
	types.Provider
	structs map[string]*ctype
}

// FindStructType implements types.Provider.
func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if t, ok := p.structs[name]; ok {
		return sortedKeys(t.fields), true
	}
	return p.Provider.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if t, ok := p.structs[name]; ok {
		f, ok := t.fields[field]
		if !ok {
			return nil, false
		}
		return &types.FieldType{Type: f.cel()}, true
	}
	return p.Provider.FindStructFieldType(name, field)
}

// NewValue implements types.Provider: a rule cannot build a schema object.
func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("rules cannot construct %s", name)
	}
	return p.Provider.NewValue(name, fields)
}

// convert returns v, a JSON value decoded with UseNumber, as the CEL
// value of type t: a number becomes an int64 where t is int and the
// number is integral and fits, a float64 everywhere else.
func convert(v any, t *ctype) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, m := range x {
			out[k] = convert(m, t.member(k))
		}
		return out
	case []any:
		elem := dynType
		if t.kind == tList {
			elem = t.elem
		}
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = convert(m, elem)
		}
		return out
	}
	if f, i, isInt, ok := number(v); ok {
		if t.kind == tInt && isInt {
			return i
		}
		return f
	}
	return v
}

// member returns the type of the member k of an object of type t.
func (t *ctype) member(k string) *ctype {
	switch t.kind {
	case tStruct:
		if f, ok := t.fields[k]; ok {
			return f
		}
	case tMap:
		return t.elem
	}
	return dynType
}

// number reads v as a number: its float64, and its int64 when it is
// integral and fits one.
func number(v any) (f float64, i int64, isInt, ok bool) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return float64(i), i, true, true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !isRange(err) {
			return 0, 0, false, false
		}
		return number(f)
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return x, int64(x), true, true
		}
		return x, 0, false, true
	case float32:
		return number(float64(x))
	case int:
		return float64(x), int64(x), true, true
	case int64:
		return float64(x), x, true, true
	case int32:
		return float64(x), int64(x), true, true
	}
	return 0, 0, false, false
}

// isRange reports whether err is strconv's out-of-range error, which
// still returns the nearest float (±Inf).
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
