package repair

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// The repair of a merged value is sent the chunks its errors need, not
// the document: the chunks read it already, and what a valid chunk gave
// is in the merged value. Sending the whole text would cost as much input
// as one call over the document each round, and may not fit the context
// window the chunks were cut for. The chunks it needs are
//
//   - each chunk that ended without a valid value: what it held is
//     nowhere else;
//   - for an error inside an object of the value (an object of a list
//     item, its address, that lacks its country), the chunks whose text
//     holds one of the object's strings, or when it has none, of the
//     nearest object around it that has (the item's name): a chunk's
//     value may leave out what the chunk holds, and smart validation
//     lets that through below a list item (validate.PartialItems);
//   - for an error at a property of the root, the chunks that gave a
//     value there (their conflict, an invented value); when none did (a
//     required property no chunk gave), the chunks that lost their value
//     hold it most likely, and when there are none, every chunk: the
//     document whole, the only place left to look.
//
// nameMinRunes is the shortest string that names its object: shorter
// ones ("DE", "12") are in too many chunks to tell one.
const nameMinRunes = 3

// repairParts chooses the chunks the repair of value (the merged value,
// with errs) is sent, by the rules above: their numbers, ascending, and
// whether they are every chunk.
func (m *chunked) repairParts(value any, errs []fixpoint.ValidationError) ([]int, bool) {
	need, lost := map[int]bool{}, map[int]bool{}
	for _, u := range m.readers() {
		if _, ok := m.contribution(u); !ok {
			need[u.ref.N], lost[u.ref.N] = true, true
		}
	}
	for _, e := range errs {
		toks := validate.SplitPointer(e.Path)
		if e.Keyword == KeywordMoreErrors || len(toks) == 0 {
			continue
		}
		if len(toks) == 1 {
			givers := m.givers(toks[0])
			if len(givers) == 0 && len(lost) == 0 {
				return allChunks(len(m.chunks)), true
			}
			for _, n := range givers {
				need[n] = true
			}
			continue
		}
		// The nearest object around the error that holds a name: an
		// object of an item (its address) may hold none.
		for i := len(toks) - 1; i >= 1; i-- {
			obj, _ := valueAt(value, toks[:i]).(map[string]any)
			named := false
			for _, v := range obj {
				if s, ok := v.(string); ok && utf8.RuneCountInString(s) >= nameMinRunes {
					named = true
					for _, c := range m.chunks {
						if strings.Contains(c.Text, s) {
							need[c.N] = true
						}
					}
				}
			}
			if named {
				break
			}
		}
	}
	parts := slices.Sorted(func(yield func(int) bool) {
		for n := range need {
			if !yield(n) {
				return
			}
		}
	})
	return parts, len(parts) == len(m.chunks)
}

// givers are the chunks whose contribution has the root property name.
func (m *chunked) givers(name string) []int {
	var out []int
	for _, u := range m.readers() {
		v, ok := m.contribution(u)
		if obj, isObj := v.(map[string]any); ok && isObj {
			if _, has := obj[name]; has {
				out = append(out, u.ref.N)
			}
		}
	}
	return out
}

func allChunks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// valueAt is the value at toks in v, nil when there is none.
func valueAt(v any, toks []string) any {
	for _, tok := range toks {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// partsText is the text of the chunks parts, each a paragraph apart, and
// their names ("part 2 (code points 3900 to 8104), part 5 (...)").
func (m *chunked) partsText(parts []int) (string, string) {
	texts := make([]string, len(parts))
	names := make([]string, len(parts))
	for i, n := range parts {
		c := m.chunks[n]
		texts[i] = c.Text
		names[i] = fmt.Sprintf("part %d (code points %d to %d)", c.N+1, c.Start, c.End)
	}
	return strings.Join(texts, "\n\n[...]\n\n"), strings.Join(names, ", ")
}

// contribution is what chunk unit u gives the merge: its valid value, or,
// for a parallel chunk that ended invalid, its last value with every
// place an error names left out, and then every place the chunk's checks
// (the schema it was checked against, then its evidence) name in what is
// left, until it passes them. What the model read right in a chunk is
// not lost for one wrong field; what it got wrong is not merged. false
// when u gives nothing.
func (m *chunked) contribution(u *unit) (any, bool) {
	if b, ok := u.value(); ok {
		v, err := decodeValue(b)
		return v, err == nil
	}
	if m.lim.Strategy != fixpoint.StrategyParallel {
		return nil, false
	}
	a := u.last()
	if a == nil || len(a.Value) == 0 || a.Class == fixpoint.OutcomeProvider || a.Class == fixpoint.OutcomeTruncated ||
		a.Class == fixpoint.OutcomeRefusal || a.Class == string(fixpoint.ClassSyntax) {
		return nil, false
	}
	v, err := decodeValue(a.Value)
	if err != nil {
		return nil, false
	}
	v, ok := pruned(v, a.Errors)
	if !ok {
		return nil, false
	}
	// What is left is checked again, and what those checks name goes
	// too, a few rounds: a list item whose wrong field went now lacks
	// it, which the chunk's check requires of an item
	// (validate.PartialItems), so the item goes whole; and a reply the
	// schema refused was never graded, so its evidence errors (an
	// invented date) show only now.
	for range contributionRounds {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		errs := validate.Check(m.check, string(b)).Errors
		if len(errs) == 0 {
			if errs = u.step.job.Checks().Check(v).Errors; len(errs) == 0 {
				return v, true
			}
		}
		if v, ok = pruned(v, errs); !ok {
			return nil, false
		}
	}
	return nil, false
}

// contributionRounds is how many times what is left of an invalid
// chunk's value is checked and pruned again before it is given up: the
// schema, then the evidence, then the schema again (an item whose name
// was ungrounded lacks it), and once more to see it pass.
const contributionRounds = 4

// pruned is v without the places errs name, without an item of a list
// left empty by that, and without an item of a list that lacks a
// required property (an error of keyword "required" names the missing
// property's place in the item). The places go last first (in document
// order, reversed: an item's fields before the item, later items before
// earlier ones), so that no removal moves a place still to be removed;
// a place inside an item already gone is skipped. false when an error
// names the root, or one past the kept errors (KeywordMoreErrors) leaves
// places unnamed.
func pruned(v any, errs []fixpoint.ValidationError) (any, bool) {
	type place struct {
		toks     []string
		required bool
	}
	var places []place
	for _, e := range errs {
		if e.Path == "" || e.Keyword == KeywordMoreErrors {
			return nil, false
		}
		places = append(places, place{validate.SplitPointer(e.Path), e.Keyword == "required"})
	}
	slices.SortFunc(places, func(a, b place) int { return comparePaths(b.toks, a.toks) })
	var gone [][]string // the items deleted, each a place
	inGone := func(p []string) bool {
		for _, g := range gone {
			if len(p) >= len(g) && slices.Equal(p[:len(g)], g) {
				return true
			}
		}
		return false
	}
	dropItem := func(p []string) {
		v = deleteItem(v, p)
		gone = append(gone, p)
	}
	for _, pl := range places {
		p := pl.toks
		if inGone(p) {
			continue
		}
		switch x := valueAt(v, p[:len(p)-1]).(type) {
		case map[string]any:
			inList := false
			if len(p) >= 2 {
				_, inList = valueAt(v, p[:len(p)-2]).([]any)
			}
			if pl.required {
				if inList {
					dropItem(p[:len(p)-1])
				}
				continue
			}
			if _, ok := x[p[len(p)-1]]; !ok {
				continue
			}
			v = setAt(v, p, nil, true)
			if len(x) == 1 && inList {
				// The object held the place alone: an empty item
				// of a list names nothing, and goes too.
				dropItem(p[:len(p)-1])
			}
		case []any:
			dropItem(p)
		}
	}
	return v, true
}

// deleteItem is v without the list item at p, if there is one.
func deleteItem(v any, p []string) any {
	x, ok := valueAt(v, p[:len(p)-1]).([]any)
	i, err := strconv.Atoi(p[len(p)-1])
	if !ok || err != nil || i < 0 || i >= len(x) {
		return v
	}
	return setAt(v, p[:len(p)-1], slices.Delete(slices.Clone(x), i, i+1), false)
}

// comparePaths orders JSON pointer tokens in document order: token by
// token, indices as numbers, a place before those inside it.
func comparePaths(a, b []string) int {
	for i := range min(len(a), len(b)) {
		ia, ea := strconv.Atoi(a[i])
		ib, eb := strconv.Atoi(b[i])
		if ea == nil && eb == nil {
			if ia != ib {
				return ia - ib
			}
			continue
		}
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}
