package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/store"
)

// jobView is a job's page.
type jobView struct {
	Title string
	Job   *store.JobRecord
	// Input is the input row, Value the final value, Prompt the rendered
	// prompt: indented when they are JSON.
	Input, Value string
	// Cards are the attempts of the job's current run; Groups, for a
	// document job, the same grouped by step.
	Cards  []card
	Groups []stepGroup
	// Document is a document job's document with its value's spans;
	// DocumentErr says why it is not shown.
	Document    *documentView
	DocumentErr string
	// Source is the job's source text with its final check's grades, nil
	// when that check has none; Revalidation the check that made its
	// latest run, when that run is a revalidation.
	Source       *sourceView
	Revalidation *revalidationView
	Interrupted  []store.InterruptedCalls
	// Runs, for a requeued job, are its runs side by side, the current
	// one first; Earlier the runs before it with their attempts.
	Runs    []runRow
	Earlier []runView
}

// runRow is one run of a job in the page's comparison of its runs.
type runRow struct {
	Run                      int
	Latest                   bool
	Status, Model            string
	Attempts, Calls          int
	TokensIn, TokensOut      int64
	CostUSD                  float64
	FinishedAt               time.Time
	FinalClass, Error, Value string
}

// runView is an earlier run of a job: its outcome, its value and its
// attempts' cards.
type runView struct {
	runRow
	Cards []card
}

// card is one attempt.
type card struct {
	store.Attempt
	// Anchor is the card's id in the page.
	Anchor string
	// Badge is "valid" or the attempt's class.
	Badge string
	// Value is the JSON value found in the reply, indented ("" when none).
	Value string
	// Errors are the validation errors; Repairs the local repairs and
	// coercions.
	Errors  []attemptError
	Repairs []repair
	// Warnings are the failures of the schema's rules of severity warn;
	// Grades each string and number of the value against the source.
	Warnings []attemptError
	Grades   []gradeRow
	// Request is the request as sent, indented.
	Request string
	// Diff is the line diff of Value against the previous card's value.
	Diff []diffLine
	// HasPrev says there was a previous value to compare with.
	HasPrev bool
	// RetryClasses are the classes of the transport retries.
	RetryClasses []string
	// Doc is the attempt's step of a document strategy, nil for another
	// strategy's attempt.
	Doc *docStep
}

// TransportNote says the card shows its transport line: something
// happened on the way (a retry, a provider error, a status other than
// 2xx), not an attempt that got its 200 at once.
func (c card) TransportNote() bool {
	ok := c.ProviderStatus == 0 || (c.ProviderStatus >= 200 && c.ProviderStatus < 300)
	return c.TransportRetries > 0 || c.ProviderError != "" || c.ProviderClass != "" || !ok
}

// attemptError is one validation error of an attempt.
type attemptError struct {
	Path    string `json:"path"`
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

// repair is one local repair or coercion.
type repair struct {
	Kind    string          `json:"kind"`
	Offset  int             `json:"offset"`
	Pointer string          `json:"pointer"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
}

// diffLine is a line of a diff: Kind is "same", "add", "del" or "hunk";
// Text starts with the unified diff's sign.
type diffLine struct {
	Kind string
	Text string
}

// jobDocument is a document job's document as its page asks for it:
// its text (Err says why there is none), and whether the page shows it
// whole.
type jobDocument struct {
	Text string
	Err  error
	Full bool
}

func newJobView(d store.JobDetail, doc jobDocument) jobView {
	j := d.Job
	v := jobView{Title: "Job " + j.ID, Job: j, Interrupted: d.Interrupted}
	v.Input = indent(j.Metadata)
	v.Value = indent(j.Value)
	var src *sourceText // nil: no grade to show, or no source to quote
	switch {
	case j.DocumentHash != "":
		// A document job's spans index its document, which the page
		// shows whole or clipped (documentView), never as a row's source.
		if doc.Err == nil {
			src = newSourceText(doc.Text)
		}
	case slices.ContainsFunc(d.Attempts, func(a store.Attempt) bool { return a.Evidence != nil }) ||
		d.Revalidation != nil && d.Revalidation.Evidence != nil:
		setting, text, err := jobSource(d)
		if err == nil {
			src = newSourceText(text)
		}
		v.Source = newSourceView(d, setting, src, err)
	}
	v.Cards = newCards(d.Attempts, "attempt-", src)
	v.Groups = cardGroups(v.Cards)
	if j.DocumentHash != "" {
		if doc.Err != nil {
			v.DocumentErr = fmt.Sprintf("the document %s cannot be read: %v", j.DocumentHash, doc.Err)
		} else {
			v.Document = newDocumentView(d, doc.Text, stepChunks(v.Cards), doc.Full)
		}
	}
	if rv := d.Revalidation; rv != nil {
		v.Revalidation = newRevalidationView(*rv, src)
	}
	if len(d.Runs) == 0 {
		return v
	}
	v.Runs = append(v.Runs, runRow{Run: j.Run, Latest: true, Status: string(j.Status), Model: j.Model, Attempts: j.Attempts, Calls: j.Calls,
		TokensIn: j.TokensIn, TokensOut: j.TokensOut, CostUSD: j.CostUSD, FinishedAt: j.FinishedAt, FinalClass: j.FinalClass, Error: j.Error, Value: v.Value})
	for _, r := range d.Runs {
		row := runRow{Run: r.Run, Status: string(r.Status), Model: r.Model, Attempts: r.Attempts, Calls: r.Calls, TokensIn: r.TokensIn,
			TokensOut: r.TokensOut, CostUSD: r.CostUSD, FinishedAt: r.FinishedAt, FinalClass: r.FinalClass, Error: r.Error, Value: indent(r.Value)}
		v.Runs = append(v.Runs, row)
		// An earlier run's source may differ (a requeue can change it):
		// its grades are shown without their text.
		v.Earlier = append(v.Earlier, runView{runRow: row, Cards: newCards(r.AttemptRows, fmt.Sprintf("run-%d-attempt-", r.Run), nil)})
	}
	return v
}

// newCards are the cards of one run's attempts, each value diffed against
// the previous one's; anchor prefixes each card's id. src, when not nil,
// is the run's source text, which the grades quote.
func newCards(attempts []store.Attempt, anchor string, src *sourceText) []card {
	var cards []card
	inputs := make([]stepInput, len(attempts))
	for i, a := range attempts {
		inputs[i] = storeStepInput(a)
	}
	steps := docSteps(inputs)
	prev := map[string]string{} // the last value of each line of calls (diffKey)
	for i, a := range attempts {
		c := card{Attempt: a, Anchor: anchor + strconv.Itoa(a.No), Badge: a.Class, Request: indent(a.Request)}
		if steps != nil {
			c.Doc = steps[i]
		}
		switch {
		case a.Valid:
			c.Badge = "valid"
		case c.Badge == "" && c.Doc != nil:
			c.Badge = stepBadge(c.Doc)
		}
		_ = json.Unmarshal(a.Errors, &c.Errors)
		_ = json.Unmarshal(a.Repairs, &c.Repairs)
		_ = json.Unmarshal(a.RetryClasses, &c.RetryClasses)
		_ = json.Unmarshal(a.Warnings, &c.Warnings)
		c.Grades = gradeRows(a.Evidence, src)
		c.Value = replyValue(a.Raw)
		if c.Value != "" {
			key := diffKey(c.Doc)
			if p, ok := prev[key]; ok {
				c.HasPrev = true
				c.Diff = lineDiff(p, c.Value)
			}
			prev[key] = c.Value
		}
		cards = append(cards, c)
	}
	return cards
}

// diffKey names the line of calls an attempt's value is diffed along: a
// chunk's value against the same chunk's previous one (another chunk
// holds other text), every other value against the previous one of the
// job's main line (merge, repairs, agent turns, or a conversation).
func diffKey(st *docStep) string {
	if st != nil && st.Chunk != nil {
		return "chunk " + strconv.Itoa(st.Chunk.N)
	}
	return ""
}

// cardGroups are a run's cards grouped by step (stepGroups); nil when no
// card is a document step.
func cardGroups(cards []card) []stepGroup {
	if !slices.ContainsFunc(cards, func(c card) bool { return c.Doc != nil }) {
		return nil
	}
	rows := make([]stepRow, len(cards))
	for i, c := range cards {
		rows[i] = stepRow{Anchor: c.Anchor, No: c.No, Step: c.Doc, Badge: c.Badge, Class: c.Class, Valid: c.Valid,
			LatencyMS: c.LatencyMS, TokensIn: c.TokensIn, TokensOut: c.TokensOut, CostUSD: c.CostUSD, Errors: len(c.Errors), Fields: c.Fields}
		if len(c.Errors) > 0 {
			rows[i].FirstError = c.Errors[0].Message
		}
		rows[i].FirstError = cmp.Or(rows[i].FirstError, c.Doc.toolError())
	}
	return stepGroups(rows)
}

// replyValue is the JSON value the extractor finds first in a reply,
// indented: what the attempt's validation saw, before schema-guided fixes.
// "" when the reply holds none.
func replyValue(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return ""
	}
	cands, err := extract.Extract(raw)
	if err != nil || len(cands) == 0 {
		return ""
	}
	return indent(cands[0].JSON)
}

// indent is JSON text indented, or the text as it is when it is not JSON.
func indent(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// lineDiff is the unified line diff from a to b, whole (no line is cut).
func lineDiff(a, b string) []diffLine {
	if a == b {
		return nil
	}
	edits := udiff.Lines(a+"\n", b+"\n")
	u, err := udiff.ToUnifiedDiff("previous", "this", a+"\n", edits, 2)
	if err != nil {
		return []diffLine{{Kind: "hunk", Text: err.Error()}}
	}
	var out []diffLine
	for _, h := range u.Hunks {
		out = append(out, diffLine{Kind: "hunk", Text: fmt.Sprintf("@@ -%d +%d @@", h.FromLine, h.ToLine)})
		for _, l := range h.Lines {
			kind, sign := "same", " "
			switch l.Kind {
			case udiff.Delete:
				kind, sign = "del", "-"
			case udiff.Insert:
				kind, sign = "add", "+"
			}
			out = append(out, diffLine{Kind: kind, Text: sign + strings.TrimSuffix(l.Content, "\n")})
		}
	}
	return out
}

// barPart is one status's part of a progress bar: x and width in the
// bar's units (0-1000), the status as the class that colours it.
type barPart struct {
	Status string
	N      int64
	X, W   float64
}

// progressBar lays a batch's finished jobs out by status on a bar of 1000
// units (the queued ones are the bar's empty rest), so that invalid and
// failed jobs show in their colour rather than as progress.
func progressBar(b store.BatchOverview) []barPart {
	return shareBar(b.Jobs, []barPart{{Status: "valid", N: b.Valid}, {Status: "invalid", N: b.Invalid}, {Status: "failed", N: b.Failed},
		{Status: "rejected", N: b.Rejected}, {Status: "dead", N: b.Dead}, {Status: "over_budget", N: b.OverBudget},
		{Status: "cancelled", N: b.Cancelled}})
}

// shareBar lays parts out side by side on a bar of 1000 units, each as
// wide as its share of total (parts of none left out).
func shareBar(total int64, parts []barPart) []barPart {
	if total <= 0 {
		return nil
	}
	var out []barPart
	x := 0.0
	for _, p := range parts {
		if p.N <= 0 {
			continue
		}
		p.X, p.W = x, 1000*float64(p.N)/float64(total)
		x += p.W
		out = append(out, p)
	}
	return out
}

func (h *handler) funcs() template.FuncMap {
	return template.FuncMap{
		// base prefixes a path inside the dashboard with where it is mounted.
		"base": func(p string) string { return h.cfg.BasePath + p },
		"pct": func(x float64) string {
			if math.IsNaN(x) {
				return "–"
			}
			return fmt.Sprintf("%.1f%%", 100*x)
		},
		"usd": func(x float64) string {
			if x == 0 {
				return "$0"
			}
			if x < 0.01 {
				return fmt.Sprintf("$%.6f", x)
			}
			return fmt.Sprintf("$%.4f", x)
		},
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"whenShort": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return t.UTC().Format("01-02 15:04")
		},
		"ms": func(n int64) string {
			if n >= 10000 {
				return fmt.Sprintf("%.1f s", float64(n)/1000)
			}
			return fmt.Sprintf("%d ms", n)
		},
		"capUSD": func(p *float64) string {
			if p == nil {
				return "no cap"
			}
			return fmt.Sprintf("$%.4f", *p)
		},
		"capTokens": func(p *int64) string {
			if p == nil {
				return "no cap"
			}
			return fmt.Sprint(*p)
		},
		// eventName is the SSE event carrying a batch's row: batch names
		// may hold any character, event names are kept to [a-z0-9-].
		"eventName": eventName,
		"liveURL": func(names []string) string {
			return h.cfg.BasePath + "/events?" + liveQuery(names)
		},
		"add":      func(a, b int) int { return a + b },
		"sub":      func(a, b int) int { return a - b },
		"gapText":  gapText,
		"batchURL": func(name string) string { return h.cfg.BasePath + "/batches/" + url.PathEscape(name) },
		"jobURL":   func(id string) string { return h.cfg.BasePath + "/jobs/" + url.PathEscape(id) },
		"deref":    func(p *float64) float64 { return *p },
		// actionsOn says the batch actions are offered (Config.Actions).
		"actionsOn": func() bool { return h.cfg.Actions != nil },
		"has":       slices.Contains[[]string],
		"bar":       progressBar,
		// searchOf is the search form's data on a batch's page.
		"searchOf": func(batch string) searchView { return searchView{Batch: batch} },
		// shortHash is a schema's hash as the page shows it (the title
		// holds it whole).
		"shortHash": func(h string) string { return h[:min(len(h), 12)] },
		// f1 writes an SVG coordinate.
		"f1": func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) },
	}
}
