package csvcell

import "testing"

func TestText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "",
		"plain":                "plain",
		"=HYPERLINK(\"x\")":    "'=HYPERLINK(\"x\")",
		"+1+cmd|' /C calc'!A0": "'+1+cmd|' /C calc'!A0",
		"-2+3":                 "'-2+3",
		"@SUM(A1)":             "'@SUM(A1)",
		"\tx":                  "'\tx",
		"\rx":                  "'\rx",
		"-3":                   "-3",
		"+4.5e2":               "+4.5e2",
		"-.5":                  "-.5",
		`{"a":"=1"}`:           `{"a":"=1"}`,
		"a=b":                  "a=b",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
