package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

var canonicalCases = []struct {
	name    string
	in      string
	want    string
	wantErr error
}{
	{name: "sorted keys", in: `{"b":1,"a":{"d":[1,2],"c":null}}`, want: `{"a":{"c":null,"d":[1,2]},"b":1}`},
	{name: "whitespace", in: " {\n\"a\" :\t true } \n", want: `{"a":true}`},
	{name: "numbers kept as written", in: `{"n":1.50,"m":1e3,"big":12345678901234567890}`, want: `{"big":12345678901234567890,"m":1e3,"n":1.50}`},
	{name: "html not escaped", in: `{"p":"<a>&"}`, want: `{"p":"<a>&"}`},
	{name: "scalar", in: `"x"`, want: `"x"`},
	{name: "truncated", in: `{"a":`, wantErr: store.ErrInvalid},
	{name: "trailing data", in: `{}x`, wantErr: store.ErrInvalid},
	{name: "empty", in: ``, wantErr: store.ErrInvalid},
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	for _, tt := range canonicalCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := store.Canonical([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Canonical error = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonical = %s, want %s", got, tt.want)
			}
		})
	}
}

// FuzzCanonical checks that the canonical form is valid JSON, a fixed point,
// and equal for any input that decodes to the same value.
func FuzzCanonical(f *testing.F) {
	for _, tt := range canonicalCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := store.Canonical(in)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q) = %q is not valid JSON", in, c)
		}
		again, err := store.Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("Canonical not idempotent: %q -> %q -> %q (%v)", in, c, again, err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, c, "", "  "); err == nil {
			if c2, err := store.Canonical(indented.Bytes()); err != nil || !bytes.Equal(c2, c) {
				t.Fatalf("indenting changed the canonical form: %q vs %q", c2, c)
			}
		}
	})
}
