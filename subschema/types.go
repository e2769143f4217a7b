package subschema

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Types is a set of the types of JSON value a schema allows, an integer
// (1, 1.0) and a number that is not one told apart.
type Types uint8

// The types of Types.
const (
	TypeNull Types = 1 << iota
	TypeBoolean
	TypeInteger  // an integer (1, 1.0)
	TypeFraction // a number that is not an integer
	TypeString
	TypeObject
	TypeArray

	TypeNumber Types = TypeInteger | TypeFraction
	TypeAny    Types = TypeNull | TypeBoolean | TypeNumber | TypeString | TypeObject | TypeArray
)

// String names the types: "string or integer", "value" for all of them.
func (t Types) String() string {
	switch t {
	case 0:
		return "nothing"
	case TypeAny:
		return "value"
	}
	var names []string
	for _, n := range []struct {
		t    Types
		name string
	}{
		{TypeNull, "null"}, {TypeBoolean, "boolean"}, {TypeNumber, "number"}, {TypeInteger, "integer"},
		{TypeFraction, "non-integer number"}, {TypeString, "string"}, {TypeObject, "object"}, {TypeArray, "array"},
	} {
		if t&n.t == n.t {
			names = append(names, n.name)
			t &^= n.t
		}
	}
	return strings.Join(names, " or ")
}

// TypeOf is the type of a value as decoded by the schema library or by
// extract (a json.Number is an integer when its value is integral).
func TypeOf(v any) Types {
	switch v.(type) {
	case nil:
		return TypeNull
	case bool:
		return TypeBoolean
	case string:
		return TypeString
	case map[string]any:
		return TypeObject
	case []any:
		return TypeArray
	}
	r, ok := new(big.Rat).SetString(fmt.Sprint(v))
	if !ok {
		return TypeNumber
	}
	if r.IsInt() {
		return TypeInteger
	}
	return TypeFraction
}

// TypesOf are the types a compiled "type" keyword allows.
func TypesOf(t *jsonschema.Types) Types {
	var k Types
	for _, name := range t.ToStrings() {
		switch name {
		case "null":
			k |= TypeNull
		case "boolean":
			k |= TypeBoolean
		case "integer":
			k |= TypeInteger
		case "number":
			k |= TypeNumber
		case "string":
			k |= TypeString
		case "object":
			k |= TypeObject
		case "array":
			k |= TypeArray
		}
	}
	return k
}
