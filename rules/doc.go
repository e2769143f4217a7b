// Package rules checks the rules a JSON Schema cannot say (an end date
// after its start date, line items that sum to the total), written in the
// schema as CEL expressions under the keyword x-fixpoint-rules, the way
// Kubernetes' x-kubernetes-validations are:
//
//	"x-fixpoint-rules": [
//	  {"rule": "self.end >= self.start", "message": "end must not be before start", "path": "/end"},
//	  {"rule": "self.lines.map(l, l.qty * l.price).sum() == self.total", "severity": "warn"}
//	]
//
// It is a pure package: values in, values out; no I/O, no logging.
//
// [Compile] reads every x-fixpoint-rules of a schema, types the places of
// the value each rule can see from the schema ("integer" is a CEL int,
// "number" a double, an object with properties an object type whose
// undeclared fields do not compile), and type-checks every rule before any
// value is checked: a rule that does not compile, is not a boolean, names
// a field the schema does not declare, or sits where it never applies is a
// *CompileError naming its place in the schema. [Set.Check] runs the rules
// on a value, each on every place its object's schema applies to (each
// element of an array, each member under additionalProperties), under a
// cost limit per rule and per value, and returns the [Finding]s of the
// rules that failed, each naming the path of the value it is about.
// [Errors] turns them into validation errors (keyword x-fixpoint-rules,
// class semantic) for the repair loop.
//
// The semantics (numbers, missing fields, nulls, arrays, anyOf and oneOf,
// errors at run time, the cost limits) are documented in docs/rules.md.
package rules
