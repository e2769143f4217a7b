package ecma

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// ecmaTranslations pins the RE2 text of translations short enough to read.
var ecmaTranslations = []struct{ pattern, want string }{
	{`abc`, `abc`},
	{`^a.b$`, `^a[^\n\r\x{2028}\x{2029}]b$`},
	{`\d\D\w\W\b\B`, `\d\D\w\W\b\B`},
	{`[^]`, `[\x00-\x{10FFFF}]`},
	{`[]`, `[^\x00-\x{10FFFF}]`},
	{`^\u0041\x42\u{43}$`, `^ABC$`},
	{`[^\u0000-\u001F]`, `[^\x{0}-\x{1F}]`},
	{`^\cJ\cj\0$`, `^\x{A}\x{A}\x{0}$`},
	{`\/\.\*\\`, `/\.\*\\`},
	{`(?<name>a)(?:b)(c)`, `(a)(?:b)(c)`},
	{`\p{Letter}\p{gc=Lu}\P{Script=Greek}\p{sc=Latn}`, `\p{L}\p{Lu}\P{Greek}\p{Latin}`},
	{`a{01,002}b{2,2}c{3,}d*?e+?f??g{1,2}?`, `a{1,2}b{2}c{3,}d*?e+?f??g{1,2}?`},
	{`\ud83d\ude00*`, "\U0001F600*"},
	{`\ud800`, `[^\x00-\x{10FFFF}]`},
	{`[\ud800a]`, `a`},
	{`[.]`, `\.`},
	{`[a-z_\-]`, `[\x{2D}_a-z]`},
	{`[\d\p{L}x]`, `[\d\p{L}x]`},
	{`(?i:ab(?-i:c))(?s:.)(?m:d)`, `(?i:ab(?-i:c))(?:[\x00-\x{10FFFF}])(?:d)`},
	{`^\s$`, `^[\x{9}-\x{D}\x{20}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}]$`},
	{`a|b|`, `a|b|`},
	{``, ``},
}

func TestEcmaPatternTranslation(t *testing.T) {
	t.Parallel()
	for _, tc := range ecmaTranslations {
		got, err := ecmaPattern(tc.pattern)
		if err != nil || got != tc.want {
			t.Errorf("ecmaPattern(%q) = %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
}

// ecmaMatchCases are verdicts ECMA-262 (with the u flag) gives, each
// checked against the translation compiled with regexp.
var ecmaMatchCases = []struct {
	pattern string
	match   []string
	noMatch []string
}{
	// \s is WhiteSpace and LineTerminator, not RE2's [\t\n\f\r ]. U+0085
	// and U+180E are not in it, nor U+200B.
	{`^\s+$`, []string{"\u00a0", "\u2003", "\u000b", "\ufeff", " \t\n\r\f", "\u1680", "\u2028\u2029", "\u202f\u205f\u3000"}, []string{"", "a", "\u200b", "\u0085", "\u180e"}},
	{`^\S+$`, []string{"abc", "\u0085", "\u200b"}, []string{"a\u00a0b", "\ufeff", "a b", "a\u000bb"}},
	{`^[\S]+$`, []string{"abc", "\u0085"}, []string{"a\u00a0b", "\ufeff"}},
	{`^[^\s]+$`, []string{"abc"}, []string{"a\u00a0b", "\u3000"}},
	{`^[^\S]$`, []string{"\u00a0", "\n", "\ufeff"}, []string{"a"}},
	{`^[\s\d]+$`, []string{" 1\u00a0"}, []string{"a"}},
	{`^[\S\s]$`, []string{"\n", "a", "\u2028"}, []string{"", "ab"}},
	{`^[^\S\s]?$`, []string{""}, []string{"a", " "}},
	// "." stops at \n, \r, U+2028 and U+2029 only, and takes one code
	// point.
	{`^.$`, []string{"a", "é", "😀", "\u0085", "\u00a0", "\t"}, []string{"\n", "\r", "\u2028", "\u2029", "", "ab"}},
	{`^(?s:.)$`, []string{"\n", "\r", "\u2028", "a"}, []string{""}},
	{`^(?s:.(?-s:.))$`, []string{"\na"}, []string{"\n\n"}},
	// Escapes RE2 reads otherwise or not at all.
	{`^\u0041$`, []string{"A"}, []string{"u0041", `\u0041`}},
	{`^[^\u0000-\u001F]+$`, []string{"abc", "é"}, []string{"a\u0001", "\t"}},
	{`^\u{1F600}\u{41}\u{0000000042}$`, []string{"😀AB"}, nil},
	{`^\x41\x7e$`, []string{"A~"}, nil},
	{`^\cJ\cj\cA$`, []string{"\n\n\u0001"}, []string{"cJcjcA"}},
	{`^\0$`, []string{"\x00"}, []string{"0"}},
	{`^\t\n\v\f\r$`, []string{"\t\n\v\f\r"}, nil},
	{`^[\b]$`, []string{"\b"}, []string{"b"}},
	{`\bfoo\b`, []string{"a foo b", "foo"}, []string{"afoo", "foox"}},
	// A surrogate pair is one code point; a lone surrogate matches nothing
	// a Go string holds.
	{`^\ud83d\ude00$`, []string{"😀"}, []string{"\ufffd\ufffd"}},
	{`^\ud83d\ude00+$`, []string{"😀😀"}, []string{""}},
	{`^[\ud83d\ude00-\ud83d\ude4f]$`, []string{"😀", "🙂"}, []string{"a", "\U0001F650"}},
	{`^[😀-🙏]$`, []string{"🙂"}, []string{"a"}},
	{`^\ud800$`, nil, []string{"\ufffd", "\xed\xa0\x80"}},
	{`^[\ud800-\udfff]$`, nil, []string{"\ufffd", "\xed\xa0\x80"}},
	{`^[^\ud800]$`, []string{"a", "\ufffd"}, nil},
	{`^\p{Cs}?$`, []string{""}, []string{"\ufffd"}},
	// [^] is any character, [] none.
	{`^[^]$`, []string{"\n", "a", "\u2028"}, []string{"", "ab"}},
	{`^[^]*$`, []string{"a\nb", ""}, nil},
	{`^[]?$`, []string{""}, []string{"a"}},
	{`[]`, nil, []string{"", "a", "[]"}},
	// Identity escapes of syntax characters and /; classes of them.
	{`^\/\.\*\+\?\(\)\[\]\{\}\|\^\$\\$`, []string{`/.*+?()[]{}|^$\`}, nil},
	{`^[.*+?^${}()|[\]\\/-]+$`, []string{`.*+?^${}()|[]\/-`}, []string{"a"}},
	{`^[a-z-]+$`, []string{"a-b"}, []string{"A"}},
	{`^[-a]+$`, []string{"-a"}, []string{"b"}},
	{`^[\w-]+$`, []string{"a-b_1"}, []string{"é"}},
	{`^[\-a]+$`, []string{"-a"}, nil},
	{`^[+--]+$`, []string{"+,-"}, []string{"a"}},
	// \d, \w, \b are ASCII in both dialects.
	{`^\d+$`, []string{"0123"}, []string{"\u0660", "\u09ea"}},
	{`^\w+$`, []string{"abc_09"}, []string{"é", "ſ", "\u212a"}},
	{`^\W$`, []string{"é", "-", "ſ"}, []string{"a"}},
	{`^\D$`, []string{"\u0660"}, []string{"1"}},
	// $ is the end of the input, not before a final newline.
	{`^abc$`, []string{"abc"}, []string{"abc\n", "abc\r\n"}},
	{`^a|b$`, []string{"ax", "xb"}, []string{"xa", "bx"}},
	// Groups.
	{`^(?<year>\d{4})-(?<month>\d\d)$`, []string{"2024-01"}, []string{"24-01"}},
	{`^(?<$é_1>a)$`, []string{"a"}, nil},
	{`^(?<\u0061b>a)$`, []string{"a"}, nil},
	{`^(?:(?<x>a)|(?<x>b))$`, []string{"a", "b"}, []string{"ab"}},
	{`^(?:(?<x>a)|(?:(?<x>b)|(?<x>c)))|(?<x>d)$`, []string{"a", "c", "d"}, nil},
	{`^(a|bc)+$`, []string{"abca"}, []string{"b"}},
	{`^()*(?:)a$`, []string{"a"}, nil},
	// Quantifiers.
	{`^a{2}$`, []string{"aa"}, []string{"a", "aaa"}},
	{`^a{2,}$`, []string{"aa", "aaaa"}, []string{"a"}},
	{`^a{01,002}$`, []string{"a", "aa"}, []string{"a{01,002}", "aaa"}},
	{`^x{0}$`, []string{""}, []string{"x"}},
	{`^a+?b*?c??$`, []string{"aac", "ab"}, nil},
	{`^(?:ab){1000}$`, []string{strings.Repeat("ab", 1000)}, []string{strings.Repeat("ab", 999)}},
	// Unicode property escapes.
	{`^\p{Letter}+$`, []string{"éa", "Ωж"}, []string{"1", "a1"}},
	{`^\p{L}\p{Lu}\p{gc=Ll}\p{General_Category=Nd}$`, []string{"xAb1"}, []string{"xab1"}},
	{`^\p{digit}+$`, []string{"42", "\u09ea\u09e8"}, []string{"-"}},
	{`^\p{Script=Greek}+$`, []string{"αβγ"}, []string{"abc"}},
	{`^\p{sc=Grek}\p{Script=Latn}$`, []string{"αa"}, []string{"aα"}},
	{`^\P{L}+$`, []string{"123"}, []string{"a"}},
	{`^[\p{Lu}\d]+$`, []string{"A1"}, []string{"a"}},
	{`^[^\p{L}]+$`, []string{"12"}, []string{"a"}},
	{`^[\P{L}a]+$`, []string{"1a"}, []string{"b"}},
	{`^\p{Lowercase}$`, []string{"a", "ª"}, []string{"A"}},
	{`^\p{Upper}$`, []string{"A", "Ⓐ"}, []string{"a"}},
	{`^\p{Alphabetic}+$`, []string{"aé", "Ⅻ"}, []string{"1"}},
	{`^\p{White_Space}$`, []string{"\u0085", " "}, []string{"\ufeff"}},
	{`^\p{ASCII}+$`, []string{"abc~\x00"}, []string{"é"}},
	{`^\p{Any}$`, []string{"\n", "😀"}, []string{""}},
	{`^\p{Assigned}$`, []string{"a"}, []string{"\u0378"}},
	{`^\p{Other}$`, []string{"\u0378", "\u0001"}, []string{"a"}},
	{`^\p{Cn}$`, []string{"\u0378"}, []string{"a"}},
	{`^\p{Script=Unknown}$`, []string{"\u0378"}, []string{"a"}},
	{`^\p{Script=Hrkt}?$`, []string{""}, []string{"あ"}},
	{`^\p{ID_Start}\p{ID_Continue}*$`, []string{"a1", "é_", "℘"}, []string{"1a", "_a"}},
	{`^\p{Math}$`, []string{"+", "∑"}, []string{"a"}},
	{`^\p{Cased}$`, []string{"a", "ǅ"}, []string{"1"}},
	{`^\p{Grapheme_Extend}$`, []string{"\u0301"}, []string{"a"}},
	{`^\p{Grapheme_Base}$`, []string{"a"}, []string{"\u0301", "\u0001"}},
	// Modifiers (ES2025).
	{`^(?i:ab)c$`, []string{"ABc", "abc"}, []string{"ABC"}},
	{`^(?i:a(?-i:b))$`, []string{"Ab", "ab"}, []string{"AB"}},
	{`^(?i:k)$`, []string{"K", "\u212a"}, nil},
	{`^(?i:ß)$`, []string{"ẞ"}, nil},
	{`^(?i:\w)$`, []string{"ſ", "\u212a", "S"}, []string{"-"}},
	{`^(?i:\W)$`, []string{"-"}, []string{"ſ", "\u212a", "s"}},
	{`^(?i:[^\W])$`, []string{"ſ", "a"}, []string{"-"}},
	// ECMA-262 folds \P{Lu}'s members, which include "a": "A" matches.
	// Only an uppercase letter with no other case (ℂ) does not.
	{`^(?i:\P{Lu})$`, []string{"A", "a", "1"}, []string{"ℂ"}},
	{`^(?i:[\P{Lu}])$`, []string{"A"}, []string{"ℂ"}},
	{`^(?i:\p{Lu})$`, []string{"a", "A"}, []string{"1"}},
	{`^(?i:[^\p{Lu}])$`, []string{"1"}, []string{"a", "A"}},
	{`^(?m:a)$`, []string{"a"}, nil},
	// What RE2 cannot express runs on the backtracking engine, with the
	// same ECMA-262 meanings (\s, ".", \u escapes) around it.
	{`^(?!io\.papermc\.)[a-z]+(\.[a-z]+)*$`, []string{"org.example", "io.paper"}, []string{"io.papermc.paper", "Org"}},
	// A plugin's main class, as SchemaStore's paper-plugin schema has it.
	{`^(?!io\.papermc\.)([a-zA-Z_$][a-zA-Z\d_$]*\.)*[a-zA-Z_$][a-zA-Z\d_$]*$`, []string{"com.example.Main", "Main", "io.paper.X"}, []string{"io.papermc.paper.Main", "com.1x", "a..b", strings.Repeat("a.", 5000) + "!"}},
	{`^(?=.*\d)(?=.*[a-z])\S{8,}$`, []string{"abcdefg1"}, []string{"abcdefgh", "abc defg1", "abcdefg1\u00a0", "abc1"}},
	{`(?<=\$)\d+`, []string{"$42"}, []string{"42", "€42"}},
	{`^(?<!x)a`, []string{"a"}, nil},
	{`(?<!x)y`, []string{"ay", "y"}, []string{"xy"}},
	{`^(?<=\d{3})x|^\d{3}(?<=\d{3})x$`, []string{"123x"}, []string{"12x"}},
	{`^(a|b)\1$`, []string{"aa", "bb"}, []string{"ab", "a"}},
	{`^(?<q>["'])[^"']*\k<q>$`, []string{`"x"`, `'x'`}, []string{`"x'`}},
	{`^\k<x>(?<x>a)$`, []string{"a"}, []string{"aa"}},
	{`^(?:(?<x>a)|(?<x>b))\k<x>$`, []string{"aa", "bb"}, []string{"ab"}},
	{`^(a)\1{2}$`, []string{"aaa"}, []string{"aa"}},
	{`^(?=\s)[^]$`, []string{"\u00a0", "\ufeff"}, []string{"a"}},
	{`^(?!.)$|^\u0041(?=.)[^].$`, []string{"", "Abc", "Abb"}, []string{"A\nb", "Ab", "A\u2028b"}},
	{`^(?i:A(?=b))B$`, []string{"aB", "AB"}, []string{"ab"}},
	{`^a{1001}$`, []string{strings.Repeat("a", 1001)}, []string{strings.Repeat("a", 1000)}},
	{`^a{0,1001}$`, []string{strings.Repeat("a", 1001)}, []string{strings.Repeat("a", 1002)}},
	{`^(?:(?:a{100}){100})$`, []string{strings.Repeat("a", 10000)}, []string{strings.Repeat("a", 9999)}},
}

func TestEcmaPatternMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range ecmaMatchCases {
		re, bt, err := Compile(tc.pattern)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.pattern, err)
			continue
		}
		engine, match := "RE2", func(s string) (bool, error) { return Match(re, s) }
		if bt != nil {
			engine, match = "backtracking", bt.MatchString
		}
		for _, s := range tc.match {
			if m, err := match(s); !m || err != nil {
				t.Errorf("%q (%s) does not match %q (%v); ECMA-262 does", tc.pattern, engine, s, err)
			}
		}
		for _, s := range tc.noMatch {
			if m, err := match(s); m || err != nil {
				t.Errorf("%q (%s) matches %q (%v); ECMA-262 does not", tc.pattern, engine, s, err)
			}
		}
	}
}

// The backtracking engine, in its ECMAScript and Unicode mode, gives the
// ECMA-262 verdicts of every case the translation is pinned to: a pattern
// that needs it means what the same text means where RE2 matches it.
func TestEcmaBacktrackAgrees(t *testing.T) {
	t.Parallel()
	for _, tc := range ecmaMatchCases {
		re, err := regexp2.Compile(tc.pattern, regexp2.ECMAScript|regexp2.Unicode)
		if err != nil {
			t.Errorf("regexp2.Compile(%q): %v", tc.pattern, err)
			continue
		}
		for _, s := range tc.match {
			if ok, err := re.MatchString(s); !ok || err != nil {
				t.Errorf("%q (backtracking) does not match %q (%v); ECMA-262 does", tc.pattern, s, err)
			}
		}
		for _, s := range tc.noMatch {
			if ok, err := re.MatchString(s); ok || err != nil {
				t.Errorf("%q (backtracking) matches %q (%v); ECMA-262 does not", tc.pattern, s, err)
			}
		}
	}
}

// ecmaErrorCases are patterns refused, with a part of the reason and the
// character (from 1) it names; 0 for none.
var ecmaErrorCases = []struct {
	pattern string
	want    string
	at      int
}{
	// Lookarounds are assertions; a backreference names a group that is
	// there.
	{`(?=a)*`, "cannot be repeated", 1},
	{`a(?<!b)+`, "cannot be repeated", 2},
	{`(a)\2`, "a backreference to group 2, and the pattern has 1 capturing groups", 4},
	{`\1`, "a backreference to group 1, and the pattern has 0", 1},
	{`(a)\10`, "group 10", 4},
	{`(?<n>a)\k<m>`, `\k<m> refers to a group named "m"`, 8},
	{`\k`, `\k is a backreference`, 1},
	{`\k<n`, `no closing ">"`, 1},
	{`(?<=a`, `no closing ")"`, 1},
	// A letter or digit escape must be one of ECMA-262's (other characters
	// escape to themselves, as without the u flag: see
	// TestEcmaLenientEscapes).
	{`\Z`, `ECMA-262 has no \Z`, 1},
	{`a\z`, `ECMA-262 has no \z`, 2},
	{`\A`, `ECMA-262 has no \A`, 1},
	{`\a`, `write \x07`, 1},
	{`\q`, "not an ECMA-262 escape", 1},
	{`a\`, `cannot end with \`, 2},
	{`\u00G0`, "four hex digits", 1},
	{`\u{110000}`, "past U+10FFFF", 1},
	{`\u{}`, `\u{ must be followed by hex digits`, 1},
	{`\x4`, "two hex digits", 1},
	{`\c1`, `\c must be followed by a letter`, 1},
	{`\00`, "octal escapes are not allowed", 1},
	// Lone brackets and quantifiers with nothing to repeat.
	{`]`, "a lone ']'", 1},
	{`a}`, "a lone '}'", 2},
	{`{`, `a lone "{"`, 1},
	{`a{`, `a lone "{"`, 2},
	{`a{1`, `a lone "{"`, 2},
	{`a{,2}`, `a lone "{"`, 2},
	{`x{2}{3}`, "nothing to repeat", 5},
	{`a**`, "nothing to repeat", 3},
	{`a??+`, "nothing to repeat", 4},
	{`*a`, "nothing to repeat", 1},
	{`{2}`, "nothing to repeat", 1},
	{`^*`, "cannot be repeated", 1},
	{`\b+`, "cannot be repeated", 1},
	{`$?`, "cannot be repeated", 1},
	{`a{2,1}`, "out of order", 2},
	// Counts over RE2's limit of 1000 run on the backtracking engine, up
	// to its own.
	{`a{99999999999999999999}`, "at most 2147483647", 2},
	{`a{2147483648,}`, "at most 2147483647", 2},
	{`a{1,2147483648}`, "at most 2147483647", 2},
	{strings.Repeat("(", 1001) + strings.Repeat(")", 1001), "at most 1000", 1001},
	// Classes.
	{`[z-a]`, "range out of order", 2},
	{`[\d-z]`, "cannot bound a range", 2},
	{`[a-\s]`, "cannot bound a range", 2},
	{`[\B]`, `\B is not allowed`, 2},
	{`[\1]`, "backreference is not allowed", 2},
	{`[`, `no closing "]"`, 1},
	{`[a`, `no closing "]"`, 1},
	// Groups.
	{`(`, `no closing ")"`, 1},
	{`a(b`, `no closing ")"`, 2},
	{`)`, `no "(" opens this group`, 1},
	{`a)`, `no "(" opens this group`, 2},
	{`(?P<n>x)`, "Python syntax", 1},
	{`(?#c)`, "comments are not ECMA-262", 1},
	{`(?i)abc`, "inline flags", 1},
	{`(?ims)`, "inline flags", 1},
	{`(?x:a)`, "not an ECMA-262 group", 1},
	{`(?<x)`, "identifier", 5},
	{`(?ii:a)`, "appears twice", 4},
	{`(?i-i:a)`, "both added and removed", 1},
	{`(?-:a)`, "names no modifier", 1},
	{`(?m:^a)`, "m modifier are not supported", 5},
	{`(?m:a$)`, "m modifier are not supported", 6},
	{`(?<a>x)(?<a>y)`, `two groups are named "a"`, 8},
	{`(?<a>x(?<a>y))`, `two groups are named "a"`, 7},
	{`(?:(?<a>1)|(?<a>2))(?<a>3)`, `two groups are named "a"`, 20},
	{`((?<a>x))((?<a>y))`, `two groups are named "a"`, 11},
	{`(?<a>x)|(?:y|(?<a>z))(?<a>w)`, `two groups are named "a"`, 22},
	{`(?<1a>x)`, "identifier", 4},
	{`(?<a-b>x)`, "identifier", 5},
	{`(?<>x)`, "empty", 1},
	{`(?<a`, `no closing ">"`, 1},
	// Unicode properties.
	{`\p{letter}`, "case-sensitive", 1},
	{`\p{Greek}`, `write \p{Script=Greek}`, 1},
	{`\p{Script_Extensions=Greek}`, "Script_Extensions is not supported", 1},
	{`\p{Emoji}`, "not supported: Go's Unicode tables", 1},
	{`\p{Foo=Bar}`, "not a property", 1},
	{`\p{Script=Foo}`, "not a script", 1},
	{`\p{gc=Greek}`, "not a general category", 1},
	{`\p`, "must be followed by {property}", 1},
	{`a\p{L`, `no closing "}"`, 2},
	{`\p{L-u}`, "only letters, digits", 1},
	{"\xff", "not valid UTF-8", 0},
}

func TestEcmaPatternErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range ecmaErrorCases {
		got, err := ecmaPattern(tc.pattern)
		var e *ecmaError
		if !errors.As(err, &e) {
			t.Errorf("ecmaPattern(%q) = %q, %v; want an *ecmaError", tc.pattern, got, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || e.At != tc.at {
			t.Errorf("ecmaPattern(%q): %v (at %d); want %q at %d", tc.pattern, err, e.At, tc.want, tc.at)
		}
	}
}

// ecmaFuzzSeeds are the patterns of every table above.
func ecmaFuzzSeeds() []string {
	var seeds []string
	for _, tc := range ecmaTranslations {
		seeds = append(seeds, tc.pattern)
	}
	for _, tc := range ecmaMatchCases {
		seeds = append(seeds, tc.pattern)
	}
	for _, tc := range ecmaErrorCases {
		seeds = append(seeds, tc.pattern)
	}
	return seeds
}

// FuzzEcmaPattern checks that the translator never panics, that every
// pattern it accepts compiles in the engine chosen for it and matches
// without panicking (RE2 when it can express the pattern: then the
// translation compiles with regexp.Compile), and that a refusal is an
// *ecmaError pointing into the pattern, never RE2 refusing a translation
// for anything but its size limits.
func FuzzEcmaPattern(f *testing.F) {
	for _, p := range ecmaFuzzSeeds() {
		f.Add(p, "a b\u00a0\n😀")
	}
	f.Fuzz(func(t *testing.T, p, subject string) {
		re, bt, err := Compile(p)
		if err != nil {
			var e *ecmaError
			if !errors.As(err, &e) {
				t.Fatalf("Compile(%q): %T %v is not an *ecmaError", p, err, err)
			}
			if e.At < 0 || e.At > utf8.RuneCountInString(p) {
				t.Fatalf("Compile(%q): %v: character %d is outside the pattern", p, err, e.At)
			}
			if strings.Contains(e.Reason, "refused the translated pattern") {
				src, _, _ := translateECMA(p)
				t.Fatalf("Compile(%q): translated to %q, which RE2 refuses: %v", p, src, err)
			}
			if strings.Contains(e.Reason, "backtracking engine that matches such patterns refused it") {
				t.Fatalf("Compile(%q): the translator accepts it, the backtracking engine does not: %v", p, err)
			}
			return
		}
		switch {
		case re != nil && bt == nil:
			src, needs, err := translateECMA(p)
			if err != nil || needs != "" {
				t.Fatalf("Compile(%q) chose RE2, but translateECMA says %q, %v", p, needs, err)
			}
			if _, err := regexp.Compile(src); err != nil {
				t.Fatalf("translation %q of %q does not compile: %v", src, p, err)
			}
			re.MatchString(subject)
			if re.String() != p {
				t.Fatalf("Compile(%q) prints as %q", p, re.String())
			}
		case bt != nil && re == nil:
			if _, err := regexp2.Compile(p, regexp2.ECMAScript|regexp2.Unicode); err != nil {
				t.Fatalf("%q chose the backtracking engine, which refuses it: %v", p, err)
			}
			if bt.MatchTimeout != MatchTimeout {
				t.Fatalf("%q: match timeout %v, want %v", p, bt.MatchTimeout, MatchTimeout)
			}
			_, _ = bt.MatchString(subject)
			if bt.String() != p {
				t.Fatalf("Compile(%q) prints as %q", p, bt.String())
			}
		default:
			t.Fatalf("Compile(%q) = %v, %v", p, re, bt)
		}
	})
}
