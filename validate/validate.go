// Package validate checks values against a JSON Schema: it compiles a
// schema for checking and validates values against it, returning every
// error at once as a flat list with a JSON pointer, the failing keyword, a
// failure class and a message a model can act on, and it chooses the JSON
// value of a reply that fits ([Check]).
//
// It is a pure package: no network, no file system, no logging. What it
// does besides checking values is done by pure packages of their own:
// package subschema reads the schema (the one walker, "$ref" resolution,
// repeated ids, the graph of the compiled schema and the bounds read off
// it), package ecma reads its patterns as ECMA-262, and package satisfy
// tells whether any value satisfies it.
//
// # Schemas
//
// [Compile] accepts JSON Schema 2020-12 (the default when "$schema" is absent)
// and draft-07 (when "$schema" names it); drafts 2019-09, 06 and 04 are also
// accepted because the underlying library (github.com/santhosh-tekuri/jsonschema/v6)
// supports them. A schema may only refer to itself: a "$ref" (or "$schema") that
// points outside the schema document is refused at compile time, so a job's
// schema can never make the worker fetch anything. The standard metaschemas are
// built in and may be referred to.
//
// The "format" keyword is an assertion, in every draft: a value that is not a
// valid "email", "date-time", "uuid", ... fails with class semantic. This
// differs from the 2020-12 default (format as annotation only) on purpose: a
// model asked for a date must produce a date. Unknown formats are ignored.
//
// "pattern" and "patternProperties" are ECMA-262 regular expressions with the
// "u" flag, as JSON Schema says: each is translated to an RE2 pattern of the
// same meaning and matched in linear time (package ecma); what RE2 cannot do
// (lookahead, lookbehind, backreferences) is matched by a backtracking engine
// under a time bound: 100 ms a match, 1 s for all those of one check. A string
// that could not be matched in time is an error (keyword "pattern"), never
// valid (patterns.go).
//
// An id ("$id", draft-04 "id") repeated in several subschemas, as generated
// schemas have them, names the first in the schema's text; the others
// validate as written (subschema.DedupeIDs).
//
// # Errors
//
// [Schema.Validate] returns a flat list of [Error], sorted by path (array
// indexes numerically), then keyword, then message. Each message starts with
// the path of the failing value, or "(root)" for the root value (the Path
// field itself is "" for the root, as in RFC 6901), then says what was expected
// and what was found, e.g.
//
//	/invoice/lines/0/sku: "abc-1" does not match ^[A-Z]{3}-[0-9]{4}$
//	/customer/email: missing required property "email"
//	/age: expected integer, got string "42"
//
// Found values longer than 80 characters are shortened with "...".
//
// A value with more than [MaxErrors] (20,000) errors keeps the first
// MaxErrors and the first of each keyword, then one error of keyword
// [KeywordMoreErrors] that counts the others by keyword ([ErrorCount]
// counts them all); package repair does not coerce such a value. A large value is
// validated piece by piece where the schema allows (pieces.go), so the
// schema library never holds the errors of all of it at once.
//
// Numbers are compared exactly. A number longer than 1000 characters or with
// an exponent beyond ±1000 (in a schema or a value) is refused up front:
// Compile returns a *SchemaError, Validate reports it with keyword "number".
//
// A missing required property is reported at its own pointer, one error per
// property (keyword "required", path "/customer/email" for "email" missing
// from "/customer"; the object that lacks it is that path without its last
// token); likewise a property that is not allowed (additionalProperties,
// unevaluatedProperties, a false subschema, propertyNames). A property missing
// under dependentRequired or draft-07 dependencies is reported at the object,
// the message naming it.
//
// For "anyOf" and "oneOf" with no matching alternative, only the errors of the
// closest alternative are reported: the one with the fewest mismatches at the
// value itself (wrong type, const or enum at the value), then the fewest
// mismatched discriminators (const or enum one level down), then the fewest
// errors overall, then the earliest. When every alternative fails only on the
// value's type (or only on const/enum), the alternatives are merged into one
// error listing everything that was accepted.
//
// # Parts of a value
//
// [Schema.Partial] is the schema a part of a value is checked against: the
// value extracted from one chunk of a long document, before the chunks'
// values are merged. A missing property is no error in it ("required",
// "dependentRequired" and draft-07 "dependencies" lists are dropped, but
// in an "if" or a "not"), and "oneOf" is checked as "anyOf"; every other
// keyword reports as in the schema. The merged value is checked against
// the schema itself.
//
// # Satisfiability
//
// A schema can compile and still accept no value at all ({"$ref": "#"},
// {"enum": []}, a required property that refers back to its parent): every
// reply would fail, and every attempt would be paid for. [Schema.Satisfiable]
// refuses such schemas, before any job uses them, with an error matching
// satisfy.ErrUnsatisfiable (package satisfy is the check). It is
// conservative (it never refuses a schema some value satisfies) and not
// complete.
//
// # Schema-guided repair
//
// Before the worker pays for another model call, package repair can make
// repairs that cannot change what the model meant, each driven by a
// validation error and what the schema wants at its location ("42" -> 42
// where a number is wanted, an enum string off only in letter case, ...).
// The fixes are repair's; this package answers its questions: a
// [Session] is one check of the schema in progress (its validations share
// the check's pattern clock), and its [Reader] says what the schema wants
// ([Wants]: types, allowed strings, required and declared properties) at
// a location. [CheckWith] takes a [Coercer] and calls it on each candidate
// that does not validate before choosing; [Check] makes no repair.
//
// # Classes
//
// Every keyword has a fixed [Class] (see [KeywordClass]); a reply's class is
// the first of syntax, shape, semantic that applies ([ClassOf]).
package validate

import "github.com/fixpoint-dev/fixpoint"

// keywordClasses maps every keyword that can fail to its class. Keywords not
// listed here are semantic (see KeywordClass).
var keywordClasses = map[string]fixpoint.Class{
	// syntax: reserved for extraction.
	"syntax":    fixpoint.ClassSyntax,
	"truncated": fixpoint.ClassSyntax,

	// shape: structure.
	"type":                  fixpoint.ClassShape,
	"required":              fixpoint.ClassShape,
	"additionalProperties":  fixpoint.ClassShape,
	"unevaluatedProperties": fixpoint.ClassShape,
	"unevaluatedItems":      fixpoint.ClassShape,
	"properties":            fixpoint.ClassShape, // a property whose subschema is false
	"patternProperties":     fixpoint.ClassShape, // likewise
	"propertyNames":         fixpoint.ClassShape, // a property name that is not allowed
	"prefixItems":           fixpoint.ClassShape, // an item whose subschema is false
	"items":                 fixpoint.ClassShape, // likewise
	"additionalItems":       fixpoint.ClassShape,
	"minItems":              fixpoint.ClassShape,
	"maxItems":              fixpoint.ClassShape,
	"minProperties":         fixpoint.ClassShape,
	"maxProperties":         fixpoint.ClassShape,
	"dependentRequired":     fixpoint.ClassShape,
	"dependencies":          fixpoint.ClassShape, // draft-07 form of dependentRequired
	"false":                 fixpoint.ClassShape, // a value where the schema is false
	"checkCost":             fixpoint.ClassShape, // too costly to check against a recursive schema

	// semantic: values.
	"enum":             fixpoint.ClassSemantic,
	"const":            fixpoint.ClassSemantic,
	"minimum":          fixpoint.ClassSemantic,
	"maximum":          fixpoint.ClassSemantic,
	"exclusiveMinimum": fixpoint.ClassSemantic,
	"exclusiveMaximum": fixpoint.ClassSemantic,
	"multipleOf":       fixpoint.ClassSemantic,
	"minLength":        fixpoint.ClassSemantic,
	"maxLength":        fixpoint.ClassSemantic,
	"pattern":          fixpoint.ClassSemantic,
	"format":           fixpoint.ClassSemantic,
	"uniqueItems":      fixpoint.ClassSemantic,
	"contains":         fixpoint.ClassSemantic,
	"minContains":      fixpoint.ClassSemantic,
	"maxContains":      fixpoint.ClassSemantic,
}

// KeywordClass returns the failure class of a schema keyword:
//
//   - syntax: "syntax" and "truncated", the pseudo-keywords of extraction;
//   - shape: type, required, additionalProperties, unevaluatedProperties,
//     unevaluatedItems, a false subschema under properties, patternProperties,
//     prefixItems, items or additionalItems, propertyNames, minItems, maxItems,
//     minProperties, maxProperties, dependentRequired and draft-07
//     dependencies, and "false" (the whole schema is false);
//   - semantic: enum, const, minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum, multipleOf, minLength, maxLength, pattern, format,
//     uniqueItems, contains, minContains, maxContains.
//
// Any other keyword (e.g. "not", an ambiguous "oneOf", "number" for a number
// out of the supported range, extension keywords) is semantic.
func KeywordClass(keyword string) fixpoint.Class {
	if c, ok := keywordClasses[keyword]; ok {
		return c
	}
	return fixpoint.ClassSemantic
}

// ClassOf returns the class of a list of errors: the first of syntax, shape,
// semantic, evidence that any error has, or ClassNone when errs is empty. An error with
// an empty Class counts as the class of its keyword.
func ClassOf(errs []fixpoint.ValidationError) fixpoint.Class {
	var shape, semantic, evidence bool
	for _, e := range errs {
		c := e.Class
		if c == fixpoint.ClassNone {
			c = KeywordClass(e.Keyword)
		}
		switch c {
		case fixpoint.ClassSyntax:
			return fixpoint.ClassSyntax
		case fixpoint.ClassShape:
			shape = true
		case fixpoint.ClassEvidence:
			evidence = true
		default:
			semantic = true
		}
	}
	switch {
	case shape:
		return fixpoint.ClassShape
	case semantic:
		return fixpoint.ClassSemantic
	case evidence:
		return fixpoint.ClassEvidence
	}
	return fixpoint.ClassNone
}
