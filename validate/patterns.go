package validate

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/ecma"
)

// A pattern RE2 cannot express (a lookahead, a lookbehind, a
// backreference) is matched by a backtracking engine, which can take time
// exponential in the string's length (package ecma). Bounds keep a reply
// from holding a worker: each match stops after ecma.MatchTimeout, or once
// its backtracking state passes ecma.MaxStack; all the backtracking matches
// of one check (Validate, Check and its coercion, Satisfiable) share
// patternCheckTime, past which every further one fails at once; and a
// pattern and string that failed once fail again at once in the same
// check. A match that fails so makes the value invalid, with an error
// saying the string could not be checked, never valid: a "not" or a
// patternProperties the library would read as "no match" must not let it
// through.
//
// One budget per check needs the check to be known where the library calls
// the pattern, which it does with a string only: a check of a schema with
// such patterns holds the schema's patternClock, so that the checks of one
// schema run one at a time. Schemas without them, nearly all, are not
// serialized.
const patternCheckTime = time.Second

// patternClock is the time budget of one schema's backtracking patterns.
type patternClock struct {
	// mu is held for one check; cur is its budget, nil outside a check.
	mu  sync.Mutex
	cur atomic.Pointer[patternBudget]
	// used is set when a pattern of the schema was compiled for the
	// backtracking engine.
	used atomic.Bool
}

// patternBudget is what one check may still spend, the matches that
// failed, in order, and why each pattern and string failed: the same
// match fails again at once.
type patternBudget struct {
	left   time.Duration
	failed []patternFailure
	known  map[patternPair]error
}

// patternPair is a pattern, as written, and a string matched against it.
type patternPair struct{ pattern, subject string }

// patternFailure is a match that failed, and why: errPatternTime,
// errPatternStack, or the engine's timeout.
type patternFailure struct {
	patternPair
	err error
}

var (
	// errPatternTime is a match not made: the check's budget was spent.
	errPatternTime = errors.New("the check's time for patterns is spent")
	// errPatternStack is a match that needed more backtracking state than
	// ecma.MaxStack allows.
	errPatternStack = regexp2.ErrBacktrackingStackLimit
)

// backtrackRegexp is a pattern matched by the backtracking engine, under
// its schema's patternClock.
type backtrackRegexp struct {
	re    *regexp2.Regexp
	src   string
	clock *patternClock
}

// String returns the pattern as written in the schema.
func (r *backtrackRegexp) String() string { return r.src }

// MatchString reports whether s contains a match of the pattern. A match
// that runs out of time reports false and is recorded in the check's
// budget, which makes the value invalid (see Schema.validate).
func (r *backtrackRegexp) MatchString(s string) bool {
	ok, err := r.Match(s)
	if err != nil {
		if b := r.budget(); b != nil {
			b.failed = append(b.failed, patternFailure{patternPair{r.src, s}, err})
		}
		return false
	}
	return ok
}

// budget returns the budget of the check in progress, nil outside one.
func (r *backtrackRegexp) budget() *patternBudget {
	if r.clock == nil {
		return nil
	}
	return r.clock.cur.Load()
}

// Match matches s, spending the check's budget; an error is a match that
// ran out of time. Outside a check only the per-match bound applies.
func (r *backtrackRegexp) Match(s string) (bool, error) {
	b := r.budget()
	if b == nil {
		return r.re.MatchString(s)
	}
	k := patternPair{r.src, s}
	if err := b.known[k]; err != nil {
		return false, err
	}
	if b.left <= 0 {
		return false, errPatternTime
	}
	start := time.Now()
	ok, err := r.re.MatchString(s)
	b.left -= time.Since(start)
	if err != nil {
		if b.known == nil {
			b.known = map[patternPair]error{}
		}
		b.known[k] = err
	}
	return ok, err
}

// compilePattern compiles the ECMA-262 pattern p (see ecma.Compile): its
// RE2 translation, an *ecma.Regexp, or, when RE2 cannot express it, a
// *backtrackRegexp whose matches clock bounds. An error says what is
// wrong in p and where.
func compilePattern(p string, clock *patternClock) (jsonschema.Regexp, error) {
	re, bt, err := ecma.Compile(p)
	switch {
	case err != nil:
		return nil, err
	case bt != nil:
		return &backtrackRegexp{re: bt, src: p, clock: clock}, nil
	}
	return re, nil
}

// ecmaRegexpEngine is the schema library's regexp engine for the schema's
// "pattern" and "patternProperties": ECMA-262 patterns (see
// compilePattern), their backtracking matches bounded by clock.
//
// A pattern that is not ECMA-262 but that Go's RE2 compiles keeps the RE2
// meaning it had before patterns were translated ((?i), [[:alpha:]], \A,
// \z, (?P<name>...), a{,3}): refusing it refused every queued job of a
// batch enqueued with it, at its worker's first delivery.
func ecmaRegexpEngine(p string, clock *patternClock) (jsonschema.Regexp, error) {
	re, err := compilePattern(p, clock)
	if err != nil {
		if old, rerr := regexp.Compile(p); rerr == nil {
			return old, nil
		}
		return nil, err
	}
	return re, nil
}

// strictRegexpEngine compiles ECMA-262 patterns only: a value a schema says
// is a "regex" (format) must be one. The value is compiled, never matched.
func strictRegexpEngine(p string) (jsonschema.Regexp, error) {
	return compilePattern(p, nil)
}

// noRelease is guard's release for a schema whose patterns all run on RE2.
func noRelease() {}

// guard starts a check of s: for a schema with backtracking patterns it
// waits for the check in progress to end and gives this one a fresh
// budget. The caller calls the returned release when the check ends, and
// must not call guard again before that (the checks' internal steps use
// the unguarded methods: validate, choose, and a Session's).
func (s *Schema) guard() (release func()) {
	if s == nil || s.clock == nil {
		return noRelease
	}
	c := s.clock
	c.mu.Lock()
	c.cur.Store(&patternBudget{left: patternCheckTime})
	return c.release
}

// release ends the check that holds the clock.
func (c *patternClock) release() {
	c.cur.Store(nil)
	c.mu.Unlock()
}

// failures returns how many backtracking matches of the check in progress
// ran out of time so far.
func (s *Schema) failures() int {
	if s == nil || s.clock == nil {
		return 0
	}
	if b := s.clock.cur.Load(); b != nil {
		return len(b.failed)
	}
	return 0
}

// patternErrors adds to errs an error for each string of v that a
// backtracking pattern could not be matched against in time, from the
// from-th failure of the check in progress on. Where the library reported
// the failed match as "does not match", that error says why instead; a
// failure it did not report (under "not", in patternProperties or
// propertyNames) gets an error at the first place holding the string.
func (s *Schema) patternErrors(v any, errs []fixpoint.ValidationError, from int) []fixpoint.ValidationError {
	return s.patternErrorsIn(v, v, "", errs, from)
}

// patternErrorsIn is patternErrors for the errors of x, the value at
// pointer base in v: a failure without an error is looked for in x.
func (s *Schema) patternErrorsIn(v, x any, base string, errs []fixpoint.ValidationError, from int) []fixpoint.ValidationError {
	if s == nil || s.clock == nil {
		return errs
	}
	b := s.clock.cur.Load()
	if b == nil || len(b.failed) <= from {
		return errs
	}
	type pair = patternPair
	var order []pair
	cause := map[pair]error{}
	patterns := map[string]bool{}
	for _, f := range b.failed[from:] {
		if _, ok := cause[f.patternPair]; !ok {
			order = append(order, f.patternPair)
			cause[f.patternPair] = f.err
		}
		patterns[f.pattern] = true
	}
	why := func(k pair) string {
		switch err := cause[k]; {
		case errors.Is(err, errPatternTime):
			return fmt.Sprintf("could not be checked against the pattern %s: this check's matches against patterns with lookahead, lookbehind or backreferences, which a backtracking engine matches, took over %v in all; reply with fewer or shorter strings", k.pattern, patternCheckTime)
		case errors.Is(err, errPatternStack):
			return fmt.Sprintf("could not be checked against the pattern %s: the match needed more backtracking than allowed (the pattern has lookahead, lookbehind or backreferences, and a backtracking engine matches it); reply with a shorter string", k.pattern)
		}
		return fmt.Sprintf("could not be checked against the pattern %s: the match took over %v (the pattern has lookahead, lookbehind or backreferences, and a backtracking engine matches it); reply with a shorter or simpler string", k.pattern, ecma.MatchTimeout)
	}
	covered := map[pair]bool{}
	for i, e := range errs {
		if e.Keyword != "pattern" {
			continue
		}
		for p := range patterns {
			if !strings.HasSuffix(e.Message, "does not match "+p) {
				continue
			}
			if str, ok := lookupPointer(v, e.Path).(string); ok {
				k := pair{p, str}
				if _, failed := cause[k]; failed {
					errs[i] = newError(e.Path, "pattern", why(k))
					covered[k] = true
				}
			}
		}
	}
	var rest []pair
	subjects := map[string]bool{}
	for _, k := range order {
		if !covered[k] {
			rest = append(rest, k)
			subjects[k.subject] = true
		}
	}
	if len(rest) > 0 {
		at := findStrings(x, subjects)
		for _, k := range rest {
			errs = append(errs, newError(base+at[k.subject], "pattern", why(k)))
		}
	}
	return sortErrors(errs)
}

// findStrings returns, for each string in want, the pointer of the first
// place in v (members in name order) holding it, as a value or as a
// member's name; "" (the root) when none does.
func findStrings(v any, want map[string]bool) map[string]string {
	at := map[string]string{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		if len(at) == len(want) {
			return
		}
		switch x := v.(type) {
		case string:
			if _, ok := at[x]; !ok && want[x] {
				at[x] = path
			}
		case map[string]any:
			names := make([]string, 0, len(x))
			for k := range x {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				p := path + "/" + escapeToken(k)
				if _, ok := at[k]; !ok && want[k] {
					at[k] = p
				}
				walk(x[k], p)
			}
		case []any:
			for i, e := range x {
				walk(e, path+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(v, "")
	return at
}
