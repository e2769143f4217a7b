package repair

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// The fixtures of the schema-guided repair tests (moved with them from
// package validate).

func mustCompile(t testing.TB, schema string) *validate.Schema {
	t.Helper()
	s, err := validate.Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

func mustDecode(t testing.TB, value string) any {
	t.Helper()
	v, err := decode([]byte(value))
	if err != nil {
		t.Fatalf("decode %s: %v", value, err)
	}
	return v
}

// decode decodes as the schema library does (numbers as json.Number).
func decode(b []byte) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, errors.Join(errors.New("decode"), err)
	}
	return v, nil
}

func mustEncode(t testing.TB, v any) string {
	t.Helper()
	b, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lookup returns the value at the tokens in doc, nil if there is none.
func lookup(doc any, toks []string) any {
	v, _ := lookupOK(doc, toks)
	return v
}

// checkWith is validate.CheckWith with the coercer of mode.
func checkWith(s *validate.Schema, reply string, mode fixpoint.CoerceMode) validate.CheckResult {
	return validate.CheckWith(s, reply, validate.CheckOptions{Coerce: Coercer(mode)})
}

// lossyWhat is what validate says a lossy repair of kind would have
// dropped or guessed.
func lossyWhat(kind string) string {
	d := validate.DescribeLossy("", fixpoint.Repair{Kind: kind})
	return d[:strings.Index(d, " at offset ")]
}

// wantsAt is what s wants of the value at toks in root.
func wantsAt(s *validate.Schema, root any, toks []string) validate.Wants {
	c, release := s.Begin()
	defer release()
	return c.Reader(root).At(toks)
}

// budgetOf is coerceBudget of v, and checksOf the checks validating it
// makes (0: not known).
func budgetOf(s *validate.Schema, v any) int {
	c, release := s.Begin()
	defer release()
	return coerceBudget(c, v)
}

func checksOf(s *validate.Schema, v any) int {
	c, release := s.Begin()
	defer release()
	return c.Checks(v)
}
