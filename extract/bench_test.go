package extract

import (
	"fmt"
	"strings"
	"testing"
)

// typicalReply is a 2 KB model reply: prose, then a fenced object.
func typicalReply() string {
	var b strings.Builder
	b.WriteString("Sure! Based on the document, here is the extracted data:\n\n```json\n{\n  \"invoice\": {\n    \"id\": \"INV-2024-0042\",\n    \"customer\": \"Acme Corp\",\n    \"lines\": [\n")
	for i := 0; b.Len() < 1900; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`      {"sku": "ABC-1234", "description": "Widget, large", "qty": 3, "unit_price": 19.99}`)
	}
	b.WriteString("\n    ],\n    \"total\": 239.88,\n  }\n}\n```\n\nLet me know if you need anything else.")
	return b.String()
}

// largeReply is a 100 KB reply: an array of objects with a few repairs.
func largeReply() string {
	var b strings.Builder
	b.WriteString("Here you go:\n[")
	for i := 0; b.Len() < 100<<10; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`{"id": 1, name: 'row', "tags": ["a", "b",], "ok": True, "note": "line one\nline two"}`)
	}
	b.WriteString("]\nDone.")
	return b.String()
}

func benchExtract(b *testing.B, reply string) {
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Extract(reply)
	}
}

func BenchmarkExtractTypical2KB(b *testing.B) { benchExtract(b, typicalReply()) }
func BenchmarkExtract100KB(b *testing.B)      { benchExtract(b, largeReply()) }

func BenchmarkExtractAdversarial(b *testing.B) {
	for name, reply := range adversarial() {
		b.Run(name, func(b *testing.B) { benchExtract(b, reply) })
	}
}

func BenchmarkRepairTextTypical(b *testing.B) {
	text := `{"id": 7, name: 'Ada', "tags": ["x", "y",], "ok": True}`
	b.ReportAllocs()
	for b.Loop() {
		_, _ = RepairText(text)
	}
}

// BenchmarkExtractBracketFragments is the shape fuzzing found slow: runs of
// '[' around a control byte and a word, where every '[' scan tries is a
// rejected fragment.
func BenchmarkExtractBracketFragments(b *testing.B) {
	benchExtract(b, strings.Repeat("[", 27)+"\x01"+strings.Repeat("[", 200)+"A"+strings.Repeat("[", 280))
}

// BenchmarkExtractManyFences is a model stuck repeating fences: a
// megabyte of them took 4.9 s (each fence's span looked up by a scan of
// all the others, and "~~~" searched for to the end from every fence);
// now the time grows with the size, not its square.
func BenchmarkExtractManyFences(b *testing.B) {
	for _, tc := range []struct {
		name, unit string
		n          int
	}{
		{"open-250KB", "```\n", 62_500},
		{"open-1MB", "```\n", 250_000},
		{"closed-1MB", "```json\n{\"a\":1}\n```\n", 50_000},
		{"unclosed-objects-1MB", "```json\n{\"name\":\"x\",", 50_000},
	} {
		s := strings.Repeat(tc.unit, tc.n)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				Extract(s)
			}
		})
	}
}

// A reply of thousands of fenced or tagged values decodes the first
// maxStructured of them: 190,000 fenced objects (4.6 MB) took 3.8 s and
// 320 MB, each decoded.
func TestManyFencesAreCapped(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "```json\n{\"a\":%d}\n```\n<json>{\"b\":%d}</json>\n", i, i)
	}
	cands, err := Extract(b.String())
	if err != nil || len(cands) == 0 || len(cands) > 2*maxStructured {
		t.Fatalf("%d candidates, %v; want at most %d", len(cands), err, 2*maxStructured)
	}
	if string(cands[0].JSON) != `{"a":0}` && string(cands[0].JSON) != `{"b":0}` {
		t.Errorf("first candidate %s; want the first value", cands[0].JSON)
	}
}
