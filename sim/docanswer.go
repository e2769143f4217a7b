package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// isDocument reports whether a request with this schema is answered as a
// request over a long document: its root declares every property of
// DocumentSchema. The test is by name, so it survives the rewrites a
// provider's strict mode makes (every property required, fixpoint's own
// keywords left out).
func (d *schemaDoc) isDocument() bool {
	m, ok := d.root.(map[string]any)
	if !ok {
		return false
	}
	props, _ := m["properties"].(map[string]any)
	for _, k := range docScalars {
		if _, ok := props[k]; !ok {
			return false
		}
	}
	_, ok = props[docList]
	return ok
}

// docTask is the task key of a request over a document: the request's
// task key (the job's id, usually) and a hash of its text, so that each
// chunk of one job draws its faults apart, and the same chunk the same
// ones on every turn.
func docTask(task, text string) string {
	return task + "#" + strconv.FormatUint(hashStrings(text), 36)
}

// docField is the document field a pointer names ("/governing_law"), ""
// for another place.
func docField(ptr string) string {
	if len(ptr) > 1 && slices.Contains(docScalars, ptr[1:]) {
		return ptr[1:]
	}
	return ""
}

// absent reports whether f is a field of the task's document schema that
// its text does not hold and evidence checks (the currency, an enum, is
// exempt: an invention there is not one evidence can catch).
func (t *task) absent(f string) bool {
	if f == "" || !t.doc.isDocument() || t.doc.checks().exempt("/"+f) {
		return false
	}
	m, ok := t.truth.(map[string]any)
	if !ok {
		return false
	}
	_, held := m[f]
	return !held
}

// absentAt is the value the simulator invents for document field f when
// the task's text does not hold it (and, fault invented, in place of the
// value it holds): a function of the task and the field,
// in the text's language, never a value a document holds (names and
// jurisdictions of lists of their own, a date in 2019 to 2021, a notice
// period of 150 days or more, an amount with cents).
func (t *task) absentAt(f string) any {
	l := detectDocLang(t.text)
	r := t.s.rng("absent", t.key, t.doc.src, f)
	switch f {
	case docProvider, docCustomer:
		return l.inventedNames[r.IntN(len(l.inventedNames))]
	case docDate:
		return time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(3*365)).Format(time.DateOnly)
	case docLaw:
		return l.inventedLaws[r.IntN(len(l.inventedLaws))]
	case docNotice:
		return json.Number(strconv.Itoa([]int{150, 210, 270, 365}[r.IntN(4)]))
	case docAmount:
		return json.Number(fmt.Sprintf("%d.%02d", 10_000+r.IntN(90_000_000), 1+r.IntN(99)))
	}
	return nil
}

// injectAbsent draws, from a seed stream of its own, each absent field of
// a first attempt over a document (Mix.InventedAbsent) and writes the
// invention into value.
func (t *task) injectAbsent(value any, key string) {
	p := t.s.cfg.Mix.InventedAbsent
	obj, ok := value.(map[string]any)
	if p == 0 || !ok || !t.doc.isDocument() {
		return
	}
	r := t.s.rng("absentfault", key, t.doc.src)
	for _, f := range docScalars {
		u := r.Float64()
		if _, taken := obj[f]; u < p && !taken && t.absent(f) {
			obj[f] = t.absentAt(f)
		}
	}
}

// absentFaults finds the invented_absent faults of value: each absent
// document field that holds the simulator's invention.
func (t *task) absentFaults(value any) []ContentFault {
	obj, ok := value.(map[string]any)
	if !ok || !t.doc.isDocument() {
		return nil
	}
	var out []ContentFault
	for _, f := range docScalars {
		if v, ok := obj[f]; ok && t.absent(f) && jsonEqual(v, t.absentAt(f)) {
			out = append(out, ContentFault{Kind: FaultInventedAbsent, Pointer: "/" + f})
		}
	}
	return out
}

// fill is what a model told that a document field is missing writes
// when the task's text does not hold it: the simulator's invention.
func (t *task) fill(f ContentFault) (any, bool) {
	name := docField(f.Pointer)
	if f.Kind != FaultMissingRequired || !t.absent(name) {
		return nil, false
	}
	return t.absentAt(name), true
}

// cutValueSoFar takes the value so far out of the text of a sequential
// request over a document (between fixpoint.ValueSoFarOpen and
// ValueSoFarClose): the text left is what the request's chunk and task
// say, and the value is what the reply is to extend; nil when the text
// has none, or none that decodes.
func cutValueSoFar(text string) (string, any) {
	i := strings.Index(text, fixpoint.ValueSoFarOpen)
	if i < 0 {
		return text, nil
	}
	j := strings.Index(text[i:], fixpoint.ValueSoFarClose)
	if j < 0 {
		return text, nil
	}
	v := decodeNumbers([]byte(text[i+len(fixpoint.ValueSoFarOpen) : i+j]))
	return text[:i] + text[i+j+len(fixpoint.ValueSoFarClose):], v
}

// extend makes the truth of a sequential request over a document the
// value so far extended from its chunk, as a model asked to return the
// whole value writes it: the fields the value so far has, each replaced
// by the chunk's where the chunk states it (the request asks to correct
// the value from this part), and the value so far's subsidiaries followed
// by the chunk's whose name it does not list yet. The value so far is
// copied as given, errors and all: the model cannot tell them from the
// document's values unless its chunk states the field. The chunk's own
// items are already cut to Config.MaxListItems (a call extracts its first
// few tens of a long list from a text); the items copied from the value
// so far are not, since copying a list given as JSON is not extracting
// it. The faults of the reply are then drawn on that truth as on any.
func (t *task) extend(soFar any) {
	prev, ok := soFar.(map[string]any)
	read, _ := t.truth.(map[string]any)
	if !ok || read == nil || !t.doc.isDocument() {
		return
	}
	out := deepCopy(prev).(map[string]any)
	for k, v := range read {
		if k != docList {
			out[k] = v
		}
	}
	items, _ := out[docList].([]any)
	seen := map[string]bool{}
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if name, ok := m["name"].(string); ok {
				seen[foldName(name)] = true
			}
		}
	}
	add, _ := read[docList].([]any)
	for _, it := range add {
		name, _ := it.(map[string]any)["name"].(string)
		if !seen[foldName(name)] {
			seen[foldName(name)] = true
			items = append(items, it)
		}
	}
	if len(items) > 0 {
		out[docList] = items
	}
	t.truth = out
}

// foldName is a subsidiary's name as the merge's key compares it: case
// folded, white space collapsed.
func foldName(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// alignItems makes the truth of a correction over a document list its
// subsidiaries in the order of value's, each matched by its name (case
// folded) or, when the value's item has no name, by its country and
// ownership percent (an item named otherwise than the text names any is
// from another part of the document); an item of value that matches none
// stands against an empty object, and the truth's items no item of value
// matched follow. A model correcting "/subsidiaries/189/country" looks
// the 190th item of its value up in the text by what the item says, not
// at the 190th line of the text: the value may come from chunks merged
// (its order is not the text's) and the text may be a few chunks only.
// Every item the text lists can be looked up, not only the first
// Config.MaxListItems: the cut is of a list written out, not of a lookup.
func (t *task) alignItems(value any) {
	vm, ok := value.(map[string]any)
	tm, ok2 := t.truth.(map[string]any)
	if !ok || !ok2 || !t.doc.isDocument() {
		return
	}
	vl, _ := vm[docList].([]any)
	if len(vl) == 0 {
		return
	}
	truthList, _ := tm[docList].([]any)
	cands := slices.Clone(truthList)
	named := map[string]bool{}
	for _, c := range cands {
		named[foldName(itemString(c, "name"))] = true
	}
	full, _ := readDocument(t.text).value(0)[docList].([]any)
	for _, c := range full {
		if !named[foldName(itemString(c, "name"))] {
			cands = append(cands, c)
		}
	}
	used := make([]bool, len(cands))
	aligned := make([]any, len(vl))
	// Names first: an item without one takes the first item its country
	// and percent fit among those no name took.
	for _, byName := range []bool{true, false} {
		for i, it := range vl {
			if aligned[i] != nil || (itemString(it, "name") == "") == byName {
				continue
			}
			if j := matchItem(it, cands, used); j >= 0 {
				aligned[i], used[j] = cands[j], true
			}
		}
	}
	for i := range aligned {
		if aligned[i] == nil {
			aligned[i] = map[string]any{}
		}
	}
	for j := range truthList {
		if !used[j] {
			aligned = append(aligned, truthList[j])
		}
	}
	tm[docList] = aligned
}

// matchItem is the first candidate not used that item names, by its
// name when it has one, else by its country and percent; -1 for none.
func matchItem(item any, cands []any, used []bool) int {
	if name := foldName(itemString(item, "name")); name != "" {
		for j, c := range cands {
			if !used[j] && foldName(itemString(c, "name")) == name {
				return j
			}
		}
		return -1
	}
	country := foldName(itemString(item, "country"))
	pct, hasPct := item.(map[string]any)["ownership_percent"]
	if country == "" || !hasPct {
		return -1
	}
	for j, c := range cands {
		if !used[j] && foldName(itemString(c, "country")) == country && jsonEqual(c.(map[string]any)["ownership_percent"], pct) {
			return j
		}
	}
	return -1
}

// itemString is the string field f of a list item, "" when it has none.
func itemString(item any, f string) string {
	m, _ := item.(map[string]any)
	s, _ := m[f].(string)
	return s
}
