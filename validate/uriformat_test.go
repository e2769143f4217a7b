package validate

import (
	"strings"
	"testing"
)

func TestURIFormats(t *testing.T) {
	t.Parallel()
	cases := []struct {
		format, value string
		valid         bool
	}{
		{"uri", "https://example.com/a/b?q=1#frag", true},
		{"uri", "urn:isbn:0451450523", true},
		{"uri", "http://[2001:db8::1]:8080/x", true},
		{"uri", "https://example.com/a%20b", true},
		{"uri", "mailto:someone@example.com", true},
		{"uri", "https://example.com/a b", false},
		{"uri", "https://example.com/<script>", false},
		{"uri", "https://example.com/a\"b", false},
		{"uri", "https://example.com/%zz", false},
		{"uri", "https://example.com/a%2", false},
		{"uri", "https://example.com/a#b#c", false},
		{"uri", "https://example.com/a[0]", false},
		{"uri", "https://example.com/caf\u00e9", false},
		{"uri", "http://2001:db8::1/x", false},
		{"uri", "http://[2001:db8::g]/x", false},
		{"uri", "/relative/path", false},
		{"uri", "https://example.com/a\tb", false},
		{"uri-reference", "../a/b?c#d", true},
		{"uri-reference", "", true},
		{"uri-reference", "#frag", true},
		{"uri-reference", "https://example.com/1", true},
		{"uri-reference", "not a uri", false},
		{"uri-reference", `\\server\share`, false},
		{"uri-reference", "a{b}", false},
		{"uri-reference", "a|b", false},
		{"uri-reference", "//a@b@example.com/", false},
		{"uri-reference", "//user@example.com/a@b", true},
		{"uri-reference", "/[::1]", false},
		{"uri-reference", "/foobar\u00ae.txt", false},
		{"iri", "https://例え.テスト/パス", true},
		{"iri", "https://example.com/caf\u00e9", true},
		{"iri", "https://example.com/a b", false},
		{"iri", "https://example.com/a\u0085b", false}, // C1 control
		{"iri", "relative", false},
		{"iri-reference", "caf\u00e9/x", true},
		{"iri-reference", "caf\u00e9 x", false},
	}
	schemas := map[string]*Schema{}
	for _, f := range []string{"uri", "uri-reference", "iri", "iri-reference"} {
		for _, draft := range []string{`"https://json-schema.org/draft/2020-12/schema"`, `"http://json-schema.org/draft-07/schema#"`, `"http://json-schema.org/draft-04/schema#"`} {
			s, err := Compile([]byte(`{"$schema": ` + draft + `, "type": "string", "format": "` + f + `"}`))
			if err != nil {
				t.Fatalf("%s %s: %v", f, draft, err)
			}
			schemas[f+" "+draft] = s
		}
	}
	for key, s := range schemas {
		format, _, _ := strings.Cut(key, " ")
		for _, c := range cases {
			if c.format != format {
				continue
			}
			errs := s.Validate(c.value)
			if got := len(errs) == 0; got != c.valid {
				t.Errorf("%s: %q: valid = %v, want %v (%v)", key, c.value, got, c.valid, errs)
			}
			if !c.valid && len(errs) > 0 && (errs[0].Keyword != "format" || !strings.Contains(errs[0].Message, "is not a valid "+format)) {
				t.Errorf("%s: %q: error %+v does not name the format", key, c.value, errs[0])
			}
		}
	}
	// A non-string is not the format's business.
	if errs := schemas["uri-reference \"https://json-schema.org/draft/2020-12/schema\""].Validate(map[string]any{}); len(errs) != 1 || errs[0].Keyword != "type" {
		t.Errorf("object against uri-reference: %v, want one type error", errs)
	}
}
