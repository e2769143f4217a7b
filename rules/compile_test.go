package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const period = `{"start":{"type":"string"},"end":{"type":"string"},"n":{"type":"integer"},"x":{"type":"number"}}`

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxRules+1)
	for i := range many {
		many[i] = `{"rule":"true"}`
	}
	for _, tc := range []struct {
		name, schema string
		// want are fragments of the error, in order; the first is the
		// location it names.
		want []string
	}{
		{name: "syntax", schema: objectWith(period, "self.end >= "),
			want: []string{"rules: /x-fixpoint-rules/0 (self.end >= ): ", "Syntax error", "(at 1:13)"}},
		{name: "unknown function", schema: objectWith(period, "isBefore(self.start, self.end)"),
			want: []string{"/x-fixpoint-rules/0", "undeclared reference to 'isBefore'", "(at 1:9)"}},
		{name: "not a bool", schema: objectWith(period, "self.n + 1"),
			want: []string{"/x-fixpoint-rules/0", "a rule must be true or false, this one gives int"}},
		{name: "unknown field", schema: objectWith(period, "self.end >= self.strat"),
			want: []string{"/x-fixpoint-rules/0", "undefined field 'strat'", "(at 1:17)"}},
		{name: "unknown field in an item", schema: `{"type":"object","properties":{"lines":{"type":"array","items":{"type":"object",
			"properties":{"qty":{"type":"integer"}}}}},"x-fixpoint-rules":[{"rule":"self.lines.all(l, l.quantity > 0)"}]}`,
			want: []string{"/x-fixpoint-rules/0", "undefined field 'quantity'"}},
		{name: "int == double", schema: objectWith(period, "self.n == self.x"),
			want: []string{"/x-fixpoint-rules/0", "no matching overload for '_==_' applied to '(int, double)'"}},
		{name: "string compared with a number", schema: objectWith(period, "self.start > 3"),
			want: []string{"/x-fixpoint-rules/0", "no matching overload for '_>_' applied to '(string, int)'"}},
		{name: "a rule on a property, nested", schema: `{"type":"object","properties":{"p":` + objectWith(period, "self.nope") + `}}`,
			want: []string{"rules: /properties/p/x-fixpoint-rules/0 (self.nope): ", "undefined field 'nope'"}},
		{name: "not an array", schema: `{"x-fixpoint-rules":{"rule":"true"}}`,
			want: []string{"rules: /x-fixpoint-rules: ", "must be an array"}},
		{name: "not an object", schema: `{"x-fixpoint-rules":["self > 0"]}`,
			want: []string{"rules: /x-fixpoint-rules/0: ", "a rule must be an object"}},
		{name: "no rule", schema: `{"x-fixpoint-rules":[{"message":"m"}]}`,
			want: []string{"/x-fixpoint-rules/0", `"rule" must be a CEL expression`}},
		{name: "unknown key", schema: `{"x-fixpoint-rules":[{"rule":"true","mesage":"m"}]}`,
			want: []string{"/x-fixpoint-rules/0 (true)", `unknown key "mesage"`}},
		{name: "bad severity", schema: `{"x-fixpoint-rules":[{"rule":"true","severity":"warning"}]}`,
			want: []string{"/x-fixpoint-rules/0", `"severity" must be "error" or "warn", got "warning"`}},
		{name: "path not a pointer", schema: `{"x-fixpoint-rules":[{"rule":"true","path":"end"}]}`,
			want: []string{"/x-fixpoint-rules/0", `"path" must be a JSON pointer`}},
		{name: "path names an undeclared property", schema: `{"type":"object","properties":{"end":{"type":"string"}},
			"x-fixpoint-rules":[{"rule":"true","path":"/edn"}]}`,
			want: []string{"/x-fixpoint-rules/0", `"path" "/edn" names "edn", which is not a property of the object`}},
		{name: "path into a string", schema: `{"type":"object","properties":{"end":{"type":"string"}},
			"x-fixpoint-rules":[{"rule":"true","path":"/end/x"}]}`,
			want: []string{"/x-fixpoint-rules/0", `"path" "/end/x" names "x" inside a string`}},
		{name: "rule too long", schema: `{"x-fixpoint-rules":[{"rule":"` + strings.Repeat("true && ", MaxRuleLength/8) + `true"}]}`,
			want: []string{"/x-fixpoint-rules/0", fmt.Sprintf("the rule is %d characters long, at most %d", MaxRuleLength+4, MaxRuleLength)}},
		{name: "too many rules", schema: `{"x-fixpoint-rules":[` + strings.Join(many, ",") + `]}`,
			want: []string{"rules: (root): ", fmt.Sprintf("the schema has %d rules, at most %d", MaxRules+1, MaxRules)}},
		{name: "inside not", schema: `{"not":{"x-fixpoint-rules":[{"rule":"true"}]}}`,
			want: []string{"rules: /not/x-fixpoint-rules: ", "these rules never apply"}},
		{name: "inside if", schema: `{"if":{"x-fixpoint-rules":[{"rule":"true"}]}}`,
			want: []string{"/if/x-fixpoint-rules", "never apply"}},
		{name: "in an anyOf whose branches share a type", schema: `{"anyOf":[{"type":"object","x-fixpoint-rules":[{"rule":"true"}]},{"type":"object"}]}`,
			want: []string{"/anyOf/0/x-fixpoint-rules", "never apply", "only when the branches have different types"}},
		{name: "in $defs no one refers to", schema: `{"$defs":{"a":{"x-fixpoint-rules":[{"rule":"true"}]}}}`,
			want: []string{"/$defs/a/x-fixpoint-rules", "never apply"}},
		{name: "beside $ref in draft-07", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"object"}},
			"$ref":"#/definitions/a","x-fixpoint-rules":[{"rule":"true"}]}`,
			want: []string{"rules: /x-fixpoint-rules: ", "never apply", `beside "$ref" are ignored`}},
		{name: "a pattern RE2 cannot read above rules", schema: `{"type":"object","patternProperties":{"^(?!x)":{"type":"object",
			"x-fixpoint-rules":[{"rule":"true"}]}}}`,
			want: []string{"/patternProperties/^(?!x)", "need the pattern in RE2 syntax"}},
		{name: "not JSON", schema: `{"x-fixpoint-rules":`, want: []string{"rules: (root): the schema is not JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tc.schema))
			if err == nil {
				t.Fatalf("Compile succeeded with %d rules, want an error", s.Len())
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is no *CompileError", err, err)
			}
			msg, rest := err.Error(), err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error\n  %s\nlacks %q (in this order: %q)", msg, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
			if !strings.HasPrefix(msg, "rules: ") {
				t.Errorf("error %q does not start with the package's name", msg)
			}
		})
	}
}

// TestCompileTypesBound: a schema whose places a rule sees are named by
// ever more sets of subschemas (an NFA's subset construction, 2^14 sets
// here) is refused at maxTypes, not typed for ever.
func TestCompileTypesBound(t *testing.T) {
	t.Parallel()
	nfa := func(n int) string {
		defs := []string{`"s0":{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/s0"},{"$ref":"#/$defs/s1"}]},"b":{"$ref":"#/$defs/s0"}}}`}
		for i := 1; i < n; i++ {
			defs = append(defs, fmt.Sprintf(`"s%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/s%d"},"b":{"$ref":"#/$defs/s%d"}}}`, i, i+1, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"s%d":{"type":"object"}`, n))
		return `{"$ref":"#/$defs/s0","$defs":{` + strings.Join(defs, ",") + `},"x-fixpoint-rules":[{"rule":"has(self.a.a.b.a.b.b.a) && !has(self.b.a)"}]}`
	}
	_, err := Compile([]byte(nfa(14)))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d places of distinct types", maxTypes)) {
		t.Fatalf("Compile = %v, want the bound on types", err)
	}
	// A few states deep it compiles, and the types follow the sets.
	s := mustCompile(t, nfa(4))
	if fs := check(t, s, `{"a":{"a":{"b":{"a":{"b":{"b":{"a":{}}}}}}},"b":{}}`); len(fs) != 0 {
		t.Errorf("findings %q", texts(fs))
	}
}

// TestCompileReportsEveryError: a schema with several bad rules gets all
// of them at once, sorted by location, each a *CompileError.
func TestCompileReportsEveryError(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"type":"object","properties":{
		"b":{"type":"object","properties":{"n":{"type":"integer"}},"x-fixpoint-rules":[{"rule":"self.m > 0"}]},
		"a":{"type":"object","properties":{"n":{"type":"integer"}},"x-fixpoint-rules":[{"rule":"self.n > 0"},{"rule":"self.n +"}]},
		"c":{"type":"object","x-fixpoint-rules":[{"rule":"true","severity":"fatal"}]}},
		"not":{"x-fixpoint-rules":[{"rule":"true"}]},
		"x-fixpoint-rules":[{"rule":"self.c"}]}`))
	if err == nil {
		t.Fatal("Compile succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"rules: /not/x-fixpoint-rules: these rules never apply", "rules: /properties/a/x-fixpoint-rules/1 (self.n +)",
		"rules: /properties/b/x-fixpoint-rules/0 (self.m > 0)", `rules: /properties/c/x-fixpoint-rules/0 (true): "severity"`,
		"rules: /x-fixpoint-rules/0 (self.c): a rule must be true or false"}
	if len(lines) != len(want) {
		t.Fatalf("error has %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// TestCompileNoRules: a schema without rules compiles to an empty set
// whatever else it holds, and a key spelled x-fixpoint-rules where no
// schema is (an example, a const, a property's name) is not a rule.
func TestCompileNoRules(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`true`, `{}`, `{"type":"string","pattern":"^(?!x)"}`,
		`{"type":"object","properties":{"x-fixpoint-rules":{"type":"string"}}}`,
		`{"examples":[{"x-fixpoint-rules":[{"rule":"not CEL"}]}],"const":{"x-fixpoint-rules":5}}`,
	} {
		s := mustCompile(t, schema)
		if s.Len() != 0 || s.Hash() != "" {
			t.Errorf("%s: %d rules, hash %q; want none", schema, s.Len(), s.Hash())
		}
		if fs, err := s.Check(t.Context(), decode(t, `{"x-fixpoint-rules":1}`)); fs != nil || err != nil {
			t.Errorf("%s: Check = %v, %v", schema, fs, err)
		}
	}
	var nilSet *Set
	if fs, err := nilSet.Check(t.Context(), nil); fs != nil || err != nil || nilSet.Len() != 0 || nilSet.Hash() != "" {
		t.Errorf("a nil Set checks something")
	}
}

func TestHash(t *testing.T) {
	t.Parallel()
	base := mustCompile(t, invoiceSchema).Hash()
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", base)
	}
	// The same rules in a schema written otherwise: other spacing and key
	// order, another description.
	same := strings.NewReplacer(`"type": "object",`+"\n  \"required\"", `"description": "an invoice", "required"`,
		`  `, ` `).Replace(invoiceSchema)
	same = strings.Replace(same, `"required"`, `"type": "object", "required"`, 1)
	if h := mustCompile(t, same).Hash(); h != base {
		t.Errorf("the same rules hash to %s and %s", h, base)
	}
	for _, change := range [][2]string{
		{`self.end >= self.start`, `self.end > self.start`},
		{`end must not be before start`, `end must be after start`},
		{`"severity": "warn"`, `"severity": "error"`},
		{`"path": "/end"`, `"path": ""`},
	} {
		changed := strings.Replace(invoiceSchema, change[0], change[1], 1)
		if changed == invoiceSchema {
			t.Fatalf("%q is not in the schema", change[0])
		}
		if h := mustCompile(t, changed).Hash(); h == base {
			t.Errorf("changing %q to %q kept the hash", change[0], change[1])
		}
	}
}
