package chunk

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchDoc returns about size bytes of Markdown: sections under headings,
// paragraphs of English sentences, some Japanese without spaces, lists.
func benchDoc(size int) string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the contract party shall terminate agreement notice period payment invoice subsidiary holding annual report clause schedule")
	var b strings.Builder
	for sec := 1; b.Len() < size; sec++ {
		fmt.Fprintf(&b, "## Section %d\n\n", sec)
		for range 3 + rng.IntN(5) {
			for range 2 + rng.IntN(6) {
				for range 5 + rng.IntN(15) {
					b.WriteString(words[rng.IntN(len(words))])
					b.WriteByte(' ')
				}
				b.WriteString("end. ")
			}
			if rng.IntN(4) == 0 {
				b.WriteString("本契約は東京地方裁判所を専属的合意管轄とします。当事者は誠実に協議する。")
			}
			b.WriteString("\n\n")
		}
		for i := range rng.IntN(6) {
			fmt.Fprintf(&b, "- item %d of section %d\n", i, sec)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// BenchmarkSplit1MB splits a 1 MB Markdown document into chunks of 2,000
// tokens with 200 of overlap.
func BenchmarkSplit1MB(b *testing.B) {
	doc := benchDoc(1 << 20)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		chunks, err := Split(doc, Options{Tokens: 2000, Overlap: 200})
		if err != nil {
			b.Fatal(err)
		}
		n = len(chunks)
	}
	b.ReportMetric(float64(n), "chunks")
}
