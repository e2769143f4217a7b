package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/internal/render"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// ErrSchema is matched (errors.Is) by every error Compile returns.
var ErrSchema = errors.New("invalid schema")

// errExternalRef is the cause of a refused reference to another document.
var errExternalRef = errors.New("references outside the schema document are not allowed (no network or file access)")

// SchemaError is the error Compile returns: it names the keyword at fault and
// its JSON-pointer location in the schema document. It matches ErrSchema.
type SchemaError struct {
	// Keyword is the schema keyword at fault, e.g. "type", "$ref"; "" when the
	// schema text is not JSON or no single keyword is at fault.
	Keyword string
	// Location is the JSON pointer of the keyword in the schema document, ""
	// for the document itself.
	Location string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *SchemaError) Error() string {
	loc := e.Location
	if loc == "" {
		loc = render.Root
	}
	if e.Keyword == "" {
		return fmt.Sprintf("%v at %s: %v", ErrSchema, loc, e.Err)
	}
	return fmt.Sprintf("%v: keyword %q at %s: %v", ErrSchema, e.Keyword, loc, e.Err)
}

// Unwrap returns the cause.
func (e *SchemaError) Unwrap() error { return e.Err }

// Is reports whether target is ErrSchema.
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// Schema is a compiled JSON Schema. It is safe for concurrent use. A nil
// *Schema accepts every value.
type Schema struct {
	raw   []byte
	sch   *jsonschema.Schema
	graph *subschema.Graph
	// tree bounds the checks at one place in a value (see TreeSize); 0
	// when the schema recurses, which no size bounds.
	tree int
	// cost estimates a value's checks (see MaxChecks): built at Compile
	// for a schema that recurses, for any other the first time a value is
	// large enough that tree times its places passes MaxChecks.
	costOnce sync.Once
	cost     *subschema.Cost
	// clock bounds the time of the patterns the backtracking engine
	// matches (see patterns.go); nil when RE2 matches them all.
	clock *patternClock
	// pieceMin is the places in a value above which it is validated
	// piece by piece (see pieces.go); -1: never, the schema holding a
	// dynamic reference.
	pieceMin int
	// partial is the schema a part of a value is checked against (see
	// Partial), built the first time it is asked for.
	partialOnce sync.Once
	partial     *Schema
	partialErr  error
	// partialItems is the partial schema whose list items keep their
	// required (see PartialItems), built the first time it is asked for.
	partialItemsOnce sync.Once
	partialItems     *Schema
	partialItemsErr  error
	// keys holds the "x-fixpoint-key" of each subschema that has one, by
	// its pointer (see Wants.Key), read the first time a Reader asks.
	keysOnce sync.Once
	keys     map[string]any
}

// costs returns the schema's Cost, building it the first time.
func (s *Schema) costs() *subschema.Cost {
	s.costOnce.Do(func() { s.cost = subschema.NewCost(s.graph) })
	return s.cost
}

// overChecks returns the pointer of the place where checking v would pass
// MaxChecks, and whether it would.
func (s *Schema) overChecks(v any) (string, bool) {
	at, n := s.checks(v)
	return at, n > MaxChecks
}

// checks estimates the checks validating v makes, counted until they pass
// MaxChecks, and returns the pointer of the place where they do. A small
// value against a schema that does not recurse is not walked: tree times
// its places bounds its checks, and under smallChecks no bound is near.
func (s *Schema) checks(v any) (string, int) {
	if s.tree > 0 {
		if n := places(v, smallChecks/s.tree); n <= smallChecks/s.tree {
			return "", s.tree * n
		}
	}
	return s.costs().Estimate(v, MaxChecks)
}

// smallChecks is the checks under which a value is not estimated: far from
// MaxChecks, and from what the budget of a schema-guided repair allows
// (package repair spreads MaxChecks over at most 16 validations).
const smallChecks = MaxChecks / 16

// places returns how many places v has, itself and each member and item
// at every depth, counted to at most limit+1.
func places(v any, limit int) int {
	n := 0
	var count func(v any)
	count = func(v any) {
		if n++; n > limit {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				if count(e); n > limit {
					return
				}
			}
		case []any:
			for _, e := range x {
				if count(e); n > limit {
					return
				}
			}
		}
	}
	count(v)
	return n
}

// compileOptions are test seams; the zero value is what Compile uses.
type compileOptions struct {
	// loader loads documents outside the schema. nil: refuse them all.
	loader jsonschema.URLLoader
	// draft is the draft of a schema without "$schema". nil: 2020-12.
	draft *jsonschema.Draft
}

// refuseLoader refuses to load any document: no network, no file system.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("load %q: %w", u, errExternalRef)
}

// MaxSchemaDepth is how deeply a schema's JSON may nest (objects and
// arrays; a property of a property of an object is 4 levels). Real schemas
// stay well under it.
const MaxSchemaDepth = 128

// MaxUnfolded bounds how many subschemas one value can be checked against
// along one path from the root to a leaf, each reference replaced by what
// it names (cycles counted once): at one place in the value every
// applicator there (anyOf, oneOf, allOf, $ref, not, if/then/else) adds up,
// and the deepest child place counts once (a wide schema, 3,000
// properties each a $ref to a 55-node definition, is not a slow one).
// Levels of "anyOf": [{"$ref": next}, {"$ref": next}] double at each level:
// 22 of them took 34 s and 4.4 GB to check one wrong reply.
const MaxUnfolded = 100_000

// MaxChecks bounds how many times validating one value may check a place
// in it against a subschema. When the schema recurses, "oneOf" of two
// comment shapes that each $ref the comment for their replies checks a
// reply nested d levels deep against 2^d copies of it at the bottom, and
// every place of a wide reply adds its own. A 100-byte reply nested 20
// levels took a worker 44 s and 6 GB before it ran out of memory, a 56 KB
// thread 10 levels deep with 2 replies a comment 19 s and 1.9 GB. Without
// recursion, levels of "anyOf" whose branches share the next level's
// definition multiply too (MaxUnfolded bounds them at one place, not
// over the items of an array): 8 levels checked 100 wrong items in 29 s
// and 840 MB. A value
// whose estimate passes the bound is refused (keyword "checkCost") before
// it is checked. The estimate is the worst case, a value not valid deep
// down: measured on such a thread, a million estimated checks took about a
// second and 450 MB to check. A valid value takes a fraction of that (the
// library stops at a failing alternative's first error: a realistic thread
// of 300 comments 10 deep, estimated at 600,000, took 7 ms), so the bound
// leaves room for those and costs about 3 s and 720 MB at worst, with the
// errors gathered (BenchmarkValidateThreadNearTheBound).
const MaxChecks = 1_000_000

// nesting returns the depth of v's deepest object or array below depth d,
// stopping once past MaxSchemaDepth.
func nesting(v any, d int) int {
	if d > MaxSchemaDepth {
		return d
	}
	deepest := d
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			deepest = max(deepest, nesting(e, d+1))
		}
	case []any:
		for _, e := range x {
			deepest = max(deepest, nesting(e, d+1))
		}
	}
	return deepest
}

// Compile compiles a JSON Schema document. The draft is 2020-12 unless
// "$schema" names another one (draft-07, 2019-09, 06 or 04). A reference to
// anything outside the document, or a "$schema" naming an unknown metaschema,
// is refused. Every error is a *SchemaError matching ErrSchema.
func Compile(schema []byte) (*Schema, error) {
	return compile(schema, compileOptions{})
}

func compile(schema []byte, opts compileOptions) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		text := bytes.TrimSpace(schema)
		switch {
		case len(text) == 0:
			err = errors.New("the schema is empty")
		case text[0] != '{' && text[0] != '[' && string(text) != "true" && string(text) != "false":
			err = fmt.Errorf("%w (a schema is JSON; YAML must be converted first)", err)
		}
		if line, col, ok := syntaxPosition(schema, err); ok {
			return nil, &SchemaError{Err: fmt.Errorf("decode schema: line %d, column %d: %w", line, col, err)}
		}
		return nil, &SchemaError{Err: fmt.Errorf("decode schema: %w", err)}
	}
	if at, key, dup := extract.DuplicateKey(schema); dup {
		// A JSON reader keeps the last: {"n": {"type": "integer"}, "n":
		// {"type": "string"}} lost its first declaration in silence.
		return nil, &SchemaError{Location: at, Err: fmt.Errorf("key %q appears twice in one object: a JSON reader keeps only the last, and the first is lost; keep one", key)}
	}
	if nesting(doc, 1) > MaxSchemaDepth {
		// The schema library's compile time grows with the cube of it: a
		// schema 1,600 levels deep took two minutes to refuse nothing.
		return nil, &SchemaError{Err: fmt.Errorf("the schema nests more than %d levels deep (objects and arrays): flatten it, with $defs and $ref for what repeats", MaxSchemaDepth)}
	}
	if errs := numberErrors(doc); len(errs) > 0 {
		e := sortErrors(errs)[0]
		return nil, &SchemaError{Keyword: subschema.KeywordAt(doc, e.Path), Location: e.Path, Err: errors.New(body(e.Message))}
	}
	// An id repeated in sibling subschemas, which the library refuses,
	// names the first in document order (see subschema.DedupeIDs).
	subschema.DedupeIDs(doc, schema, opts.draft)
	return compileDoc(doc, schema, opts)
}

// compileDoc compiles doc, the schema text decoded, checked and its ids
// deduplicated; the Schema's Raw is text.
func compileDoc(doc any, text []byte, opts compileOptions) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if opts.draft != nil {
		c.DefaultDraft(opts.draft)
	}
	c.AssertFormat()
	registerURIFormats(c)
	// Patterns are ECMA-262's (JSON Schema says so), not Go's RE2 syntax:
	// they are translated (see compilePattern), or matched by the backtracking
	// engine under clock's bounds. The schema's own patterns, compiled
	// now, may keep the RE2 meaning they had before (see
	// ecmaRegexpEngine); a value checked against "format": "regex" later
	// must be ECMA-262.
	var compiled atomic.Bool
	clock := &patternClock{}
	c.UseRegexpEngine(func(p string) (jsonschema.Regexp, error) {
		if compiled.Load() {
			return strictRegexpEngine(p)
		}
		re, err := ecmaRegexpEngine(p, clock)
		if _, ok := re.(*backtrackRegexp); ok {
			clock.used.Store(true)
		}
		return re, err
	})
	defer compiled.Store(true)
	var loader jsonschema.URLLoader = refuseLoader{}
	if opts.loader != nil {
		loader = opts.loader
	}
	c.UseLoader(loader)
	if err := c.AddResource(subschema.URL, doc); err != nil {
		return nil, &SchemaError{Err: fmt.Errorf("add schema: %w", err)}
	}
	sch, err := c.Compile(subschema.URL)
	if err != nil {
		return nil, schemaError(doc, err)
	}
	g, err := subschema.NewGraph(c, sch, doc, opts.draft)
	if err != nil {
		return nil, schemaError(doc, err)
	}
	if n := subschema.Unfolded(g, MaxUnfolded); n > MaxUnfolded {
		return nil, &SchemaError{Err: fmt.Errorf("one value would be checked against over %d subschemas along one path when each $ref is replaced by what it names "+
			"(an anyOf, oneOf or allOf whose branches reach a shared definition counts it once for each, at every level): "+
			"checking a reply that fails could take minutes and gigabytes; share fewer branches", MaxUnfolded)}
	}
	out := &Schema{raw: bytes.Clone(text), sch: sch, graph: g, tree: subschema.TreeSize(g, MaxChecks), pieceMin: pieceMin}
	if hasDynamicRefs(g) {
		out.pieceMin = -1
	}
	if clock.used.Load() {
		out.clock = clock
	}
	if out.tree == 0 {
		out.costs()
	}
	return out, nil
}

// Raw returns the schema text as given to Compile. It must not be modified.
func (s *Schema) Raw() []byte {
	if s == nil {
		return nil
	}
	return s.raw
}

// Validate validates v, a value as decoded by encoding/json with UseNumber
// (map[string]any, []any, string, json.Number, bool, nil; float64 and Go
// integers are accepted too). It returns its errors, sorted, or nil when v
// is valid: every error up to MaxErrors; past it the first MaxErrors and
// the first of each keyword, then one error of keyword KeywordMoreErrors
// that counts the others (ErrorCount counts them all). A number that is
// not a JSON number, longer than 1000 characters or with an exponent
// beyond ±1000 cannot be compared safely: then only such numbers are
// reported, with keyword "number" (class semantic). A string that a
// pattern with lookahead, lookbehind or backreferences could not be
// matched against in time (see patterns.go) is an error too, with keyword
// "pattern".
func (s *Schema) Validate(v any) []fixpoint.ValidationError {
	if s == nil || s.sch == nil {
		return nil
	}
	defer s.guard()()
	return s.validate(v)
}

// validate is Validate within a check that holds the schema's clock.
func (s *Schema) validate(v any) []fixpoint.ValidationError {
	if s == nil || s.sch == nil {
		return nil
	}
	if errs := numberErrors(v); len(errs) > 0 {
		// The value cannot be compared safely; these errors come first.
		return capErrors(sortErrors(errs))
	}
	if at, over := s.overChecks(v); over {
		return []fixpoint.ValidationError{newError(at, "checkCost", fmt.Sprintf("checking the value this far would take over %d checks against the schema's parts (its alternatives, and the schemas that apply to each item or member, multiply at every level): reply with a shallower or smaller value", MaxChecks))}
	}
	c := newErrorCap(MaxErrors)
	s.validateAt(s.sch, v, v, nil, c)
	return c.result()
}

// schemaError turns a library compile error into a *SchemaError naming the
// keyword and its location. A pattern's error says what is wrong in it and
// where (ecma.Compile).
func schemaError(doc any, err error) *SchemaError {
	var (
		sve  *jsonschema.SchemaValidationError
		lue  *jsonschema.LoadURLError
		rxe  *jsonschema.InvalidRegexError
		anf  *jsonschema.AnchorNotFoundError
		pnf  *jsonschema.JSONPointerNotFoundError
		ipe  *jsonschema.InvalidJsonPointerError
		pie  *jsonschema.ParseIDError
		pae  *jsonschema.ParseAnchorError
		die  *jsonschema.DuplicateIDError
		dae  *jsonschema.DuplicateAnchorError
		verr *jsonschema.ValidationError
	)
	switch {
	case errors.As(err, &sve):
		base := subschema.Fragment(sve.URL)
		if errors.As(sve.Err, &verr) {
			errs := flatten(verr, lookupPointer(doc, base))
			if len(errs) > 0 {
				errs = sortErrors(errs)
				e := errs[0]
				loc := base + e.Path
				msg := e.Message
				if i := strings.Index(msg, ": "); i >= 0 {
					msg = msg[i+2:]
				}
				return &SchemaError{Keyword: subschema.KeywordAt(doc, loc), Location: loc, Err: errors.New(msg)}
			}
		}
		return &SchemaError{Keyword: subschema.KeywordAt(doc, base), Location: base, Err: sve.Err}
	case errors.As(err, &lue):
		kw, loc := subschema.FindRef(doc, lue.URL)
		what := fmt.Sprintf("%q", lue.URL)
		if raw, ok := lookupPointer(doc, loc).(string); ok && raw != lue.URL {
			what = fmt.Sprintf("%q (resolved to %q)", raw, lue.URL)
		}
		if kw == "$schema" {
			return &SchemaError{Keyword: kw, Location: loc, Err: fmt.Errorf("%w: %s is not a JSON Schema draft this validator knows (2020-12, 2019-09, draft-07, draft-06, draft-04)", errExternalRef, what)}
		}
		return &SchemaError{Keyword: kw, Location: loc, Err: fmt.Errorf("%w: cannot use %s", errExternalRef, what)}
	case errors.As(err, &rxe):
		loc := subschema.Fragment(rxe.URL)
		if !strings.HasSuffix(loc, "/pattern") && subschema.KeywordAt(doc, loc+"/pattern") == "pattern" {
			loc += "/pattern"
		}
		return &SchemaError{Keyword: subschema.KeywordAt(doc, loc), Location: loc, Err: fmt.Errorf("invalid regular expression %q: %w", rxe.Regex, rxe.Err)}
	case errors.As(err, &anf):
		kw, loc := subschema.FindRef(doc, anf.Reference)
		return &SchemaError{Keyword: kw, Location: loc, Err: err}
	case errors.As(err, &pnf):
		kw, loc := subschema.FindRef(doc, pnf.URL)
		return &SchemaError{Keyword: kw, Location: loc, Err: err}
	case errors.As(err, &ipe):
		kw, loc := subschema.FindRef(doc, ipe.URL)
		return &SchemaError{Keyword: kw, Location: loc, Err: err}
	case errors.As(err, &pie):
		return &SchemaError{Keyword: "$id", Location: subschema.Fragment(pie.URL) + "/$id", Err: err}
	case errors.As(err, &pae):
		return &SchemaError{Keyword: "$anchor", Location: subschema.Fragment(pae.URL) + "/$anchor", Err: err}
	case errors.As(err, &die):
		return &SchemaError{Keyword: "$id", Location: die.Ptr2 + "/$id", Err: err}
	case errors.As(err, &dae):
		return &SchemaError{Keyword: "$anchor", Location: dae.Ptr2 + "/$anchor", Err: err}
	}
	var ude *jsonschema.UnsupportedDraftError
	var mse *jsonschema.InvalidMetaSchemaURLError
	var mce *jsonschema.MetaSchemaCycleError
	if errors.As(err, &ude) || errors.As(err, &mse) || errors.As(err, &mce) {
		return &SchemaError{Keyword: "$schema", Location: "/$schema", Err: err}
	}
	return &SchemaError{Err: err}
}

// lookupPointer returns the value at ptr in doc, or nil.
func lookupPointer(doc any, ptr string) any {
	return lookup(doc, splitPointer(ptr))
}

// lookup returns the value at the (unescaped) tokens in doc, or nil.
func lookup(doc any, toks []string) any {
	node := doc
	for _, tok := range toks {
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	return node
}

// splitPointer splits a JSON pointer into unescaped tokens.
func splitPointer(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = unescapeToken(t)
	}
	return toks
}

var (
	tokenEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// escapeToken escapes one JSON pointer token (RFC 6901).
func escapeToken(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return tokenEscaper.Replace(tok)
}

// unescapeToken reverses escapeToken.
func unescapeToken(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return tokenUnescaper.Replace(tok)
}

// pointer joins unescaped tokens into a JSON pointer.
func pointer(toks []string) string {
	if len(toks) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, t := range toks {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(t))
	}
	return sb.String()
}

// syntaxPosition is where in text the JSON decoding error err is, as a
// 1-based line and column (in characters): a schema file's syntax error is
// found by its line, not by a byte offset or not at all.
func syntaxPosition(text []byte, err error) (line, col int, ok bool) {
	var off int64
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending byte is the last one read
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(text))
	default:
		// Text after the value ("invalid character after top-level
		// value"): where the value ends and the rest begins.
		dec := json.NewDecoder(bytes.NewReader(text))
		var v any
		if dec.Decode(&v) != nil {
			return 0, 0, false
		}
		off = dec.InputOffset()
		for off < int64(len(text)) && strings.ContainsRune(" \t\r\n", rune(text[off])) {
			off++
		}
		if off >= int64(len(text)) {
			return 0, 0, false
		}
	}
	if off < 0 || off > int64(len(text)) {
		return 0, 0, false
	}
	before := text[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return line, col, true
}
