package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Actions are the batch actions the dashboard offers (Config.Actions):
// requeue jobs of a batch, cancel it, change its spend cap. report serve
// gives one that runs what enqueue requeue, enqueue cancel and enqueue cap
// run. Each returns what it did, in sentences, or an error: one wrapping
// ErrBadAction is the request's fault (400), store.ErrNotFound no such
// batch (404), store.ErrActionInProgress another action holding the batch
// (409); any other is a failure of the ledger or the queue (503).
//
// The handler offers them to whoever reaches it: set Actions only on a
// handler behind RequireToken (report serve enables them only with an admin
// token). Every POST must also pass the handler's CSRF checks (its origin,
// and a token bound to a SameSite=Strict cookie).
type Actions interface {
	Requeue(ctx context.Context, batch string, r RequeueRequest) (Outcome, error)
	Cancel(ctx context.Context, batch string, r CancelRequest) (Outcome, error)
	SetCap(ctx context.Context, batch string, r CapRequest) (Outcome, error)
}

// RequeueRequest chooses the jobs a requeue runs again and how (see
// enqueue requeue).
type RequeueRequest struct {
	// Jobs, when set, are the jobs chosen (ids of the batch, at most
	// store.RequeueJobsMax): one job's page, or a selection of the job
	// list. Those alone run again (the ones final; enqueue.RequeueConfig.Jobs).
	Jobs []string
	// Statuses are final statuses: at least one for a requeue of the
	// batch; with Jobs, none means any final status.
	Statuses []fixpoint.Status
	// Class, when set, keeps the jobs whose final class is Class.
	Class string
	// Model and MaxAttempts, when set, change the new run's settings.
	Model       string
	MaxAttempts int
}

// CancelRequest chooses the jobs a cancel ends: Jobs (ids of the batch, at
// most store.RequeueJobsMax; those not final yet end, the batch goes on),
// or, none chosen, every job of the batch not final yet, the batch marked
// cancelled (enqueue cancel).
type CancelRequest struct {
	Jobs []string
}

// CapRequest is a new spend cap as typed (see enqueue cap): a number, "none"
// to remove that cap, or "" to leave it as it is.
type CapRequest struct {
	MaxCostUSD, MaxTotalTokens string
}

// Outcome says what an action did: sentences, and warnings apart.
type Outcome struct {
	Lines    []string
	Warnings []string
}

// ErrBadAction marks an action's error as the request's fault: bad input,
// or an action the batch's settings do not allow.
var ErrBadAction = errors.New("bad action")

// BadAction marks err as the request's fault (ErrBadAction), its message
// unchanged.
func BadAction(err error) error { return badAction{err} }

type badAction struct{ error }

func (e badAction) Unwrap() error        { return e.error }
func (e badAction) Is(target error) bool { return target == ErrBadAction }

// The CSRF defence of the actions: a POST must come from the dashboard's
// own origin (Sec-Fetch-Site, else Origin, against the Host: the standard
// library's CrossOriginProtection), and carry in its form the token that
// the actions' form got, an HMAC of the random session id in the
// SameSite=Strict cookie csrfCookie under a key of the handler's. A page
// of another site can neither read the token nor make the browser send the
// cookie.
const (
	csrfCookie = "fixpoint_csrf"
	csrfField  = "csrf"
	// actionBodyMax bounds an action's form (a selection of 1000 job ids
	// fits).
	actionBodyMax = 256 << 10
	// actionTimeout bounds an action.
	actionTimeout = 10 * time.Minute
)

// newCSRFKey is a handler's key for its CSRF tokens: random, so that a
// restart makes the open forms stale (a reload gives new ones).
func newCSRFKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}

// csrfToken is the form token of session id sid.
func (h *handler) csrfToken(sid string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("fixpoint dashboard action\x00" + sid))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfSession is the request's session id, a new one (and its cookie) when
// it has none.
func (h *handler) csrfSession(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 22 {
		return c.Value
	}
	sid := base64.RawURLEncoding.EncodeToString(newCSRFKey()[:18])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: sid, Path: h.cfg.BasePath + "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return sid
}

// checkCSRF says why a POST is refused, or nil.
func (h *handler) checkCSRF(r *http.Request) error {
	if err := h.origins.Check(r); err != nil {
		return errors.New("refused: the request comes from another site (its Origin or Sec-Fetch-Site header)")
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return errors.New("refused: no CSRF cookie: reload the batch's page and submit its form again")
	}
	got := r.PostFormValue(csrfField)
	if got == "" || !hmac.Equal([]byte(got), []byte(h.csrfToken(c.Value))) {
		return errors.New("refused: the form's CSRF token is missing or stale: reload the batch's page and submit its form again")
	}
	return nil
}

// actionsView is the actions part of a batch's page.
type actionsView struct {
	Enabled bool
	Batch   store.BatchOverview
	CSRF    string
	// Statuses are the final statuses to choose from, Default those
	// checked at first; Classes the final classes.
	Statuses, Default, Classes []string
}

// actionsPart is the actions' forms, or, without Actions, the note that
// the dashboard is read-only.
func (h *handler) actionsPart(w http.ResponseWriter, r *http.Request) {
	v := actionsView{Enabled: h.cfg.Actions != nil}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	b, err := h.st.Overview(ctx, r.PathValue("name"))
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	v.Batch = b
	if v.Enabled {
		v.CSRF = h.csrfToken(h.csrfSession(w, r))
		for _, s := range []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusFailed, fixpoint.StatusRejected, fixpoint.StatusDead,
			fixpoint.StatusCancelled, fixpoint.StatusOverBudget, fixpoint.StatusValid} {
			v.Statuses = append(v.Statuses, string(s))
		}
		v.Default = []string{"invalid", "failed", "rejected", "dead"}
		v.Classes = fixpoint.FinalClasses
	}
	h.render(w, r, http.StatusOK, "batch", "actions", v)
}

// jobActionsView is the actions part of a job's page: requeue the job
// when it is final, cancel it while it is queued.
type jobActionsView struct {
	Enabled bool
	Job     *store.JobRecord
	CSRF    string
}

// jobActionsPart is a job's forms, or, without Actions, the note that the
// dashboard is read-only.
func (h *handler) jobActionsPart(w http.ResponseWriter, r *http.Request) {
	v := jobActionsView{Enabled: h.cfg.Actions != nil}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	j, _, err := h.st.Job(ctx, r.PathValue("id"))
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	v.Job = j
	if v.Enabled {
		v.CSRF = h.csrfToken(h.csrfSession(w, r))
	}
	h.render(w, r, http.StatusOK, "job", "job-actions", v)
}

// actionView is an action's outcome, alone (htmx) or as a page.
type actionView struct {
	Title  string
	Batch  string
	Action string
	Status int
	Outcome
	Error string
	// Job is the job acted on when it was one alone (its page links back).
	Job string
}

// action serves a POST of an action: refused without Actions or without
// the CSRF checks passed, else run, its outcome shown.
func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	batch, action := r.PathValue("name"), r.PathValue("action")
	r.Body = http.MaxBytesReader(w, r.Body, actionBodyMax)
	v := actionView{Title: action + " " + batch, Batch: batch, Action: action}
	if h.cfg.Actions == nil {
		h.actionDone(w, r, v, http.StatusForbidden, errors.New("refused: this dashboard is read-only (report serve enables the actions with an admin token); use enqueue "+action))
		return
	}
	if err := h.checkCSRF(r); err != nil {
		h.actionDone(w, r, v, http.StatusForbidden, err)
		return
	}
	var out Outcome
	var err error
	// The action runs to its end even when the browser goes away (a
	// requeue cut midway leaves jobs unpublished until it is run again),
	// bounded by actionTimeout rather than the query timeout: a requeue of
	// many jobs takes its time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
	defer cancel()
	switch action {
	case "requeue":
		var req RequeueRequest
		if req, err = parseRequeue(r); err == nil {
			out, err = h.cfg.Actions.Requeue(ctx, batch, req)
		}
	case "cancel":
		var req CancelRequest
		if req.Jobs, err = parseJobs(r); err == nil {
			out, err = h.cfg.Actions.Cancel(ctx, batch, req)
		}
	case "cap":
		req := CapRequest{MaxCostUSD: strings.TrimSpace(r.PostFormValue("max_cost_usd")), MaxTotalTokens: strings.TrimSpace(r.PostFormValue("max_total_tokens"))}
		if req.MaxCostUSD == "" && req.MaxTotalTokens == "" {
			err = BadAction(errors.New("give a cost cap, a token cap or both (a number, or none to remove it)"))
		} else {
			out, err = h.cfg.Actions.SetCap(ctx, batch, req)
		}
	default:
		h.actionDone(w, r, v, http.StatusNotFound, fmt.Errorf("no action %q: requeue, cancel or cap", action))
		return
	}
	status := http.StatusOK
	switch {
	case err == nil:
	case errors.Is(err, ErrBadAction):
		status = http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, store.ErrActionInProgress):
		status = http.StatusConflict
	default:
		status = http.StatusServiceUnavailable
		h.cfg.Logger.Warn("dashboard: action failed", "action", action, "batch", batch, "err", err)
	}
	v.Outcome = out
	if jobs := r.PostForm["job"]; len(jobs) == 1 {
		v.Job = strings.TrimSpace(jobs[0]) // its outcome links back to its page
	}
	h.actionDone(w, r, v, status, err)
}

// actionDone answers an action: its outcome alone for htmx, else a page.
func (h *handler) actionDone(w http.ResponseWriter, r *http.Request, v actionView, status int, err error) {
	v.Status = status
	if err != nil {
		v.Error = err.Error()
	}
	if r.Header.Get("HX-Request") == "true" {
		h.render(w, r, status, "action", "action-outcome", v)
		return
	}
	h.render(w, r, status, "action", "layout.html", v)
}

// parseJobs reads the jobs chosen in a form (job, repeated): none for an
// action of the batch, unless the form is a selection's (scope=jobs),
// which must name one.
func parseJobs(r *http.Request) ([]string, error) {
	if err := r.ParseForm(); err != nil {
		return nil, BadAction(fmt.Errorf("read the form: %w", err))
	}
	var jobs []string
	for _, id := range r.PostForm["job"] {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(jobs, id) {
			jobs = append(jobs, id)
		}
	}
	switch {
	case len(jobs) > store.RequeueJobsMax:
		return nil, BadAction(fmt.Errorf("%d jobs chosen: at most %d at once", len(jobs), store.RequeueJobsMax))
	case len(jobs) == 0 && r.PostFormValue("scope") == "jobs":
		return nil, BadAction(errors.New("tick at least one job"))
	}
	return jobs, nil
}

// parseRequeue reads a requeue's form: job (repeated), status (repeated),
// class, model, max_attempts.
func parseRequeue(r *http.Request) (RequeueRequest, error) {
	var req RequeueRequest
	var err error
	if req.Jobs, err = parseJobs(r); err != nil {
		return req, err
	}
	for _, s := range r.PostForm["status"] {
		st := fixpoint.Status(strings.TrimSpace(s))
		if !st.Final() {
			return req, BadAction(fmt.Errorf("status %q: want final statuses: valid, invalid, failed, rejected, dead, cancelled, over_budget", s))
		}
		if !slices.Contains(req.Statuses, st) {
			req.Statuses = append(req.Statuses, st)
		}
	}
	if len(req.Statuses) == 0 && len(req.Jobs) == 0 {
		return req, BadAction(errors.New("choose at least one status to requeue"))
	}
	req.Class = strings.TrimSpace(r.PostFormValue("class"))
	req.Model = strings.TrimSpace(r.PostFormValue("model"))
	if s := strings.TrimSpace(r.PostFormValue("max_attempts")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return req, BadAction(fmt.Errorf("max attempts %q: want a whole number, 1 or more (empty: unchanged)", s))
		}
		req.MaxAttempts = n
	}
	return req, nil
}

// posts says r is a POST to a route that takes one (an action).
func (h *handler) posts(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	_, pattern := h.mux.Handler(r)
	return strings.HasPrefix(pattern, "POST ")
}
