package chunk

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzSplit: for any text and sizes, Split keeps its promises (see
// checkChunks), and refuses exactly the text that is not UTF-8.
func FuzzSplit(f *testing.F) {
	f.Add("# Title\n\nA paragraph. Another sentence!\n\n## Next\n\nText here.", 5, 2)
	f.Add("東京都は日本の首都です。「大阪はどうですか？」京都。", 4, 1)
	f.Add("e\u0301👩🏽\u200d💻🇯🇵🇫🇷 שָׁלוֹם مَرْحَبًا\r\nภาษาไทย", 1, 0)
	f.Add("```\n# code\n```\nTitle\n===\nbody", 3, 2)
	f.Add("word \xff", 3, 1)
	f.Fuzz(func(t *testing.T, doc string, tokens, overlap int) {
		opt := Options{Tokens: 1 + abs(tokens)%200}
		opt.Overlap = abs(overlap) % opt.Tokens
		chunks, err := Split(doc, opt)
		if !utf8.ValidString(doc) {
			if !errors.Is(err, ErrDocument) {
				t.Fatalf("Split of invalid UTF-8 = %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Split(%q, %+v): %v", doc, opt, err)
		}
		checkChunks(t, doc, opt, chunks)
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // the smallest int
			return 0
		}
		return -n
	}
	return n
}
