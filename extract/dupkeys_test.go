package extract

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// refDuplicateKey is DuplicateKey written plainly on the encoding/json token
// stream: slow, but with no scanning of its own to get wrong.
func refDuplicateKey(text []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var walk func() (string, bool)
	walk = func() (string, bool) {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, _ := dec.Token()
				k := kt.(string)
				if seen[k] {
					return "/" + PointerToken(k), true
				}
				seen[k] = true
				if p, dup := walk(); dup {
					return "/" + PointerToken(k) + p, true
				}
			}
			dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if p, dup := walk(); dup {
					return "/" + strconv.Itoa(i) + p, true
				}
			}
			dec.Token()
		}
		return "", false
	}
	return walk()
}

// duplicateKey agrees with the token-stream reference on every valid JSON
// value: the same verdict and the same pointer.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `{"k\u0065":1,"ke":2}`, `{"a":"\"a\"","b":1}`,
		`[{"x":1},{"x":1}]`, `{"":1,"":2}`, `{"a/b":{"~":1,"~":1}}`, `"plain"`, `{"a":[[],[{}],{"b":"\\"}],"b":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if !json.Valid(text) || !utf8.Valid(text) { // rows are UTF-8 checked first
			return
		}
		wantAt, wantDup := refDuplicateKey(text)
		at, _, dup := DuplicateKey(text)
		if dup != wantDup || at != wantAt {
			t.Fatalf("DuplicateKey(%s) = %q %v; the reference says %q %v", text, at, dup, wantAt, wantDup)
		}
	})
}

// BenchmarkDuplicateKey scans a 50-line invoice with no repeated key, as
// validate does for every candidate it checks.
func BenchmarkDuplicateKey(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"invoice":"INV-1","customer":{"name":"A","vat":"X"},"lines":[`)
	for i := range 50 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"sku":"S-` + strconv.Itoa(i) + `","description":"a \"quoted\" thing","qty":2,"unit_price":3.5,"tags":["a","b"]}`)
	}
	sb.WriteString(`],"total":350}`)
	text := []byte(sb.String())
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, dup := DuplicateKey(text); dup {
			b.Fatal("no key repeats")
		}
	}
}

// LoneSurrogate finds a \u escape of half a surrogate pair, in a value or a
// key, and says where; a whole pair, or text that only looks like an
// escape, is not one.
func TestLoneSurrogate(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		`{"name":"\ud800","age":1}`:          "/name",
		`{"a":["x","x\udc00y"]}`:             "/a/1",
		`{"\udc00":"a","\udc01":"b"}`:        "",
		`{"o":{"k\ud83dx":1}}`:               "/o",
		`"\ud83d"`:                           "",
		`{"a":"\ud83d\ude00","b":"\\ud800"}`: "-",
		`{"a":"\u00e9\ud83d\ude00\u0041"}`:   "-",
		`["\ud83d\u0041"]`:                   "/0",
	} {
		at, _, found := LoneSurrogate([]byte(text))
		if want == "-" {
			if found {
				t.Errorf("LoneSurrogate(%s) = %q; want none", text, at)
			}
			continue
		}
		if !found || at != want {
			t.Errorf("LoneSurrogate(%s) = %q, %v; want %q", text, at, found, want)
		}
	}
}
