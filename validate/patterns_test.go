package validate

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlclark/regexp2/v2"

	"github.com/fixpoint-dev/fixpoint/ecma"
	"github.com/fixpoint-dev/fixpoint/internal/render"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
)

// slowPattern backtracks exponentially on slowString: the lookahead puts
// it on the backtracking engine, (a+)+ tries every split of the a's.
const (
	slowPattern = `^(?=a)(a+)+$`
	slowString  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"
)

func slowSchema(t testing.TB, schema string) *Schema {
	t.Helper()
	return mustCompile(t, strings.ReplaceAll(schema, "SLOW", strconv.Quote(slowPattern)))
}

// One match that runs out of time makes the value invalid, with an error
// saying why at the string's place, instead of "does not match".
func TestPatternMatchTimeout(t *testing.T) {
	t.Parallel()
	s := slowSchema(t, `{"type":"object","properties":{"name":{"type":"string","pattern":SLOW}}}`)
	if s.clock == nil {
		t.Fatal("a schema with a lookahead has no pattern clock")
	}
	start := time.Now()
	errs := s.Validate(map[string]any{"name": slowString})
	took := time.Since(start)
	if len(errs) != 1 || errs[0].Path != "/name" || errs[0].Keyword != "pattern" || !strings.Contains(errs[0].Message, "the match took over 100ms") {
		t.Fatalf("errors = %v; want one at /name saying the match took too long", errs)
	}
	if err := checkErrors(errs); err != nil {
		t.Error(err)
	}
	// The bound shows in the message; how long the check took on this
	// machine is logged, not asserted (timing is for benchmarks).
	t.Logf("took %v; one match is bounded at about %v", took, ecma.MatchTimeout)
	// A string the pattern settles at once is checked as usual.
	if errs := s.Validate(map[string]any{"name": "aaa"}); len(errs) != 0 {
		t.Errorf("aaa: %v; want valid", errs)
	}
	if errs := s.Validate(map[string]any{"name": "b"}); len(errs) != 1 || !strings.HasSuffix(errs[0].Message, "does not match "+slowPattern) {
		t.Errorf("b: %v; want one does-not-match error", errs)
	}
}

// A reply with many strings cannot take a timeout each: the check's
// matches share patternCheckTime, and every string left is reported
// unchecked at once.
func TestPatternCheckBudget(t *testing.T) {
	t.Parallel()
	s := slowSchema(t, `{"type":"array","items":{"type":"string","pattern":SLOW}}`)
	items := make([]any, 200)
	for i := range items {
		items[i] = slowString + strconv.Itoa(i)
	}
	start := time.Now()
	errs := s.Validate(items)
	took := time.Since(start)
	t.Logf("200 slow strings took %v; the budget is %v", took, patternCheckTime)
	if len(errs) != len(items) {
		t.Fatalf("%d errors; want one per string: %v", len(errs), errs)
	}
	timedOut, spent := 0, 0
	for _, e := range errs {
		switch {
		case strings.Contains(e.Message, "the match took over"):
			timedOut++
		case strings.Contains(e.Message, "took over 1s in all"):
			spent++
		default:
			t.Errorf("unexpected error %v", e)
		}
	}
	if timedOut == 0 || spent == 0 || timedOut > 10 {
		t.Errorf("%d timed out, %d not tried; want a few, then the rest at once", timedOut, spent)
	}
	// The next check has its own budget.
	if errs := s.Validate([]any{"aaaa"}); len(errs) != 0 {
		t.Errorf("next check: %v; want valid", errs)
	}
}

// A reply of 20,000 strings, the same one in every place, takes one
// timeout: the check knows the string failed the pattern, and each place
// says it was not checked.
func TestPatternManyStrings(t *testing.T) {
	t.Parallel()
	s := slowSchema(t, `{"type":"array","items":{"type":"string","pattern":SLOW}}`)
	items := make([]any, 20000)
	for i := range items {
		items[i] = slowString
	}
	start := time.Now()
	errs := s.Validate(items)
	took := time.Since(start)
	t.Logf("took %v; the budget is %v", took, patternCheckTime)
	if len(errs) != len(items) {
		t.Fatalf("%d errors; want %d", len(errs), len(items))
	}
	for _, e := range errs {
		if !strings.Contains(e.Message, "could not be checked against the pattern") || !strings.Contains(e.Message, "the match took over") {
			t.Fatalf("error %v; want each place reported unchecked for the one match that timed out", e)
		}
	}
}

// A match that needs more backtracking state than ecma.MaxStack fails
// with that reason; below it, it is made. regexp2's default bound (100,000
// slots) would refuse 60,000 characters.
func TestPatternStackBound(t *testing.T) {
	t.Parallel()
	const pattern = `^(?!x)((a)|(b))*$`
	s := mustCompile(t, `{"type":"string","pattern":`+strconv.Quote(pattern)+`}`)
	re, ok := s.sch.Pattern.(*backtrackRegexp)
	if !ok {
		t.Fatalf("pattern compiled as %T; want the backtracking engine", s.sch.Pattern)
	}
	// The bound under test is the stack's, not time's (the race detector
	// slows matching tenfold).
	re.re.MatchTimeout = time.Minute
	medium := strings.Repeat("ab", 30_000)
	if _, err := regexp2.MustCompile(pattern, regexp2.ECMAScript|regexp2.Unicode).MatchString(medium); !errors.Is(err, regexp2.ErrBacktrackingStackLimit) {
		t.Errorf("regexp2's default stack bound, 60,000 characters: %v; want it exceeded", err)
	}
	if errs := s.Validate(medium); len(errs) != 0 {
		t.Errorf("60,000 characters: %v; want valid", errs)
	}
	errs := s.Validate(strings.Repeat("ab", 500_000))
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "needed more backtracking than allowed") {
		t.Errorf("1,000,000 characters: %d errors; want one saying the match needed too much backtracking", len(errs))
		if len(errs) > 0 {
			t.Log(render.Shorten(errs[0].Message, 300))
		}
	}
}

// A match out of time never lets a value through where "no match" would:
// under "not", in patternProperties, in propertyNames.
func TestPatternTimeoutNeverValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, value string }{
		{`{"not":{"pattern":SLOW}}`, strconv.Quote(slowString)},
		{`{"patternProperties":{SLOW:false}}`, `{` + strconv.Quote(slowString) + `:1}`},
		{`{"propertyNames":{"not":{"pattern":SLOW}}}`, `{` + strconv.Quote(slowString) + `:1}`},
	} {
		s := slowSchema(t, tc.schema)
		errs := s.Validate(mustDecode(t, tc.value))
		if len(errs) == 0 {
			t.Errorf("%s against %s: valid; want an error saying the string could not be checked", tc.value, tc.schema)
			continue
		}
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Message, "could not be checked against the pattern")
		}
		if !found {
			t.Errorf("%s against %s: %v; want one saying the string could not be checked", tc.value, tc.schema, errs)
		}
	}
}

// Checks of one schema with backtracking patterns run one at a time, each
// with its own budget; checks of other schemas are not held up.
func TestPatternConcurrentChecks(t *testing.T) {
	t.Parallel()
	s := slowSchema(t, `{"type":"string","pattern":SLOW}`)
	fast := mustCompile(t, `{"type":"string","pattern":"^(?!x)a+$"}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if errs := s.Validate("aaaa"); len(errs) != 0 {
				t.Errorf("check %d: %v; want valid", i, errs)
			}
			if errs := fast.Validate("aaa"); len(errs) != 0 {
				t.Errorf("check %d: %v; want valid", i, errs)
			}
			if errs := fast.Validate("xaa"); len(errs) != 1 {
				t.Errorf("check %d: %v; want one error", i, errs)
			}
		})
	}
	wg.Wait()
	if err := s.Satisfiable(); err != nil {
		t.Errorf("Satisfiable: %v", err)
	}
}

// A schema whose required name takes its own pattern too long is not
// refused as unsatisfiable on that account.
func TestPatternTimeoutSatisfiable(t *testing.T) {
	t.Parallel()
	s := slowSchema(t, `{"type":"object","required":[`+strconv.Quote(slowString)+`],"patternProperties":{SLOW:false}}`)
	if err := s.Satisfiable(); err != nil {
		t.Errorf("Satisfiable: %v; want nil (the name does not match the pattern)", err)
	}
}

// Schemas whose patterns RE2 matches have no clock and no serialization.
func TestPatternRE2NoClock(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{schematest.TypicalSchema, `{"pattern":"^(a+)+$"}`, `{"patternProperties":{"(?i)^x$":{}}}`, `{"format":"regex"}`} {
		if s := mustCompile(t, schema); s.clock != nil {
			t.Errorf("%s: has a pattern clock; want none", schema)
		}
	}
	for _, schema := range []string{`{"pattern":"(?=a)"}`, `{"patternProperties":{"(a)\\1":{}}}`, `{"propertyNames":{"pattern":"a{1001}"}}`} {
		if s := mustCompile(t, schema); s.clock == nil {
			t.Errorf("%s: no pattern clock; want one", schema)
		}
	}
}

// BenchmarkValidatePatterns validates the 1 MB array of line objects with
// the sku pattern as it is (RE2) and with a lookahead added (the
// backtracking engine, under the schema's pattern clock).
func BenchmarkValidatePatterns(b *testing.B) {
	for _, bc := range []struct{ name, pattern string }{
		{"re2", `^[A-Z]{3}-[0-9]{4}$`},
		{"backtracking", `^(?!XYZ)[A-Z]{3}-[0-9]{4}$`},
	} {
		line := strings.Replace(schematest.LineSchema(), `"^[A-Z]{3}-[0-9]{4}$"`, strconv.Quote(bc.pattern), 1)
		if !strings.Contains(line, strconv.Quote(bc.pattern)) {
			b.Fatal("the line schema has no sku pattern")
		}
		s := mustCompile(b, `{"type":"array","items":`+line+`}`)
		if (s.clock != nil) != (bc.name == "backtracking") {
			b.Fatalf("%s: clock %v", bc.name, s.clock)
		}
		text := bigArray(1<<20, 10)
		v := mustDecode(b, text)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				s.Validate(v)
			}
		})
	}
}
