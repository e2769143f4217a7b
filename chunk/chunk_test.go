package chunk

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

// checkChunks fails t unless chunks split doc as Split promises: numbered
// in order, each text the document's code points [Start, End) and bytes
// [StartByte, EndByte), covering the document in order (the first at 0,
// the last at its end, each starting at or before the previous end and
// ending after it), each within the size unless it is one cluster, each
// overlap within opt.Overlap, and no chunk starting or ending inside a
// grapheme cluster.
func checkChunks(t *testing.T, doc string, opt Options, chunks []Chunk) {
	t.Helper()
	runes := []rune(doc)
	if len(runes) == 0 {
		if len(chunks) != 0 {
			t.Fatalf("empty document: %d chunks", len(chunks))
		}
		return
	}
	if len(chunks) == 0 || chunks[0].Start != 0 || chunks[len(chunks)-1].End != len(runes) {
		t.Fatalf("chunks do not cover the document's %d code points: %+v", len(runes), spans(chunks))
	}
	for i, c := range chunks {
		if c.N != i {
			t.Fatalf("chunk %d has N %d", i, c.N)
		}
		if c.Start >= c.End || c.End > len(runes) {
			t.Fatalf("chunk %d: span [%d,%d) of %d code points", i, c.Start, c.End, len(runes))
		}
		if got := string(runes[c.Start:c.End]); got != c.Text {
			t.Fatalf("chunk %d: text %q, the document's code points [%d,%d) are %q", i, c.Text, c.Start, c.End, got)
		}
		if doc[c.StartByte:c.EndByte] != c.Text {
			t.Fatalf("chunk %d: bytes [%d,%d) are not its text", i, c.StartByte, c.EndByte)
		}
		if n := Tokens(c.Text); n > opt.Tokens && !oneCluster(c.Text) {
			t.Fatalf("chunk %d: %d tokens, more than %d: %q", i, n, opt.Tokens, c.Text)
		}
		for _, b := range []int{c.Start, c.End} {
			if b > 0 && b < len(runes) && insideCluster(runes, b) {
				t.Fatalf("chunk %d: offset %d is inside a grapheme cluster: %q|%q", i, b, string(runes[max(0, b-3):b]), string(runes[b:min(len(runes), b+3)]))
			}
		}
		if i == 0 {
			continue
		}
		prev := chunks[i-1]
		if c.Start <= prev.Start || c.Start > prev.End || c.End <= prev.End {
			t.Fatalf("chunk %d [%d,%d) does not follow chunk %d [%d,%d)", i, c.Start, c.End, i-1, prev.Start, prev.End)
		}
		if over := Tokens(string(runes[c.Start:prev.End])); over > opt.Overlap {
			t.Fatalf("chunk %d repeats %d tokens of chunk %d, more than %d", i, over, i-1, opt.Overlap)
		}
		if opt.Overlap == 0 && c.Start != prev.End {
			t.Fatalf("chunk %d starts at %d, chunk %d ended at %d, with no overlap", i, c.Start, i-1, prev.End)
		}
	}
}

func spans(chunks []Chunk) [][2]int {
	var out [][2]int
	for _, c := range chunks {
		out = append(out, [2]int{c.Start, c.End})
	}
	return out
}

// insideCluster reports whether offset b of runes is inside a grapheme
// cluster (UAX #29's rules this test knows: combining marks, joiners,
// variation selectors, emoji modifiers, CR LF, flag pairs, Hangul jamo).
func insideCluster(runes []rune, b int) bool {
	prev, r := runes[b-1], runes[b]
	if prev == '\r' && r == '\n' || prev == '\u200d' {
		return true
	}
	if r >= 0x1160 && r <= 0x11FF || prev >= 0x1100 && prev <= 0x115F { // Hangul jamo: a vowel or tail, after a lead
		return true
	}
	if unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc, unicode.Variation_Selector) || r == '\u200d' || r >= 0x1F3FB && r <= 0x1F3FF {
		return true
	}
	n := 0
	for i := b - 1; i >= 0 && unicode.Is(unicode.Regional_Indicator, runes[i]); i-- {
		n++
	}
	return unicode.Is(unicode.Regional_Indicator, r) && n%2 == 1
}

// oneCluster reports whether s is a single grapheme cluster.
func oneCluster(s string) bool {
	runes := []rune(s)
	for b := 1; b < len(runes); b++ {
		if !insideCluster(runes, b) {
			return false
		}
	}
	return true
}

func split(t *testing.T, doc string, opt Options) []Chunk {
	t.Helper()
	chunks, err := Split(doc, opt)
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	checkChunks(t, doc, opt, chunks)
	return chunks
}

func texts(chunks []Chunk) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, c.Text)
	}
	return out
}

func TestSplitRefusesBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		opt  Options
		is   error
		want string
	}{
		{"no size", "text", Options{Tokens: 0}, ErrOptions, "chunk size 0 tokens: it must be at least 1"},
		{"negative size", "text", Options{Tokens: -5}, ErrOptions, "chunk size -5 tokens"},
		{"negative overlap", "text", Options{Tokens: 10, Overlap: -1}, ErrOptions, "overlap -1 tokens: it must be 0 or more"},
		{"overlap as large as a chunk", "text", Options{Tokens: 10, Overlap: 10}, ErrOptions, "overlap 10 tokens is not less than the chunk size 10"},
		{"invalid UTF-8", "héllo \xff world", Options{Tokens: 10}, ErrDocument, "byte offset 7 (0xff)"},
		{"a cut UTF-8 sequence at the end", "東京\xe4\xba", Options{Tokens: 10}, ErrDocument, "byte offset 6 (0xe4)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Split(c.doc, c.opt)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Split = %v, want an error matching %v saying %q", err, c.is, c.want)
			}
		})
	}
}

func TestSplitEmptyAndShort(t *testing.T) {
	t.Parallel()
	if chunks := split(t, "", Options{Tokens: 10}); len(chunks) != 0 {
		t.Fatalf("empty document: %+v", chunks)
	}
	chunks := split(t, "One short line.", Options{Tokens: 10, Overlap: 2})
	if len(chunks) != 1 || chunks[0].Text != "One short line." {
		t.Fatalf("short document: %+v", chunks)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{strings.Repeat("word ", 20), 25},      // 100 bytes
		{"東京都", 3},                             // a token a Han code point
		{"こんにちは", 5},                           // Hiragana
		{"สวัสดี", 6},                          // Thai: its marks too
		{"안녕하세요", 5},                           // Hangul syllables
		{"Привет", 3},                          // Cyrillic: 12 bytes
		{"🎉", 1},                               // 4 bytes
		{"Tokyo 東京", 4},                        // 6 bytes and 2 wide: 1.5 + 2, rounded up
		{"\u3000\uff01", 2},                    // full-width space and "！"
		{"e\u0301", 1},                         // 3 bytes
		{strings.Repeat("a", 4000), 1000},      // long Latin
		{strings.Repeat("漢", 1000), 1000},      // long CJK
		{strings.Repeat("ab東", 100), 50 + 100}, // mixed: 200 bytes and 100 wide
	}
	for _, c := range cases {
		if got := Tokens(c.s); got != c.want {
			t.Errorf("Tokens(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// TestSplitAtHeadings: a chunk ends where a heading starts, even when a
// paragraph, a line or a sentence would let it hold more.
func TestSplitAtHeadings(t *testing.T) {
	t.Parallel()
	section := func(title string) string {
		return "## " + title + "\n\nFirst sentence of " + title + ". Second sentence here.\n\nAnother paragraph of it.\n"
	}
	doc := "# Report\n\n" + section("Alpha") + "\n" + section("Beta") + "\n" + section("Gamma")
	chunks := split(t, doc, Options{Tokens: 40})
	for _, c := range chunks[1:] {
		if !strings.HasPrefix(c.Text, "## ") {
			t.Fatalf("a chunk starts elsewhere than a heading: %q", texts(chunks))
		}
	}
	if len(chunks) < 2 {
		t.Fatalf("one chunk: %q", texts(chunks))
	}
	// With an overlap, a chunk that ends before a heading is not repeated:
	// the next starts at the heading.
	overlapped := split(t, doc, Options{Tokens: 40, Overlap: 10})
	for _, c := range overlapped[1:] {
		prev := overlapped[c.N-1]
		if atHeading := strings.HasPrefix(doc[prev.EndByte:], "## "); atHeading != (c.Start == prev.End) {
			t.Fatalf("chunk %d [%d,%d) after chunk %d ending at %d (before a heading: %v): %q", c.N, c.Start, c.End, prev.N, prev.End, atHeading, texts(overlapped))
		}
	}
}

// TestSplitIgnoresHeadingsInCode: "# comment" in fenced code is no
// heading, and a setext title is one.
func TestSplitIgnoresHeadingsInCode(t *testing.T) {
	t.Parallel()
	code := "```sh\n# install it\nmake install\n# run it\nmake run\n```\n"
	doc := "Intro text that runs on for a while here.\n\n" + code + "\nTitle line\n==========\n\nBody text of the section."
	chunks := split(t, doc, Options{Tokens: 25})
	for _, c := range chunks {
		if strings.HasPrefix(c.Text, "# ") {
			t.Fatalf("a chunk starts at a comment in fenced code: %q", texts(chunks))
		}
	}
	if !strings.HasPrefix(chunks[len(chunks)-1].Text, "Title line\n===") {
		t.Fatalf("the last chunk does not start at the setext heading: %q", texts(chunks))
	}
}

// TestSplitAtParagraphs: without headings, a chunk ends before a
// paragraph rather than a sentence.
func TestSplitAtParagraphs(t *testing.T) {
	t.Parallel()
	para := "This sentence opens the paragraph. This one follows it. And a third one ends it.\n\n"
	doc := strings.Repeat(para, 6)
	chunks := split(t, doc, Options{Tokens: 50})
	for _, c := range chunks {
		if !strings.HasPrefix(c.Text, "This sentence opens") || !strings.HasSuffix(c.Text, "\n\n") {
			t.Fatalf("a chunk is not whole paragraphs: %q", texts(chunks))
		}
	}
}

// TestSplitAtSentences: a long paragraph ends a chunk after a sentence,
// closing quotes and brackets included.
func TestSplitAtSentences(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat(`He said "it is done." Then (after a pause) he left! Did she follow? `, 8)
	chunks := split(t, doc, Options{Tokens: 30})
	for _, c := range chunks[1:] {
		if !strings.HasPrefix(c.Text, "He said") && !strings.HasPrefix(c.Text, "Then") && !strings.HasPrefix(c.Text, "Did") {
			t.Fatalf("a chunk starts mid-sentence: %q", texts(chunks))
		}
	}
}

// TestSplitAtWords: text with no sentence end is cut before a word,
// never inside one.
func TestSplitAtWords(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("alpha beta gamma delta epsilon ", 40)
	words := map[string]bool{"alpha": true, "beta": true, "gamma": true, "delta": true, "epsilon": true}
	for _, c := range split(t, doc, Options{Tokens: 17}) {
		for _, w := range strings.Fields(c.Text) {
			if !words[w] {
				t.Fatalf("chunk %d cuts a word: %q", c.N, c.Text)
			}
		}
	}
}

// TestSplitLongWord: a word longer than a chunk is cut between code
// points, the only place there is; the words around it are not.
func TestSplitLongWord(t *testing.T) {
	t.Parallel()
	doc := "start " + strings.Repeat("x", 200) + " end"
	chunks := split(t, doc, Options{Tokens: 10})
	if chunks[0].Text != "start " || chunks[len(chunks)-1].Text != "x end" && !strings.HasSuffix(chunks[len(chunks)-1].Text, " end") {
		t.Fatalf("chunks %q", texts(chunks))
	}
}

// TestSplitJapanese: Japanese has no spaces: a chunk ends after 。！？
// (and a closing bracket after them), else between two characters.
func TestSplitJapanese(t *testing.T) {
	t.Parallel()
	sentences := []string{"東京都は日本の首都です。", "人口は約千四百万人！", "「大阪はどうですか？」", "京都には多くの寺があります。"}
	doc := strings.Repeat(strings.Join(sentences, ""), 6)
	chunks := split(t, doc, Options{Tokens: 25})
	for _, c := range chunks[:len(chunks)-1] {
		last := []rune(c.Text)[len([]rune(c.Text))-1]
		if !strings.ContainsRune("。！」", last) {
			t.Fatalf("a chunk ends mid-sentence: %q", texts(chunks))
		}
	}
	// One sentence longer than a chunk: cut between characters.
	long := strings.Repeat("東京", 30) + "。"
	chunks = split(t, long, Options{Tokens: 8})
	if len(chunks) < 7 {
		t.Fatalf("%d chunks of a 61-character sentence at 8 tokens", len(chunks))
	}
}

// TestSplitThai: Thai has no spaces between words and its vowels and tone
// marks are combining: a cut falls between clusters, never before a mark.
func TestSplitThai(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("ภาษาไทยเป็นภาษาที่ไม่มีการเว้นวรรคระหว่างคำ ", 10)
	for _, c := range split(t, doc, Options{Tokens: 7}) {
		if first := []rune(c.Text)[0]; unicode.Is(unicode.Mn, first) {
			t.Fatalf("chunk %d starts with a combining mark: %q", c.N, c.Text)
		}
	}
}

// TestSplitClusters: with chunks so small that they end between code
// points, none ends inside a grapheme cluster: an accent written as a
// combining mark, an emoji with a skin tone or joined with ZWJ, a flag, a
// keycap, CR LF, Hebrew with points, Arabic with vowel marks (RTL).
func TestSplitClusters(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		strings.Repeat("e\u0301\u0302a\u0308", 30),
		strings.Repeat("👩🏽\u200d💻👨\u200d👩\u200d👧\u200d👦", 10),
		strings.Repeat("🇯🇵🇫🇷🇺🇸", 10) + "🇩",
		strings.Repeat("1\ufe0f\u20e3#\ufe0f\u20e3", 10),
		strings.Repeat("line\r\n", 20),
		strings.Repeat("שָׁלוֹם עוֹלָם ", 10),
		strings.Repeat("مَرْحَبًا بِالْعَالَم ", 10),
		strings.Repeat("\u1100\u1161\u11a8\ud55c", 20), // jamo and a syllable
	} {
		for _, tokens := range []int{1, 2, 3, 5} {
			split(t, doc, Options{Tokens: tokens})
		}
	}
}

// TestSplitRTL: Arabic and Hebrew are split at their sentence ends and
// spaces like any script with spaces; the Arabic question mark ends a
// sentence.
func TestSplitRTL(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("هل هذا هو العقد الصحيح؟ نعم هو كذلك. ", 8)
	chunks := split(t, doc, Options{Tokens: 20})
	for _, c := range chunks[1:] {
		if !strings.HasPrefix(c.Text, "هل") && !strings.HasPrefix(c.Text, "نعم") {
			t.Fatalf("a chunk starts mid-sentence: %q", texts(chunks))
		}
	}
}

// TestSplitOverlap: each chunk repeats up to Overlap tokens of the one
// before, starting at a sentence when one is within reach.
func TestSplitOverlap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 40 {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("I", i%5+1))
		b.WriteString(" is here. ")
	}
	doc := b.String()
	chunks := split(t, doc, Options{Tokens: 40, Overlap: 10})
	repeated := 0
	for i, c := range chunks[1:] {
		if c.Start < chunks[i].End {
			repeated++
			if !strings.HasPrefix(c.Text, "Sentence number") {
				t.Fatalf("chunk %d's overlap starts mid-sentence: %q", c.N, c.Text)
			}
		}
	}
	if repeated != len(chunks)-1 {
		t.Fatalf("%d of %d chunks overlap the previous one: %+v", repeated, len(chunks)-1, spans(chunks))
	}
	// Without a sentence within reach, the overlap starts at a word.
	doc = strings.Repeat("word ", 100)
	chunks = split(t, doc, Options{Tokens: 20, Overlap: 5})
	for _, c := range chunks[1:] {
		if !strings.HasPrefix(c.Text, "word") {
			t.Fatalf("chunk %d starts inside a word: %q", c.N, c.Text)
		}
		if c.Start >= chunks[c.N-1].End {
			t.Fatalf("chunk %d does not overlap: %+v", c.N, spans(chunks))
		}
	}
}

// TestSplitOffsetsAreCodePoints: offsets count code points as a Python
// str slice does; these were counted by hand.
func TestSplitOffsetsAreCodePoints(t *testing.T) {
	t.Parallel()
	// "Zoë 🎉 ok. " is 10 code points and 14 bytes.
	doc := "Zoë 🎉 ok. 東京です。"
	chunks := split(t, doc, Options{Tokens: 4})
	if chunks[0].Text != "Zoë 🎉 ok. " || chunks[0].End != 10 || chunks[0].EndByte != 14 {
		t.Fatalf("first chunk %+v, want \"Zoë 🎉 ok. \" ending at code point 10, byte 14", chunks[0])
	}
	if chunks[1].Start != 10 || chunks[1].StartByte != 14 {
		t.Fatalf("second chunk %+v", chunks[1])
	}
}
