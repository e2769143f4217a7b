package textclip

import "testing"

func TestRunes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"héllo", 2, "hé…"}, // runes, not bytes: "hé" is 3 bytes
		{"日本語", 3, "日本語"},
		{"日本語", 0, "…"},
	} {
		if got := Runes(c.s, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc..."},
		{"héllo", 2, "h\xc3..."}, // bytes: the cut splits "é"
		{"héllo", 3, "hé..."},
	} {
		if got := Bytes(c.s, c.n); got != c.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
