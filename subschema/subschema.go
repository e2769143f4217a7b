// Package subschema reads a JSON Schema document: where its subschemas
// are, what each reference names, and what each subschema applies to a
// value. It is the one reader of schemas; the validator, the
// satisfiability check, the prompt's description of a schema, the
// provider's strict-mode transform and the simulator read them through it.
//
// A schema is read in one of two forms, each with one resolution of
// "$ref":
//
//   - as written: [Walk] visits every subschema at a schema position with
//     its JSON pointer, base URI and depth, and a [Doc] resolves a
//     reference the way the validator does (local pointers, "$id"-relative
//     URIs, anchors; nothing outside the document);
//   - as the schema library compiled it: a [Graph] holds each subschema,
//     what it applies at the same place in a value and to a child, and
//     where a dynamic reference resolves. The bounds on a schema's cost
//     read it ([Unfolded], [TreeSize], [Cost]), and the satisfiability
//     check solves it.
//
// It also prepares a document for the library: [DedupeIDs] keeps a
// repeated id on one subschema, and [NewGraph] compiles what the root does
// not reach but a reference or a dynamic scope may.
//
// It is a pure package: no network, no file system, no logging.
package subschema

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// URL is the base URL a schema document is compiled under. Relative
// references resolve against it; nothing is ever fetched from it.
const URL = "https://schema.fixpoint.invalid/schema.json"

var tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

// Fragment returns the decoded fragment of a schema URL (the library's
// location of a subschema or keyword): the JSON pointer of a location
// inside its document.
func Fragment(u string) string {
	i := strings.IndexByte(u, '#')
	if i < 0 {
		return ""
	}
	f := u[i+1:]
	if d, err := url.PathUnescape(f); err == nil {
		f = d
	}
	if !strings.HasPrefix(f, "/") {
		return ""
	}
	return f
}

// schemaMapKeywords hold an object of subschemas; schemaArrayKeywords an
// array of them; schemaKeywords one subschema.
var (
	schemaMapKeywords = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true,
		"definitions": true, "dependentSchemas": true, "dependencies": true,
	}
	schemaArrayKeywords = map[string]bool{
		"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true,
		"items": true, // draft-07 tuple form, else a single schema
	}
	schemaKeywords = map[string]bool{
		"not": true, "if": true, "then": true, "else": true,
		"additionalProperties": true, "additionalItems": true,
		"unevaluatedProperties": true, "unevaluatedItems": true,
		"contains": true, "propertyNames": true, "contentSchema": true,
		"items": true,
	}
)

// Location is the JSON pointer of a schema location (the library's URL of
// a subschema) in the schema document, or the location itself in another
// document.
func Location(u string) string {
	if u == URL || strings.HasPrefix(u, URL+"#") {
		return Fragment(u)
	}
	return u
}

// KeywordAt returns the innermost schema keyword on the path of the JSON
// pointer ptr in the schema document doc: the keyword a message about that
// place names.
func KeywordAt(doc any, ptr string) string {
	toks := splitPointer(ptr)
	kw := ""
	node := doc
	for i := 0; i < len(toks); {
		obj, ok := node.(map[string]any)
		if !ok {
			break
		}
		tok := toks[i]
		i++
		kw = tok
		val, ok := obj[tok]
		if !ok || i >= len(toks) {
			break
		}
		switch {
		case schemaMapKeywords[tok]:
			m, ok := val.(map[string]any)
			if !ok {
				return kw
			}
			node = m[toks[i]]
			i++
		case schemaArrayKeywords[tok]:
			if arr, ok := val.([]any); ok {
				n, err := strconv.Atoi(toks[i])
				if err != nil || n < 0 || n >= len(arr) {
					return kw
				}
				node = arr[n]
				i++
				continue
			}
			if !schemaKeywords[tok] {
				return kw
			}
			node = val
		case schemaKeywords[tok]:
			node = val
		default:
			return kw
		}
	}
	return kw
}

// encodeFragment percent-encodes a JSON pointer for use as a URL fragment,
// keeping its slashes.
func encodeFragment(ptr string) string {
	toks := strings.Split(ptr, "/")
	for i, t := range toks {
		toks[i] = url.PathEscape(t)
	}
	return strings.Join(toks, "/")
}

// refKeywords are the keywords whose value refers to another schema.
var refKeywords = []string{"$ref", "$dynamicRef", "$recursiveRef", "$schema"}

// FindRef finds the reference keyword in doc whose value names target (an
// absolute URL, possibly the resolution of a relative reference), returning
// the keyword and its location; "$ref" at the root when none is found. The
// reference that resolves to target wins, then one written as target, then
// one whose URL target ends with.
func FindRef(doc any, target string) (keyword, location string) {
	best := -1
	Walk(doc, func(n Node) bool {
		for _, kw := range refKeywords {
			s, ok := n.Object()[kw].(string)
			if !ok {
				continue
			}
			if score := refScore(s, n.Base, target); score > best {
				best, keyword, location = score, kw, n.Ptr+"/"+extract.PointerToken(kw)
			}
		}
		return true
	})
	if best < 0 {
		return "$ref", ""
	}
	return keyword, location
}

// refScore says how surely the reference s, in a subschema of base URI
// base, names target: from 4, resolved to it, to -1, not at all.
func refScore(s, base, target string) int {
	tu, tf, _ := strings.Cut(target, "#")
	su, sf, _ := strings.Cut(s, "#")
	switch {
	case resolvesTo(s, base, tu, tf):
		return 4
	case s == target:
		return 3
	case su != "" && strings.HasSuffix(tu, su) && sf == tf:
		return 2
	case su != "" && strings.HasSuffix(tu, su):
		return 1
	case su == "" && sf != "" && sf == tf:
		return 0
	}
	return -1
}

// resolvesTo reports whether the reference ref, resolved against base,
// is the URL tu with the fragment tf (both fragments percent-decoded).
func resolvesTo(ref, base, tu, tf string) bool {
	ru, rf, _ := strings.Cut(ref, "#")
	if ru != "" {
		b, err1 := url.Parse(base)
		u, err2 := url.Parse(ru)
		if err1 != nil || err2 != nil {
			return false
		}
		base = resolveURL(b, u).String()
	}
	df, err1 := url.PathUnescape(rf)
	dt, err2 := url.PathUnescape(tf)
	return base == tu && err1 == nil && err2 == nil && df == dt
}

// splitPointer splits a JSON pointer into unescaped tokens.
func splitPointer(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = tokenUnescaper.Replace(t)
		}
	}
	return toks
}
