package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"

	"github.com/fixpoint-dev/fixpoint"
)

// Keyword is the schema keyword that holds an object's rules, and the
// keyword of the validation errors they give.
const Keyword = "x-fixpoint-rules"

// Bounds checked at Compile.
const (
	// MaxRules is the most rules one schema may hold, over all its
	// objects.
	MaxRules = 256
	// MaxRuleLength is the longest rule, in code points.
	MaxRuleLength = 2048
	// MaxMessageLength is the longest message, in bytes.
	MaxMessageLength = 1024
)

// Cost limits checked at Check. A unit of cost is about one step of
// evaluation: reading a field, one comparison, one iteration of map().
// They are Kubernetes' limits for its validation rules.
const (
	// CostLimit is the cost one evaluation of a rule may take.
	CostLimit = 1_000_000
	// CheckCostLimit is the cost all the rules of one value may take
	// together, each rule evaluated at each place it applies.
	CheckCostLimit = 10_000_000
	// MaxEvaluations is how many times the rules of one value may run in
	// all: a cheap rule on each of a million items costs little CEL cost,
	// but each run has a cost of its own (about 5 µs here).
	MaxEvaluations = 100_000
)

// ErrCostLimit is matched by the Err of a Finding whose rule went over a
// cost limit.
var ErrCostLimit = errors.New("cost limit exceeded")

// Severity says what a failed rule does to a value.
type Severity string

const (
	// SeverityError: the value is not valid; the message goes back to the
	// model.
	SeverityError Severity = "error"
	// SeverityWarn: the failure is recorded and reported, the value stays
	// valid, and nothing is repaired.
	SeverityWarn Severity = "warn"
)

// rule is one compiled rule.
type rule struct {
	site     *node  // the schema object it sits on
	index    int    // its index in the site's x-fixpoint-rules
	text     string // the CEL expression
	message  string
	path     string // relative JSON pointer the error names
	severity Severity
	self     *ctype // the type of self
	prg      cel.Program
	// bool is false when the checker could only say dyn: the result is
	// checked to be a bool at run time.
	bool bool
}

// location returns the schema pointer of the rule.
func (r *rule) location() string {
	return r.site.ptr + "/" + Keyword + "/" + strconv.Itoa(r.index)
}

// Set is the compiled rules of one schema. It is safe for concurrent use.
// The zero Set and a nil *Set hold no rules.
type Set struct {
	g     *graph
	rules []*rule
	hash  string
}

// Len returns the number of rules in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Hash returns a stable hash of the rules of s and of the semantics this
// package gives them (hex SHA-256), "" when s holds no rules. Two schemas
// whose rules are the same (by text, message, path, severity and place)
// have the same hash, whatever else differs.
func (s *Set) Hash() string {
	if s == nil {
		return ""
	}
	return s.hash
}

// CompileError is an error of Compile: a rule, or an x-fixpoint-rules
// keyword, that is not valid.
type CompileError struct {
	// Location is the JSON pointer in the schema of the rule at fault
	// (".../x-fixpoint-rules/2"), or of the keyword when the keyword
	// itself is wrong.
	Location string
	// Rule is the rule's CEL text, "" when no rule is at fault.
	Rule string
	// Err is what is wrong.
	Err error
}

// Error implements error.
func (e *CompileError) Error() string {
	loc := e.Location
	if loc == "" {
		loc = "(root)"
	}
	if e.Rule == "" {
		return fmt.Sprintf("rules: %s: %v", loc, e.Err)
	}
	return fmt.Sprintf("rules: %s (%s): %v", loc, e.Rule, e.Err)
}

// Unwrap returns the cause.
func (e *CompileError) Unwrap() error { return e.Err }

// Compile reads the x-fixpoint-rules of the schema document schema (JSON)
// and compiles and type-checks every rule. It returns every error at
// once, each a *CompileError (joined with errors.Join when there are
// several), sorted by location. A schema without rules compiles to an
// empty Set.
func Compile(schema []byte) (*Set, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &CompileError{Err: fmt.Errorf("the schema is not JSON: %v", err)}
	}
	if dec.More() {
		return nil, &CompileError{Err: errors.New("the schema is not JSON: text after the document")}
	}
	return compileDoc(doc)
}

// compileDoc is Compile for a decoded document. It goes as far as it
// can, so that every error of the schema's rules is found at once.
func compileDoc(doc any) (*Set, error) {
	g := buildGraph(doc)
	s := &Set{g: g}
	if len(g.sites) == 0 {
		return s, nil
	}
	n := 0
	for _, site := range g.sites {
		list, _ := site.obj[Keyword].([]any)
		n += len(list)
	}
	if n > MaxRules {
		return nil, &CompileError{Err: fmt.Errorf("the schema has %d rules, at most %d are allowed", n, MaxRules)}
	}
	var errs []error
	for _, site := range g.sites {
		rs, err := readRules(site)
		errs = append(errs, err...)
		site.rules = rs
	}
	errs = append(errs, g.mark()...)
	reached := g.reached()
	for _, site := range g.sites {
		_, hasRef := site.obj["$ref"]
		switch {
		case hasRef && g.version < 2019:
			errs = append(errs, &CompileError{Location: site.ptr + "/" + Keyword, Err: errBesideRef})
		case !reached[site]:
			errs = append(errs, &CompileError{Location: site.ptr + "/" + Keyword, Err: errUnreached})
		}
	}
	errs = append(errs, s.compileRules()...)
	if len(errs) > 0 {
		return nil, joinSorted(errs)
	}
	s.hash = hashRules(s.rules)
	return s, nil
}

// errUnreached explains a rule that would never run.
var errUnreached = errors.New("these rules never apply: rules apply where their object is reached from the root through " +
	"properties, patternProperties, additionalProperties, items, prefixItems, $ref and allOf, and through anyOf " +
	"and oneOf only when the branches have different types (see docs/rules.md)")

// errBesideRef explains rules that an older draft ignores.
var errBesideRef = errors.New("these rules never apply: before draft 2019-09 the keywords beside \"$ref\" are ignored; " +
	"put them in the schema it refers to, or put both in an allOf")

// readRules reads the x-fixpoint-rules of the node site.
func readRules(site *node) ([]*rule, []error) {
	at := site.ptr + "/" + Keyword
	list, ok := site.obj[Keyword].([]any)
	if !ok {
		return nil, []error{&CompileError{Location: at, Err: errors.New("must be an array of rules ({\"rule\": ..., \"message\": ...})")}}
	}
	var out []*rule
	var errs []error
	for i, item := range list {
		r, err := readRule(site, i, item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errs
}

// readRule reads one rule object.
func readRule(site *node, i int, item any) (*rule, error) {
	r := &rule{site: site, index: i, severity: SeverityError}
	fail := func(format string, args ...any) error {
		return &CompileError{Location: r.location(), Rule: r.text, Err: fmt.Errorf(format, args...)}
	}
	obj, ok := item.(map[string]any)
	if !ok {
		return nil, fail("a rule must be an object with \"rule\" and \"message\"")
	}
	r.text, ok = obj["rule"].(string)
	if !ok || strings.TrimSpace(r.text) == "" {
		return nil, fail("\"rule\" must be a CEL expression (a non-empty string)")
	}
	if n := utf8.RuneCountInString(r.text); n > MaxRuleLength {
		r.text = truncate(r.text, 60)
		return nil, fail("the rule is %d characters long, at most %d are allowed", n, MaxRuleLength)
	}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "rule":
		case "message":
			if r.message, ok = obj[k].(string); !ok {
				return nil, fail("\"message\" must be a string")
			}
			if len(r.message) > MaxMessageLength {
				return nil, fail("the message is %d bytes long, at most %d are allowed", len(r.message), MaxMessageLength)
			}
		case "path":
			if r.path, ok = obj[k].(string); !ok || !validPointer(r.path) {
				return nil, fail("\"path\" must be a JSON pointer relative to the object (\"\" or \"/field\"), got %s", display(obj[k]))
			}
		case "severity":
			sev, _ := obj[k].(string)
			if r.severity = Severity(sev); r.severity != SeverityError && r.severity != SeverityWarn {
				return nil, fail("\"severity\" must be \"error\" or \"warn\", got %s", display(obj[k]))
			}
		default:
			return nil, fail("unknown key %q (a rule has rule, message, path and severity)", k)
		}
	}
	return r, nil
}

// validPointer reports whether p is a JSON pointer.
func validPointer(p string) bool {
	if p == "" {
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
	}
	return true
}

// display shows a JSON value in an error.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(string(b), 60)
}

// truncate shortens s to at most n code points, with "...".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// joinSorted joins errs, sorted by location.
func joinSorted(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int {
		var ca, cb *CompileError
		errors.As(a, &ca)
		errors.As(b, &cb)
		return strings.Compare(ca.Location, cb.Location)
	})
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// hashRules returns the hash of rules (see Set.Hash).
func hashRules(rules []*rule) string {
	type hashed struct {
		At       string   `json:"at"`
		Rule     string   `json:"rule"`
		Message  string   `json:"message"`
		Path     string   `json:"path"`
		Severity Severity `json:"severity"`
	}
	list := make([]hashed, len(rules))
	for i, r := range rules {
		list[i] = hashed{r.location(), r.text, r.message, r.path, r.severity}
	}
	b, _ := json.Marshal(struct {
		Semantics string   `json:"semantics"`
		Rules     []hashed `json:"rules"`
	}{semantics, list})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Finding is a rule that failed on a value: false, or an error.
type Finding struct {
	// Path is the JSON pointer of the value the error names: the place of
	// the object the rule sits on, then the rule's own path.
	Path string
	// At is the JSON pointer of the object the rule ran on (its self).
	At string
	// SchemaPath is the JSON pointer in the schema of the rule
	// (".../x-fixpoint-rules/0").
	SchemaPath string
	// Rule is the rule's CEL text.
	Rule     string
	Message  string
	Severity Severity
	// Err is why the rule could not say true or false: an error at run
	// time (a missing field, a type that does not fit, a result that is no
	// bool), or a cost limit (matching ErrCostLimit). Nil when the rule
	// said false.
	Err error
}

// Text returns the finding as a message for a model: the path (or
// "(root)"), the message, and the rule, e.g.
//
//	/end: end must not be before start (rule: self.end >= self.start)
func (f Finding) Text() string {
	var b strings.Builder
	if f.Path == "" {
		b.WriteString("(root)")
	} else {
		b.WriteString(f.Path)
	}
	b.WriteString(": ")
	if f.Message != "" {
		b.WriteString(f.Message)
		b.WriteString(" (rule: ")
	} else {
		b.WriteString("fails the rule ")
	}
	b.WriteString(f.Rule)
	if f.Err != nil {
		b.WriteString("; it could not be evaluated: ")
		b.WriteString(f.Err.Error())
	}
	if f.Message != "" {
		b.WriteString(")")
	}
	return b.String()
}

// ValidationError returns f as a validation error of the job: keyword
// x-fixpoint-rules, class semantic, the rule's text in Rule.
func (f Finding) ValidationError() fixpoint.ValidationError {
	return fixpoint.ValidationError{Path: f.Path, Keyword: Keyword, Class: fixpoint.ClassSemantic, Message: f.Text(), Rule: f.Rule}
}

// Errors returns the findings of severity error as validation errors, in
// their order; nil when there are none.
func Errors(findings []Finding) []fixpoint.ValidationError {
	var out []fixpoint.ValidationError
	for _, f := range findings {
		if f.Severity == SeverityError {
			out = append(out, f.ValidationError())
		}
	}
	return out
}
