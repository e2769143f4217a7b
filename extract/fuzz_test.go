package extract

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzExtract checks that Extract never panics, that every candidate is
// strict JSON matching its Value, and that a failure is a *SyntaxError.
func FuzzExtract(f *testing.F) {
	for _, tc := range extractCases {
		if len(tc.reply) < 4096 {
			f.Add(tc.reply)
		}
	}
	f.Fuzz(func(t *testing.T, reply string) {
		cands, err := Extract(reply)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrNoJSON) {
				t.Fatalf("error %T %v is not a *SyntaxError wrapping ErrNoJSON", err, err)
			}
			if len(cands) != 0 {
				t.Fatalf("candidates returned with an error")
			}
			return
		}
		if len(cands) == 0 {
			t.Fatal("no candidates and no error")
		}
		checkCandidates(t, reply, cands)
		if json.Valid([]byte(reply)) && utf8.ValidString(reply) {
			checkStrict(t, reply)
		}
	})
}

// FuzzRepairText checks the same invariants for RepairText.
func FuzzRepairText(f *testing.F) {
	for _, tc := range extractCases {
		if len(tc.reply) < 4096 {
			f.Add(tc.reply)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := RepairText(text)
		if err != nil {
			if !errors.Is(err, ErrNoJSON) {
				t.Fatalf("error %v does not wrap ErrNoJSON", err)
			}
			return
		}
		checkCandidates(t, text, []Candidate{c})
	})
}
