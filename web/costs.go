package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// costRange is a range the costs page offers: n steps of step, to now.
type costRange struct {
	Name, Label, Step string
	N                 int
}

var costRanges = []costRange{
	{"24h", "last 24 hours, by hour", store.CostStepHour, 24},
	{"7d", "last 7 days, by hour", store.CostStepHour, 7 * 24},
	{"30d", "last 30 days, by day", store.CostStepDay, 30},
	{"90d", "last 90 days, by day", store.CostStepDay, 90},
}

// costsTop is how many batches the costs page names; the others are
// summed as one.
const costsTop = 8

// costsOverTimeView is the costs page: what the calls of every batch cost over
// time, stacked by batch.
type costsOverTimeView struct {
	Title    string
	Range    costRange
	Ranges   []costRange
	From, To time.Time
	// Batches are the costliest batches of the range with their totals
	// (the others summed in Other), Total the range's.
	Batches []costTotal
	Other   costTotal
	Total   costTotal
	// Chart is the JSON the page's script plots.
	Chart string
}

// costTotal is a batch's calls in the range.
type costTotal struct {
	Batch         string
	CostUSD       float64
	Calls, Tokens int64
	// Share is CostUSD over the range's total.
	Share float64
}

// costsPage serves /costs?range=24h|7d|30d|90d (default 30d).
func (h *handler) costsPage(w http.ResponseWriter, r *http.Request) {
	name := cmp.Or(r.URL.Query().Get("range"), "30d")
	i := slices.IndexFunc(costRanges, func(c costRange) bool { return c.Name == name })
	if i < 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: range %q is none of 24h, 7d, 30d, 90d", store.ErrInvalid, name))
		return
	}
	v := costsOverTimeView{Title: "Costs", Range: costRanges[i], Ranges: costRanges}
	width := map[string]time.Duration{store.CostStepHour: time.Hour, store.CostStepDay: 24 * time.Hour}[v.Range.Step]
	v.To = time.Now().UTC().Truncate(width).Add(width) // the step under way included
	v.From = v.To.Add(-time.Duration(v.Range.N) * width)
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	points, err := h.st.CostsOverTime(ctx, v.From, v.To, v.Range.Step)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	v.Batches, v.Other, v.Total = costTotals(points)
	v.Chart = costsChart(points, v.Batches, v.Other.Calls > 0, v.From, width, v.Range.N)
	h.render(w, r, http.StatusOK, "costs", "layout.html", v)
}

// costTotals sums the points by batch: the costsTop costliest, the others
// together, and the whole.
func costTotals(points []store.CostPoint) (top []costTotal, other, total costTotal) {
	by := map[string]*costTotal{}
	for _, p := range points {
		t := by[p.Batch]
		if t == nil {
			t = &costTotal{Batch: p.Batch}
			by[p.Batch] = t
		}
		t.CostUSD, t.Calls, t.Tokens = t.CostUSD+p.CostUSD, t.Calls+p.Calls, t.Tokens+p.Tokens
		total.CostUSD, total.Calls, total.Tokens = total.CostUSD+p.CostUSD, total.Calls+p.Calls, total.Tokens+p.Tokens
	}
	all := make([]costTotal, 0, len(by))
	for _, t := range by {
		all = append(all, *t)
	}
	slices.SortFunc(all, func(a, b costTotal) int {
		return cmp.Or(cmp.Compare(b.CostUSD, a.CostUSD), cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Batch, b.Batch))
	})
	share := func(t *costTotal) {
		if total.CostUSD > 0 {
			t.Share = t.CostUSD / total.CostUSD
		}
	}
	for i := range all {
		share(&all[i])
		if i < costsTop {
			top = append(top, all[i])
			continue
		}
		other.CostUSD, other.Calls, other.Tokens = other.CostUSD+all[i].CostUSD, other.Calls+all[i].Calls, other.Tokens+all[i].Tokens
	}
	share(&other)
	return top, other, total
}

// costsChart is the plot's data: a time per step (unix seconds, every step
// of the range, those without a call at 0), and per series (the top
// batches, then, withOther, the others summed) its own cost and the sum of
// it and the series before it, which the script stacks.
func costsChart(points []store.CostPoint, top []costTotal, withOther bool, from time.Time, width time.Duration, n int) string {
	c := struct {
		T      []int64     `json:"t"`
		Labels []string    `json:"labels"`
		Own    [][]float64 `json:"own"`
		Sum    [][]float64 `json:"sum"`
	}{}
	series := map[string]int{}
	for i, t := range top {
		series[t.Batch] = i
		c.Labels = append(c.Labels, cmp.Or(t.Batch, "(no batch)"))
	}
	other := len(top)
	if withOther {
		c.Labels = append(c.Labels, "other batches")
	}
	c.Own = make([][]float64, len(c.Labels))
	for i := range c.Own {
		c.Own[i] = make([]float64, n)
	}
	for i := range n {
		c.T = append(c.T, from.Add(time.Duration(i)*width).Unix())
	}
	for _, p := range points {
		i := int(p.At.Sub(from) / width)
		if i < 0 || i >= n {
			continue
		}
		s, ok := series[p.Batch]
		if !ok && !withOther {
			continue
		}
		if !ok {
			s = other
		}
		c.Own[s][i] += p.CostUSD
	}
	c.Sum = make([][]float64, len(c.Own))
	for s := range c.Own {
		c.Sum[s] = slices.Clone(c.Own[s])
		if s > 0 {
			for i := range c.Sum[s] {
				c.Sum[s][i] += c.Sum[s-1][i]
			}
		}
	}
	b, _ := json.Marshal(c)
	return string(b)
}
