package web

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/fixpoint-dev/fixpoint/store"
)

// searchView is the search page: an exact job id or batch name goes to
// its page; other text is searched for in one batch's jobs (SearchJobs),
// a window at a time.
type searchView struct {
	Title string
	// Query is the text searched for; Batch the batch searched, "" for the
	// header's search of every batch (ids and names only).
	Query, Batch string
	// Jobs are a batch's matches (the job list's part, paged by window).
	Jobs jobsView
	// Batches are, for a search of no batch, those whose name holds the
	// text (of the latest batchesLimit).
	Batches []store.BatchOverview
	// Window is how many jobs one step reads.
	Window int
}

// search serves /search?q=TEXT[&batch=NAME][&after=CURSOR].
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := searchView{Title: "Search", Query: strings.TrimSpace(q.Get("q")), Batch: q.Get("batch"), Window: store.SearchWindow}
	if v.Query == "" {
		h.render(w, r, http.StatusOK, "search", "layout.html", v)
		return
	}
	if len(v.Query) > store.SearchTextMax {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("%w: search for at most %d bytes of text", store.ErrInvalid, store.SearchTextMax))
		return
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	after := q.Get("after")
	if after == "" {
		// An exact job id opens the job, wherever it is (its primary key).
		if _, err := h.st.JobBatch(ctx, v.Query); err == nil {
			http.Redirect(w, r, h.cfg.BasePath+"/jobs/"+url.PathEscape(v.Query), http.StatusSeeOther)
			return
		} else if !errors.Is(err, store.ErrNotFound) {
			h.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
	}
	if v.Batch == "" {
		h.searchBatches(w, r, v)
		return
	}
	if _, err := h.st.Overview(ctx, v.Batch); err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	res, err := h.st.SearchJobs(ctx, v.Batch, v.Query, after)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	v.Title = "Search " + v.Batch
	v.Jobs = jobsView{Batch: v.Batch, Jobs: res.Jobs, Search: true, Note: searchNote(res)}
	if h.cfg.Actions != nil {
		v.Jobs.CSRF = h.csrfToken(h.csrfSession(w, r))
	}
	if res.Next != "" {
		v.Jobs.Next = template.URL(h.cfg.BasePath + "/search?" + url.Values{"batch": {v.Batch}, "q": {v.Query}, "after": {res.Next}}.Encode())
	}
	if r.Header.Get("HX-Request") == "true" {
		h.render(w, r, http.StatusOK, "search", "jobs", v.Jobs)
		return
	}
	h.render(w, r, http.StatusOK, "search", "layout.html", v)
}

// searchBatches answers a search of no batch that is no job id: an exact
// batch name opens the batch, else the batches whose name holds the text.
func (h *handler) searchBatches(w http.ResponseWriter, r *http.Request, v searchView) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	bs, err := h.st.Overviews(ctx, nil, batchesLimit)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	text := strings.ToLower(v.Query)
	for _, b := range bs {
		if b.Name == v.Query {
			http.Redirect(w, r, h.cfg.BasePath+"/batches/"+url.PathEscape(b.Name), http.StatusSeeOther)
			return
		}
		if strings.Contains(strings.ToLower(b.Name), text) {
			v.Batches = append(v.Batches, b)
		}
	}
	h.render(w, r, http.StatusOK, "search", "layout.html", v)
}

// searchNote says what a search step read and found.
func searchNote(res store.JobSearch) string {
	if res.FromRow == 0 && res.ToRow == 0 {
		return "No job left to search."
	}
	n := len(res.Jobs)
	s := fmt.Sprintf("Searched the jobs of rows %d to %d: %d match%s", res.FromRow, res.ToRow, n, map[bool]string{true: "", false: "es"}[n == 1])
	if res.Next == "" {
		return s + "; that is the end of the batch."
	}
	return s + "; the batch goes on."
}
