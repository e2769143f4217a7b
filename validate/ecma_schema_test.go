package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The tester's cases, through Compile and Validate: pattern,
// patternProperties, propertyNames and format "regex" all use the ECMA-262
// reading.
func TestEcmaSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema, value string
		valid         bool
	}{
		{`{"type":"string","pattern":"^\\s+$"}`, `"\u00a0"`, true},
		{`{"type":"string","pattern":"^\\s+$"}`, `"\u2003"`, true},
		{`{"type":"string","pattern":"^\\s+$"}`, `"\u000b"`, true},
		{`{"type":"string","pattern":"^\\s+$"}`, `"\ufeff"`, true},
		{`{"type":"string","pattern":"^\\s+$"}`, `"a"`, false},
		{`{"type":"string","pattern":"^\\S+$"}`, `"a\u00a0b"`, false},
		{`{"type":"string","pattern":"^\\S+$"}`, `"ab"`, true},
		{`{"propertyNames":{"pattern":"^\\S+$"}}`, `{"a\u00a0b":1}`, false},
		{`{"propertyNames":{"pattern":"^\\S+$"}}`, `{"ab":1}`, true},
		{`{"patternProperties":{"^\\s+$":{"type":"integer"}}}`, `{"\u00a0":"x"}`, false},
		{`{"patternProperties":{"^\\s+$":{"type":"integer"}}}`, `{"a":"x"}`, true},
		{`{"pattern":"^.$"}`, `"\r"`, false},
		{`{"pattern":"^.$"}`, `"\u2028"`, false},
		{`{"pattern":"^.$"}`, `"a"`, true},
		{`{"pattern":"^\\u0041$"}`, `"A"`, true},
		{`{"pattern":"[^\\u0000-\\u001F]"}`, `"a"`, true},
		{`{"pattern":"^[^\\u0000-\\u001F]+$"}`, `"a\u0001"`, false},
		{`{"pattern":"^\\cJ$"}`, `"\n"`, true},
		{`{"pattern":"^[^]$"}`, `"\n"`, true},
		{`{"pattern":"^\\ud83d\\ude00$"}`, `"\ud83d\ude00"`, true},
		{`{"format":"regex"}`, `"^\\s+$"`, true},
		{`{"format":"regex"}`, `"[^]"`, true},
		{`{"format":"regex"}`, `"\\Z"`, false},
		{`{"format":"regex"}`, `"(?i)abc"`, false},
		// Lookahead, lookbehind and backreferences, in every place a
		// pattern goes.
		{`{"type":"string","pattern":"^(?!io\\.papermc\\.)[a-z.]+$"}`, `"org.example"`, true},
		{`{"type":"string","pattern":"^(?!io\\.papermc\\.)[a-z.]+$"}`, `"io.papermc.paper"`, false},
		{`{"type":"string","pattern":"^(?=.*\\S)\\S+$"}`, `"a\u00a0b"`, false},
		{`{"patternProperties":{"^(?<!_)x$":{"type":"integer"}}}`, `{"x":"s"}`, false},
		{`{"patternProperties":{"^(?<!_)x$":{"type":"integer"}}}`, `{"x":1}`, true},
		{`{"propertyNames":{"pattern":"^(.)\\1$"}}`, `{"aa":1}`, true},
		{`{"propertyNames":{"pattern":"^(.)\\1$"}}`, `{"ab":1}`, false},
		{`{"not":{"pattern":"(?=x)"}}`, `"abc"`, true},
		{`{"not":{"pattern":"(?=x)"}}`, `"axc"`, false},
		{`{"format":"regex"}`, `"(?<=a)b\\k<n>(?<n>c)"`, true},
		{`{"format":"regex"}`, `"(?=a"`, false},
		{`{"format":"regex"}`, `"(a)\\2"`, false},
		{`{"format":"regex"}`, `"(?=\\Z)"`, false},
	} {
		s := mustCompile(t, tc.schema)
		errs := s.Validate(mustDecode(t, tc.value))
		if got := len(errs) == 0; got != tc.valid {
			t.Errorf("%s against %s: valid = %v, want %v; errors: %v", tc.value, tc.schema, got, tc.valid, errs)
		}
		if err := checkErrors(errs); err != nil {
			t.Errorf("%s against %s: %v", tc.value, tc.schema, err)
		}
	}

	// A failure names the pattern as the schema wrote it, not its
	// translation.
	errs := mustCompile(t, `{"pattern":"^\\S+$"}`).Validate("a b")
	if len(errs) != 1 || errs[0].Keyword != "pattern" || !strings.HasSuffix(errs[0].Message, `does not match ^\S+$`) {
		t.Errorf("errors = %v, want one naming ^\\S+$", errs)
	}

	// A refused pattern is a *SchemaError at the keyword, saying why.
	for _, tc := range []struct{ schema, location, want string }{
		{`{"pattern":"^(a{99999999999})$"}`, "/pattern", "repeats at least 99999999999 times: the engine allows at most 2147483647"},
		{`{"properties":{"a":{"pattern":"\\Z"}}}`, "/properties/a/pattern", `"\\Z" at character 1: ECMA-262 has no \Z`},
		{`{"patternProperties":{"a(?=b":{}}}`, "/patternProperties/a(?=b", `this group has no closing ")"`},
		{`{"propertyNames":{"pattern":"(a)\\2"}}`, "/propertyNames/pattern", "a backreference to group 2"},
	} {
		_, err := Compile([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) || se.Location != tc.location || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v; want a *SchemaError at %s containing %q", tc.schema, err, tc.location, tc.want)
		}
	}
}

// The suite's optional ECMA-262 regex files, copied from the same commit
// as the rest of testdata/suite (see its README.md and LICENSE): every
// case runs through Compile and Schema.Validate.
var ecmaSuiteFiles = []string{
	"optional/ecmascript-regex.json",
	"optional/non-bmp-regex.json",
	"optional/format/ecmascript-regex.json",
}

// ecmaSuiteDivergent are the suite cases whose verdict deliberately
// differs, each with its reason. They still run and must give the opposite
// verdict, so that an entry cannot go stale.
// (None since lookahead, lookbehind and backreferences are matched.)
var ecmaSuiteDivergent = map[string]string{}

func TestEcmaSuite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "suite", "tests", "draft2020-12")
	passed, divergent, seen := 0, 0, map[string]bool{}
	for _, file := range ecmaSuiteFiles {
		groups := readSuiteFile(t, filepath.Join(dir, filepath.FromSlash(file)))
		for _, g := range groups {
			s, err := Compile(g.Schema)
			if err != nil {
				t.Errorf("%s: %s: compile: %v", file, g.Description, err)
				continue
			}
			for _, c := range g.Tests {
				key := file + ": " + g.Description + ": " + c.Description
				want := c.Valid
				if _, ok := ecmaSuiteDivergent[key]; ok {
					want = !want
					divergent++
					seen[key] = true
				}
				if suiteCase(t, s, key, c.Data, want) {
					passed++
				}
			}
		}
	}
	for key := range ecmaSuiteDivergent {
		if !seen[key] {
			t.Errorf("divergent case %q is not in the suite", key)
		}
	}
	t.Logf("ECMA-262 regex suite: %d cases passed, %d of them inverted on purpose", passed, divergent)
}

// BenchmarkEcmaEngine compiles 100 typical patterns with the engine the
// schema library is given, and, for comparison, with regexp as written.
func BenchmarkEcmaEngine(b *testing.B) {
	patterns := ecmaBenchPatterns()
	b.Run("ecma", func(b *testing.B) {
		for b.Loop() {
			for _, p := range patterns {
				if _, err := ecmaRegexpEngine(p, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("re2-as-written", func(b *testing.B) {
		for b.Loop() {
			for _, p := range patterns {
				if _, err := regexp.Compile(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkCompile100Patterns compiles a schema of 100 properties, each
// with a pattern.
func BenchmarkCompile100Patterns(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i, p := range ecmaBenchPatterns() {
		if i > 0 {
			sb.WriteByte(',')
		}
		q, _ := json.Marshal(p)
		fmt.Fprintf(&sb, `"p%d":{"type":"string","pattern":%s}`, i, q)
	}
	sb.WriteString(`}}`)
	schema := []byte(sb.String())
	for b.Loop() {
		if _, err := Compile(schema); err != nil {
			b.Fatal(err)
		}
	}
}

// ecmaBenchPatterns are 100 patterns of the kinds schemas hold, valid in
// both dialects.
func ecmaBenchPatterns() []string {
	base := []string{
		`^[A-Z]{3}-[0-9]{4}$`, `^\d{4}-\d{2}-\d{2}$`, `^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$`,
		`^\s*\S.*$`, `^(?:\+?1[-. ]?)?\(?[0-9]{3}\)?[-. ]?[0-9]{3}[-. ]?[0-9]{4}$`,
		`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
		`^https?://[^\s/$.?#].[^\s]*$`, `^(red|green|blue)$`, `^\w+$`, `^[^<>]*$`,
	}
	var out []string
	for i := range 100 {
		out = append(out, base[i%len(base)]+strings.Repeat("x?", i/len(base)))
	}
	return out
}

// Patterns hand-written and generated schemas use, which Go's RE2 took
// before patterns were translated, are not refused: punctuation escapes
// to itself (\- \_ \@, in a class too), as ECMA-262 allows without the u
// flag; and a pattern that is not ECMA-262 at all but compiles in RE2
// ((?i), \A...\z, [[:alpha:]], (?P<n>...)) keeps its RE2 meaning, so a
// batch enqueued with it before runs on (its queued jobs were all
// rejected). A "format": "regex" value must still be ECMA-262.
func TestEcmaLenientEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, match, miss string
	}{
		{`^\d{3}\-\d{4}$`, "555-1234", "5551234"},
		{`^[a-zA-Z0-9\_\-]+$`, "a_b-c", "a b"},
		{`^[\w\s\,\.]+$`, "a, b.\u00a0c", "a;b"},
		{`^\@\:\'\"\#\&\<\>\ $`, `@:'"#&<> `, "@"},
		{`^[^\"]+$`, "abc", `a"c`},
		{`(?i)^abc$`, "ABC", "abd"},
		{`\Aabc\z`, "abc", "abcd"},
		{`^[[:alpha:]]+$`, "abc", "ab1"},
		{`^(?P<n>a+)$`, "aaa", "b"},
	} {
		s, err := Compile([]byte(`{"type":"string","pattern":` + strconv.Quote(tc.pattern) + `}`))
		if err != nil {
			t.Errorf("%s: %v; want it compiled, as before", tc.pattern, err)
			continue
		}
		if errs := s.Validate(tc.match); len(errs) != 0 {
			t.Errorf("%s: %q: %v; want it to match", tc.pattern, tc.match, errs)
		}
		if errs := s.Validate(tc.miss); len(errs) == 0 {
			t.Errorf("%s: %q matched; want not", tc.pattern, tc.miss)
		}
	}
	// What neither ECMA-262 nor RE2 takes is refused, saying why in
	// ECMA-262's terms.
	if _, err := Compile([]byte(`{"type":"string","pattern":"(?i)^(?!x)a"}`)); err == nil || !strings.Contains(err.Error(), "inline flags such as (?i) are not ECMA-262") {
		t.Errorf("(?i) with a lookahead: %v; want refused naming the inline flags", err)
	}
	s := mustCompile(t, `{"type":"string","format":"regex"}`)
	for _, v := range []string{`(?i)abc`, `\Aabc`} {
		if errs := s.Validate(v); len(errs) == 0 {
			t.Errorf("%q as a format regex value: valid; want refused (not ECMA-262)", v)
		}
	}
}
