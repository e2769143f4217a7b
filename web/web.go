// Package web is a dashboard over the ledger: the batches with their live
// progress, a batch's funnel, failure clusters, rule failures, grounding
// by field, costs and jobs, a job's attempts as cards (a requeued job's
// runs compared) and its source text with where each value was found, a
// search by job id or text, and what every batch cost over time; with
// Config.Actions, a
// batch's actions (requeue, cancel, cap) and the requeue or cancel of one
// job or a selection, as CSRF-checked POSTs. It reads through package store only and
// serves everything it needs from the binary (templates, styles, and the
// vendored htmx, its SSE extension and uPlot under static/): a page makes
// no request off its host.
//
// NewHandler returns an http.Handler to serve (report serve does) or to
// mount in another server:
//
//	mux.Handle("/fixpoint/", http.StripPrefix("/fixpoint", web.NewHandler(st, web.Config{BasePath: "/fixpoint"})))
//
// Model replies and input rows are untrusted: templates escape everything
// (html/template), and every response carries a Content-Security-Policy
// that allows scripts and styles from the handler itself only.
package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Config.
const (
	QueryTimeoutDefault  = 5 * time.Second
	ExportTimeoutDefault = 10 * time.Minute
	PollIntervalDefault  = 500 * time.Millisecond
	MaxStreamsDefault    = 32
	ClientStreamsDefault = 8
	StreamMaxAgeDefault  = 10 * time.Minute
)

// Config tunes the handler. The zero value means every default.
type Config struct {
	// BasePath is the path the handler is mounted under (e.g. "/fixpoint",
	// with http.StripPrefix): links in the pages start with it. Default "".
	BasePath string
	// QueryTimeout bounds the ledger queries of one page: a slow or down
	// ledger gives an error page after it. Default 5 s.
	QueryTimeout time.Duration
	// ExportTimeout bounds a CSV or JSONL export. Default 10 minutes.
	ExportTimeout time.Duration
	// PollInterval is how often a live-progress stream reads the ledger
	// (one read of the batches' rollups). Default 500 ms: a job finished
	// shows within about that.
	PollInterval time.Duration
	// MaxStreams bounds the live-progress streams open at once (each polls
	// the ledger); one more is refused with 503. Default 32.
	MaxStreams int
	// ClientStreams bounds the streams one client (one remote IP address,
	// one /64 for IPv6) holds open at once; one more is refused with 429,
	// so that one client cannot take every place. Behind a reverse proxy
	// every client is the proxy's address: raise it to MaxStreams there.
	// Default 8.
	ClientStreams int
	// StreamMaxAge ends a stream after this long (the browser reconnects),
	// so that none holds a connection forever. Default 10 minutes.
	StreamMaxAge time.Duration
	// Logger logs failed requests. Default slog.Default().
	Logger *slog.Logger
	// Actions, when set, are offered on each batch's page: requeue, cancel,
	// cap (see Actions). Nil: the dashboard is read-only and refuses them.
	Actions Actions
	// Try runs the Try playground's jobs (report serve gives one over the
	// provider clients and the simulator: package web/playground); nil,
	// the page says the playground is not enabled. TryTimeout bounds one
	// try. Default 2 minutes.
	Try        Trier
	TryTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.BasePath = strings.TrimSuffix(c.BasePath, "/")
	c.QueryTimeout = cmp.Or(c.QueryTimeout, QueryTimeoutDefault)
	c.ExportTimeout = cmp.Or(c.ExportTimeout, ExportTimeoutDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.MaxStreams = cmp.Or(c.MaxStreams, MaxStreamsDefault)
	c.ClientStreams = min(cmp.Or(c.ClientStreams, ClientStreamsDefault), c.MaxStreams)
	c.StreamMaxAge = cmp.Or(c.StreamMaxAge, StreamMaxAgeDefault)
	c.TryTimeout = cmp.Or(c.TryTimeout, TryTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ContentSecurityPolicy is the policy every response carries: scripts,
// styles, images and connections from the handler's own origin only, no
// inline script or style, no plugin, no framing, forms posting to itself.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Ledger is what the dashboard reads of the ledger. *store.Store
// satisfies it; the actions reach the ledger through Config.Actions.
type Ledger interface {
	Overviews(ctx context.Context, names []string, limit int) ([]store.BatchOverview, error)
	Overview(ctx context.Context, name string) (store.BatchOverview, error)
	BatchFunnel(ctx context.Context, batch string) (store.Funnel, error)
	ModelCosts(ctx context.Context, batch string) ([]store.ModelCost, error)
	RepairSteps(ctx context.Context, batch string) ([]store.RepairStep, error)
	FailureClusters(ctx context.Context, batch string, limit int) ([]store.Cluster, error)
	RuleFailures(ctx context.Context, batch string, limit int) ([]store.RuleFailure, error)
	Grounding(ctx context.Context, batch string, limit int) ([]store.FieldGrounding, error)
	BatchTimeline(ctx context.Context, batch string) (store.Timeline, error)
	CostsOverTime(ctx context.Context, from, to time.Time, step string) ([]store.CostPoint, error)
	JobPage(ctx context.Context, batch string, f store.JobFilter) ([]store.JobRow, string, error)
	JobList(ctx context.Context, batch string, f store.JobFilter, fn func(store.JobRow) error) error
	JobDetail(ctx context.Context, id string) (store.JobDetail, error)
	// Document is the text of a document job's document (by its hash).
	Document(ctx context.Context, hash string) (string, error)
	Job(ctx context.Context, id string) (*store.JobRecord, []store.Attempt, error)
	JobBatch(ctx context.Context, id string) (string, error)
	SearchJobs(ctx context.Context, batch, text, after string) (store.JobSearch, error)
}

var _ Ledger = (*store.Store)(nil)

type handler struct {
	st      Ledger
	cfg     Config
	pages   map[string]*template.Template
	mux     *http.ServeMux
	streams chan struct{}
	clients *clientStreams
	// csrfKey signs the actions' CSRF tokens; origins refuses requests
	// from another site.
	csrfKey []byte
	origins *http.CrossOriginProtection
	try     *tryState
}

// NewHandler returns the dashboard over st. It panics if its embedded
// templates do not parse (a build defect, caught by the package's tests).
func NewHandler(st Ledger, cfg Config) http.Handler {
	h := &handler{st: st, cfg: cfg.withDefaults(), csrfKey: newCSRFKey(), origins: http.NewCrossOriginProtection()}
	h.try = newTryState(h.cfg)
	h.streams = make(chan struct{}, h.cfg.MaxStreams)
	h.clients = &clientStreams{max: h.cfg.ClientStreams, open: map[string]int{}}
	h.pages = map[string]*template.Template{}
	for _, p := range []string{"batches", "batch", "job", "error", "try", "action", "search", "costs"} {
		t := template.New("layout.html").Funcs(h.funcs())
		// The actions' parts are the batch page's and the action page's.
		h.pages[p] = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/actions.html", "templates/"+p+".html"))
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	mux.HandleFunc("GET /{$}", h.batchesPage)
	mux.HandleFunc("GET /events", h.batchesEvents)
	mux.HandleFunc("GET /batches/{name}", h.batchPage)
	mux.HandleFunc("GET /batches/{name}/jobs", h.jobsPart)
	mux.HandleFunc("GET /batches/{name}/jobs.csv", h.export)
	mux.HandleFunc("GET /batches/{name}/jobs.jsonl", h.export)
	mux.HandleFunc("GET /batches/{name}/events", h.batchEvents)
	mux.HandleFunc("GET /batches/{name}/clusters", h.clustersPart)
	mux.HandleFunc("GET /batches/{name}/costs", h.costsPart)
	mux.HandleFunc("GET /batches/{name}/repairs", h.repairsPart)
	mux.HandleFunc("GET /batches/{name}/rules", h.rulesPart)
	mux.HandleFunc("GET /batches/{name}/grounding", h.groundingPart)
	mux.HandleFunc("GET /batches/{name}/timeline", h.timelinePart)
	mux.HandleFunc("GET /jobs/{id}", h.jobPage)
	mux.HandleFunc("GET /search", h.search)
	mux.HandleFunc("GET /costs", h.costsPage)
	mux.HandleFunc("GET /jobs/{id}/actions", h.jobActionsPart)
	mux.HandleFunc("GET /batches/{name}/actions", h.actionsPart)
	mux.HandleFunc("POST /batches/{name}/{action}", h.action)
	h.tryRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", r.URL.Path))
	})
	h.mux = mux
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !isTryPost(r) && !h.posts(r) {
		hd.Set("Allow", "GET, HEAD")
		h.fail(w, r, http.StatusMethodNotAllowed, errors.New("only GET is served here (the actions are POSTs to a batch's /requeue, /cancel and /cap)"))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// staticHandler serves the embedded assets, cacheable for a day (they
// change only with the binary).
func staticHandler(static fs.FS) http.Handler {
	fsrv := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fsrv.ServeHTTP(w, r)
	})
}

// queryCtx bounds the ledger queries of one request.
func (h *handler) queryCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
}

// render executes page's template into a buffer first, so that a failure
// midway gives an error page rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, page, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		h.cfg.Logger.Error("dashboard: render", "page", page, "path", r.URL.Path, "err", err)
		if page != "error" {
			h.fail(w, r, http.StatusInternalServerError, fmt.Errorf("render %s: %w", page, err))
		}
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// errorPage is what the error template shows.
type errorPage struct {
	Title   string
	Status  int
	Message string
}

// failPart answers a part of a page (an htmx request) with the error in
// its place: 503, which the page's htmx configuration swaps in too.
func (h *handler) failPart(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the ledger did not answer within %s: %w", h.cfg.QueryTimeout, err)
	}
	h.cfg.Logger.Warn("dashboard: request failed", "path", r.URL.Path, "status", http.StatusServiceUnavailable, "err", err)
	h.render(w, r, http.StatusServiceUnavailable, "batch", "part-error", err.Error())
}

// fail answers with an error page saying what went wrong: a status from
// err when it is the store's (not found, invalid argument, timeout).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, store.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
		err = fmt.Errorf("the ledger did not answer within %s: %w", h.cfg.QueryTimeout, err)
	}
	if status >= 500 {
		h.cfg.Logger.Warn("dashboard: request failed", "path", r.URL.Path, "status", status, "err", err)
	}
	h.render(w, r, status, "error", "layout.html", errorPage{Title: http.StatusText(status), Status: status, Message: err.Error()})
}
