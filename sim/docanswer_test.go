package sim

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// sequentialText is a sequential request's text over chunk c: the chunk,
// then the value so far between its markers (none before the first).
func sequentialText(t *testing.T, c string, soFar map[string]any) string {
	if soFar == nil {
		return c
	}
	return c + "\n" + fixpoint.ValueSoFarOpen + "\n" + string(mustJSON(soFar)) + "\n" + fixpoint.ValueSoFarClose + "\n"
}

// TestSequentialExtendsTheValueSoFar: a request carrying the value so far
// is answered with the whole value: what the value so far holds, each
// field the chunk states, and the chunk's subsidiaries (cut to
// MaxListItems) after the value's; read in order, the chunks build the
// document's fields.
func TestSequentialExtendsTheValueSoFar(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "ja"} {
		d := newDoc(t, 5, 0, lang, 60_000)
		truth := decodeJSON(t, string(mustJSON(d.Truth))).(map[string]any)
		s := New(Config{Seed: 1, MaxListItems: 5, Mix: Mix{InventedAbsent: 1}})
		var soFar map[string]any
		wantItems := 0
		for i, c := range splitParagraphs(d.Text, 12_000) {
			v, _ := askDoc(t, s, "job-seq", sequentialText(t, c, soFar))
			prevList, _ := soFar[docList].([]any)
			list, _ := v[docList].([]any)
			added := min(len(readDocument(c).items), 5)
			wantItems += added
			if len(list) != len(prevList)+added || (len(prevList) > 0 && !jsonEqual(list[:len(prevList)], prevList)) {
				t.Fatalf("%s chunk %d: %d subsidiaries, want the %d so far first and %d of the chunk", lang, i, len(list), len(prevList), added)
			}
			for k, pv := range soFar {
				if _, stated := readDocument(c).fields[k]; !stated && k != docList && !jsonEqual(v[k], pv) {
					t.Errorf("%s chunk %d: %s = %v, the value so far had %v and the chunk does not state it", lang, i, k, v[k], pv)
				}
			}
			soFar = v
		}
		for _, f := range docScalars {
			if !jsonEqual(soFar[f], truth[f]) {
				t.Errorf("%s: after the last chunk %s = %v, want %v", lang, f, soFar[f], truth[f])
			}
		}
		if n := len(soFar[docList].([]any)); n != wantItems {
			t.Errorf("%s: %d subsidiaries at the end, want %d", lang, n, wantItems)
		}
	}
}

// TestCutValueSoFar: the value so far is taken out of the text, and a
// text without one is left as it is.
func TestCutValueSoFar(t *testing.T) {
	t.Parallel()
	text := "chunk\n" + fixpoint.ValueSoFarOpen + "\n{\"total_amount\": 1.50}\n" + fixpoint.ValueSoFarClose + "\ntask"
	rest, v := cutValueSoFar(text)
	if rest != "chunk\n\ntask" || !jsonEqual(v, map[string]any{"total_amount": decodeNumbers([]byte("1.50"))}) {
		t.Errorf("got %q, %v", rest, v)
	}
	if rest, v := cutValueSoFar("no value here"); rest != "no value here" || v != nil {
		t.Errorf("got %q, %v", rest, v)
	}
}

// TestCorrectionLooksItemsUp: a correction over a document list finds each
// item of the value in the text by its name, or by its country and
// percent when its name is missing, whatever the value's order and past
// the list cut: the field the feedback names is filled from that item.
func TestCorrectionLooksItemsUp(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 6, 0, "en", DocumentMinChars)
	s := New(Config{Seed: 1, MaxListItems: 5, FixProb: 1})
	read := readDocument(d.Text)
	late, later := read.items[40], read.items[7]
	value := map[string]any{docList: []any{
		map[string]any{"name": late.name.value, "ownership_percent": late.pct.value},
		map[string]any{"country": later.country.value, "ownership_percent": later.pct.value},
	}}
	for f, v := range read.value(0) {
		if f != docList {
			value[f] = v
		}
	}
	prev := string(mustJSON(value))
	feedback := "Fix every error:\n1. /subsidiaries/0/country: missing required property \"country\"\n2. /subsidiaries/1/name: missing required property \"name\""
	req := docRequest("job-fix", d.Text)
	req["messages"] = append(req["messages"].([]any),
		map[string]any{"role": "assistant", "content": prev},
		map[string]any{"role": "user", "content": feedback})
	rec := do(t, s, "/v1/chat/completions", req)
	reply, _ := openAIText(t, rec.Body.Bytes())
	got := decodeJSON(t, reply).(map[string]any)[docList].([]any)
	if len(got) != 2 || itemString(got[0], "country") != late.country.value || itemString(got[1], "name") != later.name.value {
		t.Errorf("corrected list %v, want item 41's country and item 8's name filled in", got)
	}
}
