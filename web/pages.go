package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/store"
)

// batchesLimit is how many batches the batch list shows, newest first.
const batchesLimit = 200

// batchesView is the batch list.
type batchesView struct {
	Title   string
	Batches []store.BatchOverview
	// Live are the running batches, whose rows the page streams.
	Live []string
}

func (h *handler) batchesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	bs, err := h.st.Overviews(ctx, nil, batchesLimit)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	v := batchesView{Title: "Batches", Batches: bs}
	for _, b := range bs {
		if b.Running() {
			v.Live = append(v.Live, b.Name)
		}
	}
	h.render(w, r, http.StatusOK, "batches", "layout.html", v)
}

// batchView is a batch's page.
type batchView struct {
	Title  string
	Batch  store.BatchOverview
	Funnel funnelView
	Jobs   jobsView
}

// funnelView is the funnel with its chart's data.
type funnelView struct {
	store.Funnel
	// Chart is the JSON the page's script plots: attempt labels and counts.
	Chart string
}

// jobsView is a page of a batch's job list and its filter.
type jobsView struct {
	Batch  string
	Filter store.JobFilter
	Jobs   []store.JobRow
	// Next is the URL of the next page, "" on the last; CSV and JSONL
	// those of the exports of the whole filtered list. Built here from
	// escaped parts (template.URL is not escaped again).
	Next, CSV, JSONL template.URL
	// Statuses and Classes are the filter's choices.
	Statuses, Classes []string
	// CSRF, with the actions on, is the token of the selection's form
	// (requeue or cancel the ticked jobs); "" offers none.
	CSRF string
	// Search says the list is a search's matches (no export, each job's
	// matched fields shown, Next searching on); Note what the step read.
	Search bool
	Note   string
}

var (
	statusChoices = []string{"queued", "valid", "invalid", "failed", "rejected", "dead", "cancelled", "over_budget"}
	classChoices  = []string{"syntax", "shape", "semantic", "truncated", "refusal", "provider"}
)

// clustersLimit is how many failure clusters a batch page shows.
const clustersLimit = 30

// The failure clusters and the costs read every attempt of the batch: the
// batch page loads them after it is shown (htmx, on load), each with its
// own deadline, so that the progress and the job list do not wait for
// them.

// clustersView is the failure clusters part.
type clustersView struct {
	Batch    string
	Clusters []store.Cluster
}

func (h *handler) clustersPart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	cs, err := h.st.FailureClusters(ctx, name, clustersLimit)
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "clusters", clustersView{Batch: name, Clusters: cs})
}

func (h *handler) repairsPart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	steps, err := h.st.RepairSteps(ctx, r.PathValue("name"))
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "repairs", steps)
}

// truthLimit is how many rule failures, and how many fields, a batch page
// shows (the most frequent failures, the least grounded fields).
const truthLimit = 30

// rulesView is the rule failures part.
type rulesView struct {
	Batch string
	Rules []store.RuleFailure
}

// The rule failures and the grounding read the batch's attempts (the
// ledger's views, not rollups): loaded after the page, as the clusters.
func (h *handler) rulesPart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	rf, err := h.st.RuleFailures(ctx, name, truthLimit)
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "rules", rulesView{Batch: name, Rules: rf})
}

// groundingRow is a field's grades with the bar that draws their shares.
type groundingRow struct {
	store.FieldGrounding
	Bar []barPart
}

func (h *handler) groundingPart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	fields, err := h.st.Grounding(ctx, r.PathValue("name"), truthLimit)
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	rows := make([]groundingRow, len(fields))
	for i, f := range fields {
		rows[i] = groundingRow{FieldGrounding: f, Bar: shareBar(f.Leaves, []barPart{{Status: "exact", N: f.Exact},
			{Status: "normalized", N: f.Normalized}, {Status: "fuzzy", N: f.Fuzzy}, {Status: "none", N: f.None}})}
	}
	h.render(w, r, http.StatusOK, "batch", "grounding", struct{ Fields []groundingRow }{rows})
}

// costsView is the cost part.
type costsView struct {
	Costs []store.ModelCost
}

func (h *handler) costsPart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	cs, err := h.st.ModelCosts(ctx, r.PathValue("name"))
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "costs", costsView{Costs: cs})
}

func (h *handler) batchPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	b, err := h.st.Overview(ctx, name)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	v := batchView{Title: "Batch " + name, Batch: b}
	fn, err := h.st.BatchFunnel(ctx, name)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	v.Funnel = funnelView{Funnel: fn, Chart: funnelChart(fn)}
	if v.Jobs, err = h.jobs(w, r, name, f); err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "layout.html", v)
}

// jobsPart is the job list alone (what the filter form's htmx request
// swaps in), or the whole batch page for a request that is not htmx's (a
// reload of the URL the form pushed).
func (h *handler) jobsPart(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("HX-Request") != "true" {
		h.batchPage(w, r)
		return
	}
	name := r.PathValue("name")
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	v, err := h.jobs(w, r, name, f)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	h.render(w, r, http.StatusOK, "batch", "jobs", v)
}

func (h *handler) jobs(w http.ResponseWriter, r *http.Request, name string, f store.JobFilter) (jobsView, error) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	rows, next, err := h.st.JobPage(ctx, name, f)
	if err != nil {
		return jobsView{}, err
	}
	v := jobsView{Batch: name, Filter: f, Jobs: rows, Statuses: statusChoices, Classes: classChoices}
	if h.cfg.Actions != nil {
		v.CSRF = h.csrfToken(h.csrfSession(w, r))
	}
	q := filterQuery(f)
	base := h.cfg.BasePath + "/batches/" + url.PathEscape(name) + "/jobs"
	v.CSV = template.URL(base + ".csv?" + q.Encode())
	v.JSONL = template.URL(base + ".jsonl?" + q.Encode())
	if next != "" {
		q.Set("after", next)
		v.Next = template.URL(base + "?" + q.Encode())
	}
	return v, nil
}

// parseFilter reads a job filter from a query string: status, class,
// path, attempts, coerced, patched, after and limit.
func parseFilter(q url.Values) (store.JobFilter, error) {
	f := store.JobFilter{Status: q.Get("status"), Class: q.Get("class"), ErrorPath: q.Get("path"), After: q.Get("after")}
	for _, p := range []struct {
		name string
		to   *bool
	}{{"coerced", &f.Coerced}, {"patched", &f.Patched}} {
		switch s := strings.TrimSpace(q.Get(p.name)); s {
		case "", "0", "false":
		case "1", "true", "on":
			*p.to = true
		default:
			return f, fmt.Errorf("%w: %s %q is not 1 or 0", store.ErrInvalid, p.name, s)
		}
	}
	for _, p := range []struct {
		name string
		to   *int
	}{{"attempts", &f.Attempts}, {"limit", &f.Limit}} {
		s := strings.TrimSpace(q.Get(p.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return f, fmt.Errorf("%w: %s %q is not a whole number >= 0", store.ErrInvalid, p.name, s)
		}
		*p.to = n
	}
	return f, f.Check()
}

// filterQuery is f as a query string, without its cursor.
func filterQuery(f store.JobFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "class": f.Class, "path": f.ErrorPath} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Attempts > 0 {
		q.Set("attempts", strconv.Itoa(f.Attempts))
	}
	if f.Coerced {
		q.Set("coerced", "1")
	}
	if f.Patched {
		q.Set("patched", "1")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// funnelChart is the funnel as the chart script reads it: an x label per
// bar (attempt 1, 2, ..., never) and the valid counts, local repairs apart.
func funnelChart(f store.Funnel) string {
	c := struct {
		Labels []string `json:"labels"`
		Model  []int64  `json:"model"`
		Local  []int64  `json:"local"`
		Never  int64    `json:"never"`
	}{Never: f.Never}
	for i, n := range f.ValidAt {
		c.Labels = append(c.Labels, strconv.Itoa(i+1))
		c.Model = append(c.Model, n-f.LocalAt[i])
		c.Local = append(c.Local, f.LocalAt[i])
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func (h *handler) jobPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	d, err := h.st.JobDetail(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	var doc jobDocument
	if hash := d.Job.DocumentHash; hash != "" {
		doc.Text, doc.Err = h.st.Document(ctx, hash)
		doc.Full = r.URL.Query().Get("document") == "full"
	}
	h.render(w, r, http.StatusOK, "job", "layout.html", newJobView(d, doc))
}
