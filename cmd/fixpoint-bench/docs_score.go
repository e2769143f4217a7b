package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// docsRow is one strategy's figures.
type docsRow struct {
	Strategy string `json:"strategy"`
	// Err, when not "", says why the strategy could not run.
	Err    string `json:"error,omitempty"`
	Docs   int    `json:"docs"`
	Valid  int    `json:"valid"`
	Failed int    `json:"failed"` // runs that ended in an error (transient, bad job)
	// FirstErr is the first of those errors; FirstNotValid the first
	// final result that is not valid, with its class and error.
	FirstErr      string `json:"first_error,omitempty"`
	FirstNotValid string `json:"first_not_valid,omitempty"`
	// ValidRate is Valid over Docs.
	ValidRate float64 `json:"valid_rate"`
	// Scalars and Items are what the valid documents plant (7 and 500
	// each); ScalarsHit and ItemsHit those their values hold as the truth
	// has them.
	Scalars      int     `json:"scalars"`
	ScalarsHit   int     `json:"scalars_recalled"`
	ScalarRecall float64 `json:"scalar_recall"`
	Items        int     `json:"items"`
	ItemsHit     int     `json:"items_recalled"`
	ItemRecall   float64 `json:"item_recall"`
	// Listed counts the list items of the valid values, Duplicates those
	// whose key (name, case and repeated white space ignored, as the merge
	// compares keys) an earlier item of the same value has.
	Listed        int     `json:"items_listed"`
	Duplicates    int     `json:"duplicates"`
	DuplicateRate float64 `json:"duplicate_rate"`
	// Wrong counts the strings and numbers of valid values that differ
	// from the truth (an invented value, a wrong field of an item);
	// WrongGrounded those of them the evidence stage graded exact,
	// normalized or fuzzy: invented values accepted as grounded.
	// WrongUngraded those it did not grade (exempt: the currency, an enum).
	Wrong         int `json:"wrong_values"`
	WrongGrounded int `json:"wrong_values_grounded"`
	WrongUngraded int `json:"wrong_values_ungraded"`
	// GroundedAt lists the wrong values graded grounded: document, place,
	// value and grade.
	GroundedAt []string `json:"wrong_values_grounded_at,omitempty"`
	// SelfGraded counts the valid documents whose last attempt carried no
	// grades, graded by the bench over the document instead.
	SelfGraded int `json:"self_graded"`
	// Calls, tokens and cost are totals over every document, valid or not;
	// the per-valid figures divide them by Valid.
	Calls        int            `json:"calls"`
	TokensIn     int            `json:"tokens_in"`
	TokensOut    int            `json:"tokens_out"`
	CostUSD      float64        `json:"cost_usd"`
	CallsPerDoc  float64        `json:"calls_per_doc"`
	InPerValid   float64        `json:"tokens_in_per_valid"`
	OutPerValid  float64        `json:"tokens_out_per_valid"`
	CostPerValid float64        `json:"cost_per_valid_usd"`
	CostVsSingle float64        `json:"cost_vs_single,omitempty"`
	Wall         time.Duration  `json:"wall_ns"`
	WallText     string         `json:"wall"`
	SimCalls     int64          `json:"sim_requests"`
	Statuses     map[string]int `json:"statuses"`
	// ByLang is the recall of the valid documents of each language.
	ByLang map[string]langRecall `json:"by_lang"`
	// BySteps are the calls and tokens of every document by step kind
	// ("call" for the single call's attempts, which have none).
	BySteps map[string]*stepTotals `json:"by_step"`
}

// stepTotals are the calls and tokens of one step kind.
type stepTotals struct {
	Calls     int `json:"calls"`
	TokensIn  int `json:"tokens_in"`
	TokensOut int `json:"tokens_out"`
}

// langRecall is the recall of one language's valid documents.
type langRecall struct {
	Valid        int     `json:"valid"`
	ScalarRecall float64 `json:"scalar_recall"`
	ItemRecall   float64 `json:"item_recall"`
}

// docScore is what one valid value holds against its document's truth.
type docScore struct {
	// groundedAt are the places of the wrong values graded grounded, with
	// the value and its grade.
	groundedAt []string

	scalars, scalarsHit       int
	items, itemsHit           int
	listed, duplicates        int
	wrong, grounded, ungraded int
}

// scoreValue compares value, a valid value, with truth. grades are the
// evidence stage's grades of its leaves by JSON pointer. A scalar or an
// item is recalled only when the value holds it as the truth does: a
// wrong amount, or an item with the right name and a wrong country, is
// not. Every leaf that differs from the truth is wrong (of an item whose
// name the document does not list, the name); grounded counts those
// graded exact, normalized or fuzzy.
func scoreValue(value json.RawMessage, truth sim.DocumentTruth, grades map[string]fixpoint.Grade) (docScore, error) {
	var s docScore
	got, err := decodeNumbers(value)
	if err != nil {
		return s, err
	}
	obj, ok := got.(map[string]any)
	if !ok {
		return s, fmt.Errorf("value is not an object")
	}
	want, err := truthMap(truth)
	if err != nil {
		return s, err
	}
	wrong := func(ptr string, v any) {
		s.wrong++
		switch g, ok := grades[ptr]; {
		case !ok:
			s.ungraded++
		case g != fixpoint.GradeNone:
			s.grounded++
			s.groundedAt = append(s.groundedAt, fmt.Sprintf("%s %v (%s)", ptr, v, g))
		}
	}
	for k, w := range want {
		if k == "subsidiaries" {
			continue
		}
		s.scalars++
		v, ok := obj[k]
		switch {
		case !ok || v == nil:
		case extract.SameValue(v, w):
			s.scalarsHit++
		default:
			wrong("/"+k, v)
		}
	}
	byKey := map[string]sim.Subsidiary{}
	for _, it := range truth.Subsidiaries {
		byKey[itemKey(it.Name)] = it
	}
	s.items = len(truth.Subsidiaries)
	list, _ := obj["subsidiaries"].([]any)
	seen := map[string]bool{}
	for i, x := range list {
		s.listed++
		it, _ := x.(map[string]any)
		name, _ := it["name"].(string)
		key := itemKey(name)
		if seen[key] {
			s.duplicates++
			continue
		}
		seen[key] = true
		ptr := "/subsidiaries/" + strconv.Itoa(i)
		t, ok := byKey[key]
		if !ok {
			// An item the document does not list is wrong by its name;
			// its other fields may be a listed item's, under a wrong name.
			wrong(ptr+"/name", name)
			continue
		}
		// The name matched as a key does (case and spaces aside); the
		// other fields must be the truth's.
		hit := true
		for f, w := range map[string]any{"country": t.Country, "ownership_percent": json.Number(strconv.FormatFloat(t.OwnershipPercent, 'f', -1, 64))} {
			if v, ok := it[f]; ok && !extract.SameValue(v, w) {
				wrong(ptr+"/"+f, v)
				hit = false
			} else if !ok {
				hit = false
			}
		}
		if hit {
			s.itemsHit++
		}
	}
	return s, nil
}

// itemKey is a list item's key as the merge compares it: letter case and
// repeated white space ignored.
func itemKey(name string) string { return strings.ToLower(strings.Join(strings.Fields(name), " ")) }

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode value: %w", err)
	}
	return v, nil
}

// truthMap is truth as a decoded JSON object.
func truthMap(truth sim.DocumentTruth) (map[string]any, error) {
	b, err := json.Marshal(truth)
	if err != nil {
		return nil, err
	}
	v, err := decodeNumbers(b)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// finalGrades are the evidence grades of a valid result's value: those
// the last valid attempt carries, or, when it carries none, the bench's
// own alignment over the document (self reports which).
func finalGrades(res *fixpoint.Result, d *benchDocument, set *docsSchemaSet) (grades map[string]fixpoint.Grade, self bool, err error) {
	grades = map[string]fixpoint.Grade{}
	for i := len(res.Attempts) - 1; i >= 0; i-- {
		a := &res.Attempts[i]
		if !a.Valid {
			continue
		}
		if len(a.Evidence) > 0 && bytes.Equal(bytes.TrimSpace(a.Value), bytes.TrimSpace(res.Value)) {
			for _, g := range a.Evidence {
				grades[g.Path] = g.Grade
			}
			return grades, false, nil
		}
		break
	}
	v, err := decodeNumbers(res.Value)
	if err != nil {
		return nil, true, err
	}
	for _, g := range evidence.New(d.doc.Text).Align(v, set.exempt).Leaves {
		grades[g.Path] = g.Grade
	}
	return grades, true, nil
}

// scoreRow fills row's figures from the documents' outcomes.
func scoreRow(row *docsRow, docs []benchDocument, outs []docOutcome, set *docsSchemaSet) {
	row.Docs = len(docs)
	row.Statuses = map[string]int{}
	row.BySteps = map[string]*stepTotals{}
	var tot docScore
	byLang := map[string]*docScore{}
	validByLang := map[string]int{}
	for i, o := range outs {
		if o.res != nil {
			for _, a := range o.res.Attempts {
				addStep(row, a)
			}
			row.Calls += o.res.Calls
			row.TokensIn += o.res.TokensIn
			row.TokensOut += o.res.TokensOut
			row.CostUSD += o.res.CostUSD
		}
		if o.err != nil {
			row.Failed++
			row.Statuses["error"]++
			if row.FirstErr == "" {
				row.FirstErr = docs[i].id + ": " + oneLine(o.err)
			}
			continue
		}
		row.Statuses[string(o.res.Status)]++
		if o.res.Status != fixpoint.StatusValid {
			if row.FirstNotValid == "" {
				row.FirstNotValid = fmt.Sprintf("%s: %s (%s): %s", docs[i].id, o.res.Status, o.res.Class, oneLine(errors.New(o.res.Error)))
			}
			continue
		}
		row.Valid++
		grades, self, err := finalGrades(o.res, &docs[i], set)
		if err == nil {
			var s docScore
			if s, err = scoreValue(o.res.Value, docs[i].doc.Truth, grades); err == nil {
				for j := range s.groundedAt {
					s.groundedAt[j] = docs[i].id + " " + s.groundedAt[j]
				}
				tot.add(s)
				lang := docs[i].doc.Lang
				if byLang[lang] == nil {
					byLang[lang] = &docScore{}
				}
				byLang[lang].add(s)
				validByLang[lang]++
			}
		}
		if err != nil {
			row.Err = fmt.Sprintf("score %s: %v", docs[i].id, err)
		}
		if self {
			row.SelfGraded++
		}
	}
	row.Scalars, row.ScalarsHit, row.Items, row.ItemsHit = tot.scalars, tot.scalarsHit, tot.items, tot.itemsHit
	row.Listed, row.Duplicates = tot.listed, tot.duplicates
	row.Wrong, row.WrongGrounded, row.WrongUngraded, row.GroundedAt = tot.wrong, tot.grounded, tot.ungraded, tot.groundedAt
	row.ValidRate = ratio(row.Valid, row.Docs)
	row.ByLang = map[string]langRecall{}
	for lang, l := range byLang {
		row.ByLang[lang] = langRecall{Valid: validByLang[lang], ScalarRecall: ratio(l.scalarsHit, l.scalars), ItemRecall: ratio(l.itemsHit, l.items)}
	}
	row.ScalarRecall, row.ItemRecall = ratio(row.ScalarsHit, row.Scalars), ratio(row.ItemsHit, row.Items)
	row.DuplicateRate = ratio(row.Duplicates, row.Listed)
	row.CallsPerDoc = ratio(row.Calls, row.Docs)
	if row.Valid > 0 {
		v := float64(row.Valid)
		row.InPerValid, row.OutPerValid, row.CostPerValid = float64(row.TokensIn)/v, float64(row.TokensOut)/v, row.CostUSD/v
	}
}

func (s *docScore) add(o docScore) {
	s.scalars += o.scalars
	s.scalarsHit += o.scalarsHit
	s.items += o.items
	s.itemsHit += o.itemsHit
	s.listed += o.listed
	s.duplicates += o.duplicates
	s.wrong += o.wrong
	s.grounded += o.grounded
	s.ungraded += o.ungraded
	s.groundedAt = append(s.groundedAt, o.groundedAt...)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// relativeCost sets each row's cost per valid document against the single
// call's, when both ran.
func relativeCost(rows []docsRow) {
	var base float64
	for _, r := range rows {
		if r.Strategy == strategySingle && r.Err == "" {
			base = r.CostPerValid
		}
	}
	if base == 0 {
		return
	}
	for i := range rows {
		if rows[i].Err == "" && rows[i].Valid > 0 {
			rows[i].CostVsSingle = rows[i].CostPerValid / base
		}
	}
}

func usd(v float64) string { return fmt.Sprintf("$%.5f", v) }

// writeDocsReport prints the figures as a Markdown table with the run's
// settings above it.
func writeDocsReport(w io.Writer, r *docsReport) {
	fmt.Fprintf(w, "documents: %d of %d tokens and %d characters on average (chunk.Tokens), languages %s, written in %s\n",
		r.Docs, r.MeanTokens, r.MeanChars, strings.Join(r.Langs, ","), r.Generated)
	fmt.Fprintf(w, "simulator: %s preset; model %s at list prices; evidence %s over the document\n", r.Preset, r.Model, r.Evidence)
	fmt.Fprintf(w, "concurrency: %d documents in flight, at most %d calls in flight; chunks of %d tokens, %d of overlap, up to %d list passes a chunk\n",
		r.Concurrency, r.LaneCalls, r.ChunkTokens, r.Overlap, r.ListPasses)
	fmt.Fprintf(w, "machine: %s, load %s; %s\n", r.Machine, r.Load, r.Date)
	fmt.Fprintf(w, "command: %s\n\n", r.Command)
	fmt.Fprintln(w, "| strategy | valid | scalar recall | item recall | duplicate items | wrong values graded grounded | calls a document | tokens in / out a valid document | cost a valid document | vs single | wall |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		if row.Err != "" {
			fmt.Fprintf(w, "| %s | error: %s | | | | | | | | | |\n", row.Strategy, row.Err)
			continue
		}
		vs, toks, cost := "-", "-", "-"
		if row.CostVsSingle > 0 {
			vs = fmt.Sprintf("%.2fx", row.CostVsSingle)
		}
		if row.Valid > 0 {
			toks, cost = num(row.InPerValid)+" / "+num(row.OutPerValid), usd(row.CostPerValid)
		}
		fmt.Fprintf(w, "| %s | %s (%d of %d) | %s (%d of %d) | %s (%d of %d) | %s (%d of %d) | %d of %d | %.2f | %s | %s | %s | %s |\n",
			row.Strategy, pct(row.ValidRate), row.Valid, row.Docs,
			pct2(row.ScalarRecall), row.ScalarsHit, row.Scalars,
			pct2(row.ItemRecall), row.ItemsHit, row.Items,
			pct2(row.DuplicateRate), row.Duplicates, row.Listed,
			row.WrongGrounded, row.Wrong, row.CallsPerDoc, toks, cost, vs, row.WallText)
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		if row.Err != "" {
			continue
		}
		fmt.Fprintf(w, "%s: final statuses %s", row.Strategy, statusList(row.Statuses))
		var steps []string
		for _, k := range slices.Sorted(maps.Keys(row.BySteps)) {
			st := row.BySteps[k]
			steps = append(steps, fmt.Sprintf("%s %.2f calls, %s in / %s out", k, ratio(st.Calls, row.Docs), num(float64(st.TokensIn)/float64(row.Docs)), num(float64(st.TokensOut)/float64(row.Docs))))
		}
		fmt.Fprintf(w, "; a document's steps: %s", strings.Join(steps, ", "))
		if len(row.ByLang) > 0 {
			var parts []string
			for _, lang := range slices.Sorted(maps.Keys(row.ByLang)) {
				l := row.ByLang[lang]
				parts = append(parts, fmt.Sprintf("%s %s/%s", lang, pct(l.ScalarRecall), pct(l.ItemRecall)))
			}
			fmt.Fprintf(w, "; scalar/item recall by language %s", strings.Join(parts, ", "))
		}
		if row.Failed > 0 {
			fmt.Fprintf(w, "; %d runs ended in an error, the first %s", row.Failed, row.FirstErr)
		}
		if row.FirstNotValid != "" {
			fmt.Fprintf(w, "; the first not valid %s", row.FirstNotValid)
		}
		if row.SelfGraded > 0 {
			fmt.Fprintf(w, "; %d valid values carried no evidence grades and were graded by the bench", row.SelfGraded)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// statusList is the final statuses and their counts, most first.
func statusList(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// addStep counts attempt a under its step kind; an attempt that made no
// call (a deterministic merge) counts no call.
func addStep(row *docsRow, a fixpoint.Attempt) {
	kind := string(a.Step)
	if kind == "" {
		kind = "call"
	}
	st := row.BySteps[kind]
	if st == nil {
		st = &stepTotals{}
		row.BySteps[kind] = st
	}
	if a.RequestHash != "" || a.TokensIn > 0 {
		st.Calls++
	}
	st.TokensIn += a.TokensIn
	st.TokensOut += a.TokensOut
}
