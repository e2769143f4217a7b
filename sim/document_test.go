package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/extract"
)

func newDoc(t testing.TB, seed uint64, n int, lang string, chars int) Document {
	t.Helper()
	d, err := NewDocument(seed, n, lang, chars)
	if err != nil {
		t.Fatalf("NewDocument(%d, %d, %s, %d): %v", seed, n, lang, chars, err)
	}
	return d
}

func TestNewDocumentIsAFunctionOfItsSeed(t *testing.T) {
	t.Parallel()
	a := newDoc(t, 7, 3, "en", DocumentMinChars)
	b := newDoc(t, 7, 3, "en", DocumentMinChars)
	if a.Text != b.Text || !slices.Equal(a.Places, b.Places) || a.Truth.Provider != b.Truth.Provider {
		t.Fatal("two documents of one seed, number, language and length differ")
	}
	for _, other := range []Document{newDoc(t, 8, 3, "en", DocumentMinChars), newDoc(t, 7, 4, "en", DocumentMinChars)} {
		if other.Text == a.Text {
			t.Error("another seed or number wrote the same document")
		}
	}
}

func TestNewDocumentLength(t *testing.T) {
	t.Parallel()
	for _, lang := range DocumentLangs() {
		for _, chars := range []int{DocumentMinChars, 120_000, DocumentMaxChars} {
			d := newDoc(t, 1, 0, lang, chars)
			n := utf8.RuneCountInString(d.Text)
			// At least the length asked for, and at most one paragraph more.
			if n < chars || n > chars+1_000 {
				t.Errorf("%s, %d characters asked: %d written", lang, chars, n)
			}
			if len(d.Truth.Subsidiaries) != DocumentItems {
				t.Errorf("%s: %d subsidiaries, want %d", lang, len(d.Truth.Subsidiaries), DocumentItems)
			}
		}
	}
}

func TestNewDocumentRefusesBadRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		n     int
		lang  string
		chars int
	}{
		{"too short", 0, "en", DocumentMinChars - 1},
		{"too long", 0, "en", DocumentMaxChars + 1},
		{"unknown language", 0, "xx", DocumentMinChars},
		{"negative number", -1, "en", DocumentMinChars},
	} {
		if _, err := NewDocument(1, tc.n, tc.lang, tc.chars); !errors.Is(err, ErrDocument) {
			t.Errorf("%s: err = %v, want ErrDocument", tc.name, err)
		}
	}
}

func TestDocumentLanguages(t *testing.T) {
	t.Parallel()
	for _, lang := range DocumentLangs() {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			d := newDoc(t, 3, 1, lang, 120_000)
			if d.Lang != lang {
				t.Errorf("Lang = %q", d.Lang)
			}
			if got := detectDocLang(d.Text).code; got != lang {
				t.Errorf("the text reads as %q", got)
			}
			if got := len(d.Places); got != len(docScalars)+3*DocumentItems {
				t.Errorf("%d places, want %d", got, len(docScalars)+3*DocumentItems)
			}
			runes := []rune(d.Text)
			n := len(runes)
			truth := decodeJSON(t, string(mustJSON(d.Truth)))
			for _, p := range d.Places {
				written := string(runes[p.Start:p.End])
				v, _ := pointerGet(truth, p.Pointer)
				switch p.Pointer {
				case "/" + docProvider, "/" + docCustomer, "/" + docDate:
					if p.End > 1_500 {
						t.Errorf("%s ends at %d, not on the first page", p.Pointer, p.End)
					}
				case "/" + docLaw:
					if p.Start < n-1_000 {
						t.Errorf("%s starts at %d of %d, not at the end", p.Pointer, p.Start, n)
					}
				}
				// Strings are written as they are; the rest (numbers,
				// dates, the currency) the evidence stage grounds.
				if s, ok := v.(string); ok && p.Pointer != "/"+docDate && p.Pointer != "/"+docCurrency && s != written {
					t.Errorf("%s = %q, written %q", p.Pointer, s, written)
				}
			}
			src := evidence.New(d.Text)
			for _, ptr := range []string{"/" + docDate, "/" + docAmount, "/" + docNotice, "/" + docList + "/7/ownership_percent"} {
				v, _ := pointerGet(truth, ptr)
				if g := src.Align(v, nil).Leaves[0].Grade; g == fixpoint.GradeNone {
					t.Errorf("%s = %v is not grounded in the text", ptr, v)
				}
			}
			if lang == "ja" {
				// Prose runs without spaces between words: only tables,
				// headings and the Latin-script company suffixes have any.
				for _, line := range strings.Split(strings.ReplaceAll(d.Text, "Pte. Ltd.", ""), "\n") {
					if !strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "・") && strings.Contains(line, " ") {
						t.Fatalf("a Japanese prose line has a space: %q", line)
					}
				}
			}
		})
	}
}

// splitParagraphs cuts text at blank lines into chunks of about size
// bytes, without overlap.
func splitParagraphs(text string, size int) []string {
	var chunks []string
	var b strings.Builder
	for _, p := range strings.SplitAfter(text, "\n\n") {
		if b.Len() > 0 && b.Len()+len(p) > size {
			chunks = append(chunks, b.String())
			b.Reset()
		}
		b.WriteString(p)
	}
	return append(chunks, b.String())
}

func TestDocumentListCrossesChunks(t *testing.T) {
	t.Parallel()
	for _, lang := range DocumentLangs() {
		d := newDoc(t, 5, 2, lang, 120_000)
		chunks := splitParagraphs(d.Text, 16_000)
		var names []string
		withItems := 0
		for _, c := range chunks {
			items := readDocument(c).items
			if len(items) > 0 {
				withItems++
			}
			for _, it := range items {
				names = append(names, it.name.value.(string))
			}
		}
		if withItems < len(chunks)-1 {
			t.Errorf("%s: %d of %d chunks list subsidiaries, want all but one at most", lang, withItems, len(chunks))
		}
		want := make([]string, len(d.Truth.Subsidiaries))
		for i, s := range d.Truth.Subsidiaries {
			want[i] = s.Name
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: the chunks list %d subsidiaries, want the document's %d in order", lang, len(names), len(want))
		}

		// A cut inside an item's line: neither side holds it whole.
		line := d.Truth.Subsidiaries[250].Name
		at := strings.Index(d.Text, line) + len(line)/2
		for at > 0 && !utf8.RuneStart(d.Text[at]) {
			at--
		}
		before, after := readDocument(d.Text[:at]).items, readDocument(d.Text[at:]).items
		if len(before)+len(after) != DocumentItems-1 {
			t.Errorf("%s: cut inside item 250: %d + %d items read, want %d", lang, len(before), len(after), DocumentItems-1)
		}
		for _, it := range append(before, after...) {
			if it.name.value == line {
				t.Errorf("%s: item 250 read from half its line", lang)
			}
		}
	}
}

// docRequest is an OpenAI request over text with the document schema.
func docRequest(user, text string) map[string]any {
	return map[string]any{
		"model": "gpt-4o",
		"user":  user,
		"messages": []any{
			map[string]any{"role": "user", "content": strings.ReplaceAll(DocumentTemplate, "{{.id}}", user) + "\n" + text},
		},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "doc", "schema": json.RawMessage(DocumentSchema)}},
	}
}

// askDoc sends a document request and returns its value and faults.
func askDoc(t *testing.T, s *Server, user, text string) (map[string]any, string) {
	t.Helper()
	rec := do(t, s, "/v1/chat/completions", docRequest(user, text))
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	reply, _ := openAIText(t, rec.Body.Bytes())
	v, ok := decodeJSON(t, reply).(map[string]any)
	if !ok {
		t.Fatalf("reply %q is not an object", reply)
	}
	return v, rec.Header().Get("X-Sim-Faults")
}

func TestDocumentChunkAnswersWhatItHolds(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 2, 0, "de", 60_000)
	truth := decodeJSON(t, string(mustJSON(d.Truth))).(map[string]any)
	chunks := splitParagraphs(d.Text, 12_000)
	s := New(Config{Seed: 1})
	var items []any
	for i, c := range chunks {
		v, faults := askDoc(t, s, "job-1", c)
		want := readDocument(c)
		for _, f := range docScalars {
			_, held := want.fields[f]
			got, answered := v[f]
			if held != answered {
				t.Errorf("chunk %d: %s answered %v, held %v", i, f, answered, held)
			}
			if answered && !jsonEqual(got, truth[f]) {
				t.Errorf("chunk %d: %s = %v, want %v", i, f, got, truth[f])
			}
		}
		list, _ := v[docList].([]any)
		if len(list) != len(want.items) {
			t.Errorf("chunk %d: %d subsidiaries answered, %d held", i, len(list), len(want.items))
		}
		items = append(items, list...)
		if strings.Contains(faults, "invented") {
			t.Errorf("chunk %d: the clean simulator invents: %s", i, faults)
		}
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks, want several", len(chunks))
	}
	if !extract.SameValue(items, truth[docList]) {
		t.Error("the chunks' subsidiaries together are not the document's")
	}
	// The first chunk holds the parties, not the governing law.
	v, _ := askDoc(t, s, "job-1", chunks[0])
	if _, ok := v[docProvider]; !ok {
		t.Error("the first chunk's answer has no provider")
	}
	if _, ok := v[docLaw]; ok {
		t.Error("the first chunk's answer has a governing law")
	}
}

func TestDocumentInventsOnlyAbsentFields(t *testing.T) {
	t.Parallel()
	for _, lang := range DocumentLangs() {
		d := newDoc(t, 4, 0, lang, DocumentMinChars)
		truth := decodeJSON(t, string(mustJSON(d.Truth))).(map[string]any)
		src := evidence.New(d.Text)
		s := New(Config{Seed: 1, Mix: Mix{InventedAbsent: 1}})
		chunks := splitParagraphs(d.Text, 10_000)
		for i, c := range chunks {
			v, faults := askDoc(t, s, "job-2", c)
			held := readDocument(c).fields
			for _, f := range docScalars {
				got, answered := v[f]
				_, isHeld := held[f]
				switch {
				case isHeld:
					if !jsonEqual(got, truth[f]) {
						t.Errorf("%s chunk %d: held %s = %v, want the truth %v", lang, i, f, got, truth[f])
					}
				case f == docCurrency:
					if answered {
						t.Errorf("%s chunk %d: the currency (an enum, exempt) is invented: %v", lang, i, got)
					}
				default:
					if !answered {
						t.Errorf("%s chunk %d: absent %s not invented at rate 1", lang, i, f)
						continue
					}
					if g := src.Align(got, nil).Leaves[0].Grade; g != fixpoint.GradeNone {
						t.Errorf("%s chunk %d: the invention %s = %v is in the document (%s)", lang, i, f, got, g)
					}
					if !strings.Contains(faults, "invented_absent:/"+f) {
						t.Errorf("%s chunk %d: X-Sim-Faults %q lacks invented_absent:/%s", lang, i, faults, f)
					}
				}
			}
		}
		// The whole text holds every field: nothing is absent.
		if _, faults := askDoc(t, s, "job-2", d.Text); strings.Contains(faults, "invented_absent") {
			t.Errorf("%s: the whole document's answer invents: %s", lang, faults)
		}
	}
}

func TestDocumentListIsCut(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 6, 0, "fr", DocumentMinChars)
	truth := decodeJSON(t, string(mustJSON(d.Truth))).(map[string]any)
	v, _ := askDoc(t, New(Config{Seed: 1, MaxListItems: 30}), "job-3", d.Text)
	if !extract.SameValue(v[docList], truth[docList].([]any)[:30]) {
		t.Errorf("one call over the whole document lists %d subsidiaries, want the first 30", len(v[docList].([]any)))
	}
	v, _ = askDoc(t, New(Config{Seed: 1}), "job-3", d.Text)
	if n := len(v[docList].([]any)); n != DocumentItems {
		t.Errorf("without MaxListItems: %d subsidiaries, want %d", n, DocumentItems)
	}
}

func TestDocumentCorrections(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 8, 0, "en", DocumentMinChars)
	chunk := splitParagraphs(d.Text, 8_000)[1] // no parties, no governing law
	s := New(Config{Seed: 1, FixProb: 1, Mix: Mix{InventedAbsent: 1}})
	first, _ := askDoc(t, s, "job-4", chunk)
	law, ok := first[docLaw].(string)
	if !ok {
		t.Fatalf("no invented governing law in %v", first)
	}
	correct := func(feedback string) (map[string]any, string) {
		req := docRequest("job-4", chunk)
		req["messages"] = append(req["messages"].([]any),
			map[string]any{"role": "assistant", "content": string(mustJSON(first))},
			map[string]any{"role": "user", "content": feedback})
		rec := do(t, s, "/v1/chat/completions", req)
		reply, _ := openAIText(t, rec.Body.Bytes())
		return decodeJSON(t, reply).(map[string]any), rec.Header().Get("X-Sim-Faults")
	}
	// The evidence stage names the invention: it is taken back.
	v, faults := correct(`Fix these errors: 1. /governing_law: "` + law + `" does not appear in the source`)
	if _, ok := v[docLaw]; ok || strings.Contains(faults, "invented_absent:/governing_law") {
		t.Errorf("the named invention stays: %v (%s)", v[docLaw], faults)
	}
	if _, ok := v[docProvider]; !ok {
		t.Error("an invention the correction did not name went away")
	}
	// A validator that requires the field pushes the model to invent it.
	s = New(Config{Seed: 1, FixProb: 1})
	first, _ = askDoc(t, s, "job-4", chunk)
	if _, ok := first[docLaw]; ok {
		t.Fatalf("the clean simulator answers an absent field: %v", first[docLaw])
	}
	v, faults = correct(`Fix these errors: 1. /governing_law: missing required property`)
	if _, ok := v[docLaw]; !ok || !strings.Contains(faults, "invented_absent:/governing_law") {
		t.Errorf("a missing required absent field is not filled with an invention: %v (%s)", v[docLaw], faults)
	}
}

func TestDocumentChunksOfOneJobDrawApart(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 9, 0, "en", 120_000)
	cfg, _ := Preset("messy")
	s := New(cfg)
	seen := map[string]bool{}
	chunks := splitParagraphs(d.Text, 6_000)
	for _, c := range chunks {
		rec := do(t, s, "/v1/chat/completions", docRequest("job-5", c))
		seen[rec.Header().Get("X-Sim-Faults")] = true
		again := do(t, s, "/v1/chat/completions", docRequest("job-5", c))
		t1, _ := openAIText(t, rec.Body.Bytes())
		t2, _ := openAIText(t, again.Body.Bytes())
		if t1 != t2 || again.Header().Get("X-Sim-Faults") != rec.Header().Get("X-Sim-Faults") {
			t.Fatal("one chunk of one job got two replies")
		}
	}
	if len(seen) < len(chunks)/2 {
		t.Errorf("%d chunks of one job drew %d fault sets", len(chunks), len(seen))
	}
}

func TestDocumentSettingsLeaveOtherRequestsAlone(t *testing.T) {
	t.Parallel()
	base, _ := Preset("typical")
	docs := base
	docs.Mix.InventedAbsent, docs.MaxListItems = 1, 1
	base.Mix.InventedAbsent, base.MaxListItems = 0, 0
	a, b := New(base), New(docs)
	for _, user := range []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"} {
		ra := do(t, a, "/v1/chat/completions", orderRequest(user))
		rb := do(t, b, "/v1/chat/completions", orderRequest(user))
		ta, _ := openAIText(t, ra.Body.Bytes())
		tb, _ := openAIText(t, rb.Body.Bytes())
		if ta != tb || ra.Header().Get("X-Sim-Faults") != rb.Header().Get("X-Sim-Faults") {
			t.Fatalf("%s: the document settings change a request without the document schema", user)
		}
	}
}

func BenchmarkNewDocument500k(b *testing.B) {
	for _, lang := range []string{"en", "ja"} {
		b.Run(lang, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := NewDocument(1, i, lang, DocumentMaxChars); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDocumentAnswer measures the simulator answering one request
// over a whole 120,000-character document and over one 16,000-byte chunk
// of it, on messy, each iteration a new job (no cached truth).
func BenchmarkDocumentAnswer(b *testing.B) {
	d := newDoc(b, 1, 0, "en", 120_000)
	for name, text := range map[string]string{"whole": d.Text, "chunk": splitParagraphs(d.Text, 16_000)[3]} {
		b.Run(name, func(b *testing.B) {
			cfg, _ := Preset("messy")
			s := New(cfg)
			bodies := make([][]byte, 64)
			for i := range bodies {
				bodies[i] = mustJSON(docRequest("bench-"+strconv.Itoa(i), text))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(bodies[i%len(bodies)]))
				s.ServeHTTP(&discard{h: http.Header{}}, req)
			}
		})
	}
}

func TestDocumentAnswersOnEveryWireFormat(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 10, 0, "ja", DocumentMinChars)
	chunk := splitParagraphs(d.Text, 20_000)[0]
	s := New(Config{Seed: 1})
	want, _ := askDoc(t, s, "job-6", chunk)
	prompt := strings.ReplaceAll(DocumentTemplate, "{{.id}}", "job-6") + "\n" + chunk
	schema := json.RawMessage(DocumentSchema)

	rec := do(t, s, "/v1/messages", map[string]any{
		"model": "sim-sonnet", "max_tokens": 64000, "metadata": map[string]any{"user_id": "job-6"},
		"messages":    []any{map[string]any{"role": "user", "content": prompt}},
		"tools":       []any{map[string]any{"name": "extract", "input_schema": schema}},
		"tool_choice": map[string]any{"type": "tool", "name": "extract"},
	})
	var ant struct {
		Content []struct {
			Type  string          `json:"type"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ant); err != nil || len(ant.Content) == 0 || ant.Content[len(ant.Content)-1].Type != "tool_use" {
		t.Fatalf("Anthropic reply %s: %v", rec.Body, err)
	}
	if got := decodeJSON(t, string(ant.Content[len(ant.Content)-1].Input)); !extract.SameValue(got, want) {
		t.Errorf("Anthropic tool input differs from the OpenAI reply:\n%v\n%v", got, want)
	}

	rec = do(t, s, "/api/chat", map[string]any{
		"model": "sim", "stream": false, "format": schema,
		"messages": []any{map[string]any{"role": "user", "content": prompt}},
	})
	var oll struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &oll); err != nil {
		t.Fatalf("Ollama reply %s: %v", rec.Body, err)
	}
	// Ollama sends no user id: the task is keyed by the prompt, and the
	// clean simulator's answer is what the text holds either way.
	if got := decodeJSON(t, oll.Message.Content); !extract.SameValue(got, want) {
		t.Errorf("Ollama reply differs from the OpenAI reply:\n%v\n%v", got, want)
	}
	if _, ok := want[docProvider]; !ok || len(want[docList].([]any)) == 0 {
		t.Errorf("the first chunk's answer lacks the provider or the list: %v", want)
	}
}

func TestDocumentInventionsOfHeldFieldsAreInNoDocument(t *testing.T) {
	t.Parallel()
	d := newDoc(t, 11, 0, "en", DocumentMinChars)
	src := evidence.New(d.Text)
	s := New(Config{Seed: 1, Mix: Mix{Invented: 1}})
	scalars := 0
	preamble := d.Text[:strings.Index(d.Text, "## 1.")] // the parties and the date
	for i := range 40 {
		text := d.Text
		if i%2 == 0 {
			text = preamble
		}
		v, faults := askDoc(t, s, "job-7-"+strconv.Itoa(i), text)
		for _, f := range strings.Split(faults, ",") {
			ptr, ok := strings.CutPrefix(f, "invented:")
			if !ok {
				continue
			}
			got, _ := pointerGet(any(v), ptr)
			if g := src.Align(got, nil).Leaves[0].Grade; g != fixpoint.GradeNone {
				t.Errorf("invented %s = %v is grounded in the document (%s)", ptr, got, g)
			}
			if docField(ptr) != "" {
				scalars++
			}
		}
	}
	if scalars == 0 {
		t.Error("40 replies invented no planted field")
	}
}
