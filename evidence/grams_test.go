package evidence

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestGramIndexFindsEveryOccurrence: each lists exactly the offsets a scan
// finds, in order, for needles shorter and longer than a gram, in texts
// small enough to share hashes and large enough to fill many groups.
func TestGramIndexFindsEveryOccurrence(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, size := range []int{0, 3, 4, 50, 5000, 70000} {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString([]string{"ab", "ba", "a", "b ", "é", "東"}[rng.IntN(6)])
		}
		text := b.String()
		g := newGramIndex(text)
		for range 200 {
			var needle string
			if len(text) > 0 {
				i := rng.IntN(len(text))
				needle = text[i:min(len(text), i+1+rng.IntN(9))]
			}
			from := rng.IntN(len(text) + 1)
			var want, got []int
			for i := from; needle != "" && i <= len(text)-len(needle); i++ {
				if strings.HasPrefix(text[i:], needle) {
					want = append(want, i)
				}
			}
			g.each(needle, from, func(i int) bool { got = append(got, i); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("text of %d bytes, needle %q from %d: got %v, want %v", len(text), needle, from, got, want)
			}
		}
	}
}
