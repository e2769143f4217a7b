// Package textclip cuts strings short for messages, logs and reports.
//
// Packages still hold clipping helpers of their own where the behaviour
// differs (the marker, or whether n counts bytes or runes, or includes the
// marker): what each prints is kept as it is.
package textclip

// Runes is s cut to at most n runes, with "…" after the cut.
func Runes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Bytes is s cut to at most n bytes, with "..." after the cut. The cut
// may split a rune.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
