package web_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/store"
)

// truthBatch is a batch whose schema has rules and whose values were
// graded against sources with accents, CJK text and emoji.
const truthBatch = "truth"

// truthSchema has a rule of each severity.
const truthSchema = `{"type":"object","properties":{"vendor":{"type":"string"},"customer":{"type":"string"},"total":{"type":"number"},
	"date":{"type":"string"},"city":{"type":"string"},"carrier":{"type":"string"},"items":{"type":"array","items":{"type":"string"}}},
	"x-fixpoint-rules":[{"rule":"self.total > 0.0","message":"the total must be positive","path":"/total"},
	{"rule":"size(self.vendor) <= 12","message":"a vendor name this long is unusual","path":"/vendor","severity":"warn"}]}`

// truthTemplate renders a row into its prompt: its example's carrier
// ("DHL") is the template's text, not the row's, and grounds nothing.
func truthPrompt(customer, text string) string {
	return "Extract the order as JSON, for example {\"carrier\": \"DHL\"}.\nCustomer: " + customer + "\n" + text
}

// truthRows are the batch's rows and the values the model gave: the
// first value of a job breaks the error rule when there are two.
var truthRows = []struct {
	customer, text string
	values         []string
}{
	{"Zoë Ångström", "Commande n° 4711 de Müller & Söhne 🙂🙂 — total 1.249,99 € le 15 janvier 2027, livrée à Zürich 🚚 par La Poste.",
		[]string{`{"vendor":"Müller & Söhne","customer":"Zoe Angstrom","total":-1249.99,"date":"2027-01-15","city":"Zurich","carrier":"DHL","items":["4711"]}`,
			`{"vendor":"Müller & Söhne","customer":"Zoe Angstrom","total":1249.99,"date":"2027-01-15","city":"Zurich","carrier":"DHL","items":["4711"]}`}},
	{"山田 太郎", "注文番号 8812：東京タワー店 より 2026年12月1日 に発送 📦 合計 3 450,00",
		[]string{`{"vendor":"東京タワー店","customer":"山田 太郎","total":3450,"date":"2026-12-01","city":"Tokyo","carrier":"Yamato","items":["8812"]}`}},
	{"Dana Cohen", "Order 5521 from Acme Corp, total $18,500 on March 3rd, 2027, ship to Boston.",
		[]string{`{"vendor":"Acme Corp","customer":"Dana Cohen","total":18500,"date":"2027-03-03","city":"Boston","carrier":"UPS","items":["5521","5522"]}`}},
	{"Eli Novak", "Order 77 from Globex Corporation, total 230 on 2027-02-10, ship to Prague.",
		[]string{`{"vendor":"Globex Corporation","customer":"Eli Novak","total":320,"date":"2027-02-10","city":"Praha","carrier":"DHL","items":["77"]}`}},
}

// truthJob is a job of truthBatch; its final check's grades and source
// are kept for the checks.
type truthJob struct {
	id     string
	source string
	grades []fixpoint.Grounding
	value  map[string]any
}

// truthSchemaV2 is truthSchema with one more rule, which the fourth job's
// value breaks: the batch is revalidated against it.
var truthSchemaV2 = strings.Replace(truthSchema, `"x-fixpoint-rules":[`,
	`"x-fixpoint-rules":[{"rule":"self.city != 'Praha'","message":"write the city in English","path":"/city"},`, 1)

func (l *dashLedger) addTruth(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	set, err := rules.Compile([]byte(truthSchema))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := l.st.PutSchema(ctx, []byte(truthSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.st.PutBatch(ctx, store.BatchParams{Name: truthBatch, SchemaHash: hash, TotalJobs: len(truthRows),
		Settings: json.RawMessage(`{"provider":"openai","model":"sim-messy","evidence":"check","evidence_source":"row"}`)}); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for i, row := range truthRows {
		id := fmt.Sprintf("%s-%d", truthBatch, i+1)
		meta, _ := json.Marshal(map[string]string{"customer": row.customer, "text": row.text})
		prompt := truthPrompt(row.customer, row.text)
		if _, err := l.st.InsertJobs(ctx, []store.NewJob{{ID: id, Batch: truthBatch, RowNo: i + 1, SchemaHash: hash, Prompt: prompt,
			Provider: "openai", Model: "sim-messy", Mode: "prompt", Strategy: "conversation", Metadata: meta}}); err != nil {
			t.Fatal(err)
		}
		source, err := evidence.JobSource(meta, prompt, fixpoint.EvidenceSourceRow)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, source)
		r := store.Result{JobID: id, Status: fixpoint.StatusValid, Attempts: len(row.values), Calls: len(row.values), FirstAttemptValid: len(row.values) == 1}
		var grades []fixpoint.Grounding
		for n, v := range row.values {
			a, g := gradedAttempt(t, set, source, v)
			a.No = n + 1
			r.AttemptRows = append(r.AttemptRows, a)
			r.Value, grades = json.RawMessage(v), g
		}
		if _, err := l.st.SaveResults(ctx, []store.Result{r}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			l.truth = truthJob{id: id, source: source, grades: grades}
			_ = json.Unmarshal(r.Value, &l.truth.value)
		}
	}
	l.revalidateTruth(t, sources)
}

// revalidateTruth checks the last two jobs' values again against
// truthSchemaV2, as enqueue revalidate does: the third passes (its grades
// kept in l.revalidated), the fourth breaks the new rule.
func (l *dashLedger) revalidateTruth(t *testing.T, sources []string) {
	t.Helper()
	ctx := context.Background()
	set, err := rules.Compile([]byte(truthSchemaV2))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := l.st.PutSchema(ctx, []byte(truthSchemaV2))
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []store.RevalidationOutcome
	for i := 2; i < len(truthRows); i++ {
		v := truthRows[i].values[len(truthRows[i].values)-1]
		a, grades := gradedAttempt(t, set, sources[i], v)
		o := store.RevalidationOutcome{JobID: fmt.Sprintf("%s-%d", truthBatch, i+1), PriorRun: 1, Valid: a.Valid, Value: json.RawMessage(v),
			Class: a.Class, Errors: a.Errors, Warnings: a.Warnings, Evidence: a.Evidence}
		if !a.Valid {
			o.Error = "the value fails the new schema"
		} else {
			l.revalidated = truthJob{id: o.JobID, source: sources[i], grades: grades}
			_ = json.Unmarshal(o.Value, &l.revalidated.value)
		}
		outcomes = append(outcomes, o)
	}
	if _, _, err := l.st.SaveRevalidation(ctx, store.RevalidationParams{Batch: truthBatch, SchemaHash: hash,
		Settings: json.RawMessage(`{"provider":"openai","model":"sim-messy","evidence":"check","evidence_source":"row"}`)},
		func() (*store.RevalidationOutcome, error) {
			if len(outcomes) == 0 {
				return nil, nil
			}
			o := outcomes[0]
			outcomes = outcomes[1:]
			return &o, nil
		}); err != nil {
		t.Fatal(err)
	}
	if l.revalidated.id == "" {
		t.Fatal("no truth job passed the revalidation")
	}
}

// gradedAttempt is the attempt a worker records of value: not valid with
// its rules' errors, or valid with its warnings and its grades against
// source.
func gradedAttempt(t *testing.T, set *rules.Set, source, value string) (store.Attempt, []fixpoint.Grounding) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	findings, err := set.Check(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Attempt{Raw: value, Valid: true, Model: "sim-messy", LatencyMS: 15, TokensIn: 120, TokensOut: 40,
		StartedAt: time.Now(), FinishReason: "stop", ProviderStatus: 200}
	var warns []fixpoint.ValidationError
	for _, f := range findings {
		if f.Severity == rules.SeverityWarn {
			warns = append(warns, f.ValidationError())
		}
	}
	if warns != nil {
		a.Warnings = marshal(t, warns)
	}
	if errs := rules.Errors(findings); errs != nil {
		a.Valid, a.Class, a.Errors = false, string(fixpoint.ClassSemantic), marshal(t, errs)
		a.Feedback = errs[0].Message
		return a, nil
	}
	grades := evidence.New(source).Align(v, nil).Leaves
	a.Evidence = marshal(t, grades)
	return a, grades
}

func marshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// quote is the source text of a span, cut by code points independently
// of the page's code ([]rune of valid UTF-8).
func quote(source string, g fixpoint.Grounding) string {
	return string([]rune(source)[g.Start:g.End])
}

// The job page shows the source text with each found string and number
// highlighted at its span (code point offsets into text with accents,
// emoji and CJK), lists the ones not found with their value, and each
// card its rule warnings and grades.
func testTruthJob(t *testing.T, l *dashLedger, srv *httptest.Server) {
	tj := l.truth
	resp, body := get(t, srv, "/jobs/"+url.PathEscape(tj.id))
	wantPage(t, resp, body, 200, `<section id="source">`, "evidence source <span class=\"mono\">row</span>",
		"Rule warnings", "a vendor name this long is unusual (rule: size(self.vendor) &lt;= 12)", `<table class="grades">`,
		"the total must be positive")
	checkSource(t, body, tj)
	// The final attempt's card quotes the source at each grade's span.
	card := body[strings.Index(body, `id="attempt-2"`):]
	for _, g := range tj.grades {
		if g.Grade != fixpoint.GradeNone && !strings.Contains(card, `<td class="msg">`+html.EscapeString(quote(tj.source, g))+`</td>`) {
			t.Errorf("attempt 2's card does not quote %s as %q", g.Path, quote(tj.source, g))
		}
	}
	// A job whose attempts were never graded (the hostile batch) has no
	// source part.
	if _, body := get(t, srv, "/jobs/"+url.PathEscape(l.xssJob)); strings.Contains(body, `id="source"`) {
		t.Error("a job without grades shows a source part")
	}
}

// checkSource checks a job page's source part: the job's source whole,
// each found string and number marked at its span with its grade, each
// ungrounded one listed with its value.
func checkSource(t *testing.T, body string, tj truthJob) {
	t.Helper()
	src := regexp.MustCompile(`(?s)<pre class="box source">(.*?)</pre>`).FindStringSubmatch(body)
	if src == nil {
		t.Fatalf("the page of %s has no source box", tj.id)
	}
	// The box holds the source whole, its marks aside.
	if text := html.UnescapeString(regexp.MustCompile(`</?mark[^>]*>`).ReplaceAllString(src[1], "")); text != tj.source {
		t.Errorf("the source box reads %q, want the job's source %q", text, tj.source)
	}
	var found, none int
	for _, g := range tj.grades {
		if g.Grade == fixpoint.GradeNone {
			none++
			want := fmt.Sprintf(`<span class="mono">%s</span> <span class="badge g-none">none</span> <span class="msg">%s</span>`,
				g.Path, html.EscapeString(fmt.Sprint(valueOf(tj.value, g.Path))))
			if !strings.Contains(body, want) {
				t.Errorf("the ungrounded %s is not listed with its value: want %s", g.Path, want)
			}
			continue
		}
		found++
		mark := fmt.Sprintf(`<mark class="g-%s" title="%s: %s">%s</mark>`, g.Grade, g.Path, g.Grade, html.EscapeString(quote(tj.source, g)))
		if !strings.Contains(src[1], mark) {
			t.Errorf("%s (%s, %d-%d) is not highlighted as %s", g.Path, g.Grade, g.Start, g.End, mark)
		}
	}
	if found < 5 || none < 1 || strings.Count(src[1], "<mark") != found {
		t.Errorf("%d marks in the source box; want the %d found (and %d ungrounded, at least 1)", strings.Count(src[1], "<mark"), found, none)
	}
}

// A revalidated job's page shows the revalidation that made its latest
// run as a card, and its source with the revalidation's grades; a job
// the revalidation failed shows why, and no source (no grade).
func testTruthRevalidated(t *testing.T, l *dashLedger, srv *httptest.Server) {
	rv := l.revalidated
	resp, body := get(t, srv, "/jobs/"+url.PathEscape(rv.id))
	wantPage(t, resp, body, 200, `<section id="revalidation">`, "Revalidation: run 2", "the value of run 1, checked again",
		`<span class="badge s-valid">valid</span>`, "The text the revalidation of run 2 checked the value", "Run 2 is a revalidation")
	checkSource(t, body, rv)
	card := body[strings.Index(body, `id="revalidation-card"`):strings.Index(body, `id="attempts"`)]
	if n := strings.Count(card, `<td><span class="badge g-`); n != len(rv.grades) {
		t.Errorf("the revalidation's card lists %d grades, want %d", n, len(rv.grades))
	}
	failed := fmt.Sprintf("%s-%d", truthBatch, len(truthRows))
	resp, body = get(t, srv, "/jobs/"+url.PathEscape(failed))
	wantPage(t, resp, body, 200, `<article class="card bad" id="revalidation-card">`, `<span class="badge c-semantic">semantic</span>`,
		"write the city in English (rule: self.city != &#39;Praha&#39;)")
	if strings.Contains(body, `id="source"`) {
		t.Errorf("job %s, whose revalidation graded nothing, shows a source", failed)
	}
}

// valueOf is the value at a pointer of a decoded JSON object (the first
// level, or an array's element).
func valueOf(v map[string]any, ptr string) any {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	x := v[parts[0]]
	if len(parts) == 2 {
		var i int
		fmt.Sscan(parts[1], &i)
		return x.([]any)[i]
	}
	return x
}

// The batch page's rule failures and grounding by field parts read the
// ledger's views.
func testTruthBatch(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx := context.Background()
	base := "/batches/" + url.PathEscape(truthBatch)
	resp, body := get(t, srv, base)
	wantPage(t, resp, body, 200, "Rule failures", "Grounding by field", `hx-get="`+base+`/rules" hx-trigger="load"`,
		`hx-get="`+base+`/grounding" hx-trigger="load"`)
	rf, err := l.st.RuleFailures(ctx, truthBatch, 0)
	if err != nil || len(rf) != 3 {
		t.Fatalf("rule failures of %s: %+v (%v); want the warn, the error rule and the revalidation's", truthBatch, rf, err)
	}
	resp, body = get(t, srv, base+"/rules", "HX-Request", "true")
	for _, f := range rf {
		wantPage(t, resp, body, 200, fmt.Sprintf(`<td class="mono msg">%s</td>`, html.EscapeString(f.Rule)),
			fmt.Sprintf(`<span class="badge sev-%s">%s</span></td><td class="n">%d</td><td class="n">%d</td><td class="n">%d</td>`,
				f.Severity, f.Severity, f.Failures, f.Jobs, f.FinalJobs))
	}
	fields, err := l.st.Grounding(ctx, truthBatch, 0)
	if err != nil || len(fields) < 5 {
		t.Fatalf("grounding of %s: %+v (%v)", truthBatch, fields, err)
	}
	resp, body = get(t, srv, base+"/grounding", "HX-Request", "true")
	rows := regexp.MustCompile(`(?s)<tr>\s*<td class="mono">([^<]*)</td><td class="n">(\d+)</td>`).FindAllStringSubmatch(body, -1)
	if len(rows) != len(fields) {
		t.Fatalf("the grounding part has %d rows, want %d:\n%s", len(rows), len(fields), body)
	}
	for i, f := range fields {
		if rows[i][1] != f.Path || rows[i][2] != fmt.Sprint(f.Leaves) {
			t.Errorf("grounding row %d: %s %s, want %s %d", i, rows[i][1], rows[i][2], f.Path, f.Leaves)
		}
	}
	// The carrier is never in a source: its bar is all none, and first.
	if fields[0].Path != "/carrier" || !strings.Contains(body, `<rect class="g-none" x="0.0" y="0" width="1000.0" height="10">`) {
		t.Errorf("the first field is %s, want /carrier wholly ungrounded:\n%s", fields[0].Path, body)
	}
	wantPage(t, resp, body, 200)
}

// shotOf writes a screenshot of the element sel to docs/img/NAME
// (-screenshots), else to a temporary directory.
func (b *browserRun) shotOf(name, sel string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.Screenshot(sel))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", sel, err)
	}
	dir := b.t.TempDir()
	if *screenshots {
		dir = filepath.Join("..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// testBrowserTruth: a graded job's source, each found string and number
// highlighted on the very characters of its span (the browser counts in
// UTF-16: the emoji before them would shift a span counted in the wrong
// unit), in a colour per grade; the batch's rule failures and grounding
// by field loaded into its page.
func testBrowserTruth(b *browserRun, l *dashLedger) {
	t, ctx := b.t, b.ctx
	tj := l.truth
	var spans []fixpoint.Grounding
	for _, g := range tj.grades {
		if g.Grade != fixpoint.GradeNone {
			spans = append(spans, g)
		}
	}
	slices.SortFunc(spans, func(a, b fixpoint.Grounding) int { return cmp.Compare(a.Start, b.Start) })
	var quotes, grades []string
	for _, g := range spans {
		quotes, grades = append(quotes, quote(tj.source, g)), append(grades, "g-"+string(g.Grade))
	}
	want, _ := json.Marshal([2][]string{quotes, grades})
	b.open("/jobs/"+url.PathEscape(tj.id), "pre.source mark")
	if !b.eval(fmt.Sprintf(`(() => { const [quotes, grades] = %s; const marks = [...document.querySelectorAll('pre.source mark')];
			return marks.length === quotes.length && marks.every((m, i) => m.textContent === quotes[i] && m.className === grades[i]); })()`, want)) {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('pre.source mark')].map(m => m.className + ' ' + m.textContent)`))
		t.Errorf("the source's marks are %q; want %q in %q", got, quotes, grades)
	}
	if !b.eval(`(() => { const bg = c => getComputedStyle(document.querySelector('pre.source mark.' + c)).backgroundColor;
			return bg('g-exact') !== bg('g-normalized') && !!document.querySelector('ul.ungrounded li .g-none'); })()`) {
		t.Error("exact and normalized marks share a colour, or the ungrounded values are not listed")
	}
	b.shotOf("dashboard-job-source.png", "#source")
	b.shotOf("dashboard-job-grades.png", "#attempt-2")
	b.check("/jobs/" + tj.id)

	rv := "/jobs/" + url.PathEscape(l.revalidated.id)
	b.open(rv, "#revalidation-card")
	b.shotOf("dashboard-job-revalidation.png", "#revalidation")
	b.check(rv)

	b.open("/batches/"+truthBatch, "#rules-section")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#rules tbody tr').length === 3 &&
			document.querySelectorAll('#grounding tbody tr svg.gbar rect').length > 0`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the batch page did not load its rule failures and grounding: %v", err)
	}
	b.shotOf("dashboard-batch-truth.png", "#truth-panels")
	b.check("/batches/" + truthBatch)
}
