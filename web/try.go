package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// The Try playground runs one job from the browser through the repair
// step a worker runs, and shows it as it goes: a diagram of the stages
// (call, extract, validate, retry) lit as each one happens, then a card
// per attempt. The dashboard does not run the job itself (it links no
// provider client): Config.Try does, a Trier that report serve builds
// over the provider clients and the simulator (package web/playground).
//
// A try is posted (CSRF-checked), bounded (TrySchemaMaxBytes,
// TryPromptMaxBytes, TryMaxAttemptsMax, Config.TryTimeout), and run in the
// background; the page follows it over a server-sent event stream that
// sends the run's part each time it changes. A key typed in the form goes
// to the Trier for that call and is kept nowhere: not in the run, the
// pages or the log.

// Bounds of a try.
const (
	TrySchemaMaxBytes = 64 << 10
	TryPromptMaxBytes = 32 << 10
	// TryDocumentMaxBytes bounds a document strategy's document.
	TryDocumentMaxBytes = 1 << 20
	TryMaxAttemptsMax   = 5
	// TryMaxTokensMax bounds a call's output tokens.
	TryMaxTokensMax = 16384
	// tryExampleMaxTokens is the example document's output cap.
	tryExampleMaxTokens = 4096
	// TryTimeoutDefault is Config.TryTimeout's default.
	TryTimeoutDefault = 2 * time.Minute
	// tryRunningMax bounds the tries running at once; tryKeptMax the
	// runs kept to show (oldest dropped first), each for tryKeep.
	tryRunningMax = 4
	tryKeptMax    = 32
	tryKeep       = 30 * time.Minute
	tryFieldMax   = 200
	tryKeyMax     = 512
)

// Trier runs the playground's tries.
type Trier interface {
	// Choices is what the form offers.
	Choices() TryChoices
	// Prepare checks req as a job of a batch is checked and returns the
	// run of it, or an error saying what is wrong with the input (one
	// matching fixpoint.ErrBadJob for the input, another for a provider or
	// simulator that cannot be reached). The run calls progress as each
	// call goes out and as each attempt is recorded, from one goroutine,
	// and returns the job's result (with every attempt made) and Loop's
	// error. req.Key must serve that run only.
	Prepare(req TryRequest) (TryFunc, error)
}

// TryFunc runs a prepared try.
type TryFunc func(ctx context.Context, progress func(TryEvent)) (*fixpoint.Result, error)

// TryChoices lists the simulator presets and the providers a try can use.
type TryChoices struct {
	Presets   []TryPreset
	Providers []TryProvider
	// Example, when set, is a document job the form offers to load: one
	// the simulator's presets answer.
	Example *TryExample
}

// TryExample is a document job to try: its schema, its prompt and its
// document.
type TryExample struct {
	Schema, Prompt, Document string
}

// TryPreset is a simulator preset.
type TryPreset struct{ Name, Description string }

// TryProvider is a provider the playground can call.
type TryProvider struct {
	Name string
	// HasKey says the server holds a key for it; NeedsKey that a call
	// needs one (typed in the form when the server has none).
	HasKey, NeedsKey bool
	// DefaultModel is the model the form suggests.
	DefaultModel string
}

// TryRequest is one try as the form gives it.
type TryRequest struct {
	// Preset is the simulator preset, or "" to call Provider.
	Preset, Provider string
	// Key is the key typed in the form, for this try's calls only; "" to
	// use the server's.
	Key           string
	Model, Prompt string
	Schema        []byte
	Mode          fixpoint.Mode
	// Limits carries the strategy; a document strategy's chunk size too.
	Limits fixpoint.Limits
	// Document is the document a document strategy reads (Limits.
	// Strategy.Document), "" for the other strategies.
	Document string
	// MaxTokens caps each call's output (0: fixpoint.MaxTokensDefault):
	// a chunk that lists many items needs more than the default.
	MaxTokens int
	// Seed, with a preset, picks the simulator's draws: one seed and input
	// get the same replies each time.
	Seed string
}

// TryEvent is a try's progress: a call went out (Sent, the attempt's
// number), or an attempt was recorded (Attempt).
type TryEvent struct {
	Sent    int
	Attempt *fixpoint.Attempt
}

// tryState is the playground's state: its runs and its form token.
type tryState struct {
	trier   Trier
	timeout time.Duration
	csrf    string
	cop     *http.CrossOriginProtection

	mu      sync.Mutex
	runs    map[string]*tryRun
	order   []string // oldest first
	running int
}

func newTryState(cfg Config) *tryState {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return &tryState{trier: cfg.Try, timeout: cfg.TryTimeout, csrf: hex.EncodeToString(b),
		cop: http.NewCrossOriginProtection(), runs: map[string]*tryRun{}}
}

// isTryPost says r is the playground's post, the one request that is not
// a GET.
func isTryPost(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/try" }

func (h *handler) tryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /try", h.tryPage)
	mux.HandleFunc("POST /try", h.tryStart)
	mux.HandleFunc("GET /try/runs/{id}", h.tryRunPart)
	mux.HandleFunc("GET /try/runs/{id}/events", h.tryEvents)
}

// tryForm is the form's values, shown back after a post.
type tryForm struct {
	Source, Model, Prompt, Schema, Mode, Strategy, Coerce, Seed string
	MaxAttempts                                                 int
	// Document and ChunkTokens are a document strategy's ("" and 0 for
	// the default chunk size), MergeModel the parallel strategy's merge
	// model ("" merges by rule); MaxTokens caps each call's output (0 for
	// the default).
	Document, MergeModel   string
	ChunkTokens, MaxTokens int
}

// tryView is the playground's page.
type tryView struct {
	Title   string
	Enabled bool
	Choices TryChoices
	Form    tryForm
	CSRF    string
	// Run is the run just started (a post without htmx), Err an input
	// error.
	Run *tryRunView
	Err string
	// Modes, Strategies and Coercions are the form's choices;
	// DocStrategies the strategies that read a document.
	Modes, Strategies, Coercions []string
	DocStrategies                []string
	Bounds                       tryBounds
	// NoKey: no simulator and no provider callable without a typed key.
	NoKey bool
}

type tryBounds struct {
	SchemaKB, PromptKB, DocumentKB, MaxAttempts, ChunkTokens int
	MaxTokens, MaxTokensMax                                  int
}

// The form's first values: a ticket to extract, a job the simulator's
// presets get wrong in their several ways.
const (
	tryExampleSchema = `{
  "type": "object",
  "properties": {
    "title": {"type": "string", "minLength": 3},
    "priority": {"enum": ["low", "medium", "high", "urgent"]},
    "floor": {"type": "integer", "minimum": 0, "maximum": 60},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5}
  },
  "required": ["title", "priority", "floor"],
  "additionalProperties": false
}`
	tryExamplePrompt = "Extract the ticket: the printer on floor 3 is on fire again, send someone now."
)

func (h *handler) newTryView(f tryForm) tryView {
	v := tryView{Title: "Try", Enabled: h.try.trier != nil, Form: f, CSRF: h.try.csrf,
		Modes:         []string{string(fixpoint.ModePrompt), string(fixpoint.ModeJSONSchema), string(fixpoint.ModeTool)},
		Strategies:    fixpoint.StrategyNames(),
		DocStrategies: []string{string(fixpoint.StrategyParallel), string(fixpoint.StrategySequential), string(fixpoint.StrategyAgent)},
		Coercions:     []string{string(fixpoint.CoerceSafe), string(fixpoint.CoerceAll), string(fixpoint.CoerceNone)},
		Bounds: tryBounds{SchemaKB: TrySchemaMaxBytes >> 10, PromptKB: TryPromptMaxBytes >> 10, DocumentKB: TryDocumentMaxBytes >> 10,
			MaxAttempts: TryMaxAttemptsMax, ChunkTokens: fixpoint.ChunkTokensDefault, MaxTokens: fixpoint.MaxTokensDefault, MaxTokensMax: TryMaxTokensMax}}
	if v.Enabled {
		v.Choices = h.try.trier.Choices()
		v.NoKey = len(v.Choices.Presets) == 0 && !slices.ContainsFunc(v.Choices.Providers, func(p TryProvider) bool { return p.HasKey || !p.NeedsKey })
	}
	return v
}

func (h *handler) tryPage(w http.ResponseWriter, r *http.Request) {
	f := tryForm{Prompt: tryExamplePrompt, Schema: tryExampleSchema, Mode: string(fixpoint.ModePrompt),
		Strategy: string(fixpoint.StrategyDefault), Coerce: string(fixpoint.CoerceSafe), MaxAttempts: fixpoint.MaxAttemptsDefault}
	v := h.newTryView(f)
	if ex := v.Choices.Example; ex != nil && r.URL.Query().Get("example") == "document" {
		v.Form.Schema, v.Form.Prompt, v.Form.Document = ex.Schema, ex.Prompt, ex.Document
		v.Form.Strategy = string(fixpoint.StrategyParallel)
		// A chunk of the example lists tens of subsidiaries: more than
		// the default output holds.
		v.Form.MaxTokens = tryExampleMaxTokens
	}
	if len(v.Choices.Presets) > 0 {
		v.Form.Source = "sim:" + v.Choices.Presets[0].Name
		for _, p := range v.Choices.Presets {
			if p.Name == "messy" {
				v.Form.Source = "sim:messy"
			}
		}
	} else if len(v.Choices.Providers) > 0 {
		v.Form.Source = "provider:" + v.Choices.Providers[0].Name
	}
	h.render(w, r, http.StatusOK, "try", "layout.html", v)
}

// errTryInput is matched by the errors of a try's input.
var errTryInput = errors.New("bad input")

// parseTry reads and bounds the form. The key is returned apart: it is
// never part of the form shown back.
func (h *handler) parseTry(r *http.Request) (tryForm, TryRequest, error) {
	var f tryForm
	var req TryRequest
	if err := r.ParseForm(); err != nil {
		return f, req, fmt.Errorf("%w: read the form: %w", errTryInput, err)
	}
	get := func(k string) string { return r.PostForm.Get(k) }
	f = tryForm{Source: get("source"), Model: strings.TrimSpace(get("model")), Prompt: get("prompt"), Schema: get("schema"),
		Mode: get("mode"), Strategy: get("strategy"), Coerce: get("coerce"), Seed: strings.TrimSpace(get("seed")), Document: get("document")}
	bad := func(format string, a ...any) (tryForm, TryRequest, error) {
		return f, req, fmt.Errorf("%w: "+format, append([]any{errTryInput}, a...)...)
	}
	n, err := strconv.Atoi(strings.TrimSpace(get("max_attempts")))
	f.MaxAttempts = n
	if err != nil || n < 1 || n > TryMaxAttemptsMax {
		return bad("max attempts %q: give a whole number from 1 to %d", get("max_attempts"), TryMaxAttemptsMax)
	}
	switch {
	case len(f.Schema) > TrySchemaMaxBytes:
		return bad("the schema is %d bytes, over the playground's limit of %d", len(f.Schema), TrySchemaMaxBytes)
	case strings.TrimSpace(f.Schema) == "":
		return bad("the schema is empty")
	case len(f.Prompt) > TryPromptMaxBytes:
		return bad("the prompt is %d bytes, over the playground's limit of %d", len(f.Prompt), TryPromptMaxBytes)
	case strings.TrimSpace(f.Prompt) == "":
		return bad("the prompt is empty")
	case len(f.Document) > TryDocumentMaxBytes:
		return bad("the document is %d bytes, over the playground's limit of %d", len(f.Document), TryDocumentMaxBytes)
	case !utf8.ValidString(f.Prompt) || !utf8.ValidString(f.Schema) || !utf8.ValidString(f.Model) || !utf8.ValidString(f.Seed) || !utf8.ValidString(f.Document):
		return bad("the form holds text that is not UTF-8")
	case len(f.Model) > tryFieldMax || len(f.Seed) > tryFieldMax:
		return bad("the model and the seed are at most %d bytes", tryFieldMax)
	case len(get("key")) > tryKeyMax:
		return bad("the key is over %d bytes", tryKeyMax)
	}
	modes := []string{string(fixpoint.ModePrompt), string(fixpoint.ModeJSONSchema), string(fixpoint.ModeTool)}
	if !slices.Contains(modes, f.Mode) {
		return bad("mode %q: want prompt, json_schema or tool", f.Mode)
	}
	coerce, err := fixpoint.ParseCoerceMode(f.Coerce)
	if err != nil {
		return bad("%v", err)
	}
	req = TryRequest{Model: f.Model, Prompt: f.Prompt, Schema: []byte(f.Schema), Mode: fixpoint.Mode(f.Mode),
		Limits: fixpoint.Limits{MaxAttempts: n, Strategy: fixpoint.Strategy(f.Strategy), Coerce: coerce}, Seed: f.Seed}
	if err := parseTryDocument(&f, &req, get("chunk_tokens")); err != nil {
		return f, req, err
	}
	if f.MergeModel = strings.TrimSpace(get("merge_model")); f.MergeModel != "" {
		switch {
		case len(f.MergeModel) > tryFieldMax || !utf8.ValidString(f.MergeModel):
			return bad("the merge model is at most %d bytes of text", tryFieldMax)
		case req.Limits.Strategy != fixpoint.StrategyParallel:
			return bad("a merge model merges the chunks' values of strategy parallel, not %s: pick parallel, or empty the merge model", req.Limits.Strategy)
		}
		req.Limits.MergeModel = f.MergeModel
	}
	if mt := strings.TrimSpace(get("max_tokens")); mt != "" {
		n, err := strconv.Atoi(mt)
		f.MaxTokens = n
		if err != nil || n < 1 || n > TryMaxTokensMax {
			return bad("max output tokens %q: give a whole number from 1 to %d (empty for %d)", mt, TryMaxTokensMax, fixpoint.MaxTokensDefault)
		}
		req.MaxTokens = n
	}
	if err := req.Limits.WithDefaults().Validate(); err != nil {
		return bad("%v", err)
	}
	if err := req.Limits.ValidateMode(req.Mode); err != nil {
		return bad("%v", err)
	}
	ch := h.try.trier.Choices()
	kind, name, _ := strings.Cut(f.Source, ":")
	switch {
	case kind == "sim" && slices.ContainsFunc(ch.Presets, func(p TryPreset) bool { return p.Name == name }):
		req.Preset = name
	case kind == "provider":
		i := slices.IndexFunc(ch.Providers, func(p TryProvider) bool { return p.Name == name })
		if i < 0 {
			return bad("provider %q is not one this dashboard calls", name)
		}
		p := ch.Providers[i]
		req.Provider, req.Key = name, get("key")
		if p.NeedsKey && !p.HasKey && strings.TrimSpace(req.Key) == "" {
			return bad("%s needs an API key: this server holds none, so type one (used for this try only, never stored), or pick a simulator preset", name)
		}
		if req.Model == "" {
			req.Model = p.DefaultModel
		}
		if req.Model == "" {
			return bad("give the model to call")
		}
	default:
		return bad("pick a simulator preset or a provider (got %q)", f.Source)
	}
	if req.Preset == "" && f.Seed != "" {
		return bad("a seed picks the simulator's draws: leave it empty for a provider")
	}
	return f, req, nil
}

// parseTryDocument reads a document strategy's document and chunk size:
// a document strategy needs a document, and another strategy reads none.
func parseTryDocument(f *tryForm, req *TryRequest, chunkTokens string) error {
	doc := req.Limits.Strategy.Document()
	if chunkTokens = strings.TrimSpace(chunkTokens); chunkTokens != "" {
		n, err := strconv.Atoi(chunkTokens)
		f.ChunkTokens = n
		if err != nil || n < 1 {
			return fmt.Errorf("%w: chunk size %q: give a whole number of tokens, at least 1 (empty for %d)", errTryInput, chunkTokens, fixpoint.ChunkTokensDefault)
		}
		if doc {
			req.Limits.ChunkTokens = n
		}
	}
	switch {
	case doc && strings.TrimSpace(f.Document) == "":
		return fmt.Errorf("%w: strategy %s reads a document: paste one in the document box", errTryInput, req.Limits.Strategy)
	case !doc && strings.TrimSpace(f.Document) != "":
		return fmt.Errorf("%w: strategy %s reads no document: pick parallel, sequential or agent, or empty the document box", errTryInput, req.Limits.Strategy)
	}
	if doc {
		req.Document = f.Document
	}
	return nil
}

// tryStart checks and starts a try, and answers with its run's part (an
// htmx post) or the page holding it.
func (h *handler) tryStart(w http.ResponseWriter, r *http.Request) {
	if h.try.trier == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("the Try playground is not enabled in this dashboard"))
		return
	}
	// The form is URL-encoded: each byte of the schema or the prompt may
	// take three.
	r.Body = http.MaxBytesReader(w, r.Body, 3*(TrySchemaMaxBytes+TryPromptMaxBytes+TryDocumentMaxBytes)+16<<10)
	if err := h.try.cop.Check(r); err != nil {
		h.tryFail(w, r, http.StatusForbidden, tryForm{}, fmt.Errorf("refused: %w", err))
		return
	}
	if err := r.ParseForm(); err != nil {
		h.tryFail(w, r, http.StatusBadRequest, tryForm{}, fmt.Errorf("read the form: %w (the schema is at most %d bytes, the prompt %d, the document %d)", err, TrySchemaMaxBytes, TryPromptMaxBytes, TryDocumentMaxBytes))
		return
	}
	given := r.PostForm.Get("csrf")
	if subtle.ConstantTimeCompare([]byte(given), []byte(h.try.csrf)) != 1 {
		h.tryFail(w, r, http.StatusForbidden, tryForm{}, errors.New("refused: the form's token is missing or stale (reload the page)"))
		return
	}
	f, req, err := h.parseTry(r)
	if err != nil {
		h.tryFail(w, r, http.StatusBadRequest, f, err)
		return
	}
	if req.Preset != "" && req.Seed == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		req.Seed = strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 10)
	}
	run, err := h.try.start(req, h.cfg)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errTryBusy) {
			status = http.StatusServiceUnavailable
		}
		h.tryFail(w, r, status, f, err)
		return
	}
	v := run.snapshot()
	if r.Header.Get("HX-Request") == "true" {
		h.render(w, r, http.StatusOK, "try", "try-run", v)
		return
	}
	page := h.newTryView(f)
	page.Run = &v
	h.render(w, r, http.StatusOK, "try", "layout.html", page)
}

// tryFail answers a post with what is wrong: the error in the run's place
// (htmx) or the page with the form as it was given.
func (h *handler) tryFail(w http.ResponseWriter, r *http.Request, status int, f tryForm, err error) {
	msg := strings.TrimPrefix(err.Error(), errTryInput.Error()+": ")
	msg = strings.TrimPrefix(msg, fixpoint.ErrBadJob.Error()+": ")
	if status >= 500 {
		h.cfg.Logger.Warn("dashboard: try refused", "status", status, "err", msg)
	}
	if r.Header.Get("HX-Request") == "true" {
		h.render(w, r, status, "try", "try-error", msg)
		return
	}
	v := h.newTryView(f)
	if f.Source == "" {
		v = h.newTryView(tryForm{Schema: tryExampleSchema, Prompt: tryExamplePrompt, MaxAttempts: fixpoint.MaxAttemptsDefault})
	}
	v.Err = msg
	h.render(w, r, status, "try", "layout.html", v)
}

var errTryBusy = errors.New("busy")

// start prepares req and runs it in the background.
func (s *tryState) start(req TryRequest, cfg Config) (*tryRun, error) {
	s.mu.Lock()
	if s.running >= tryRunningMax {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d tries are running already: wait for one to end", errTryBusy, tryRunningMax)
	}
	s.running++
	s.mu.Unlock()
	started := false
	defer func() {
		if !started {
			s.mu.Lock()
			s.running--
			s.mu.Unlock()
		}
	}()
	fn, err := s.trier.Prepare(req)
	if err != nil {
		return nil, err
	}
	idb := make([]byte, 16)
	_, _ = rand.Read(idb)
	run := newTryRun(hex.EncodeToString(idb), req, cfg.BasePath)
	s.mu.Lock()
	s.gc(time.Now())
	s.runs[run.id] = run
	s.order = append(s.order, run.id)
	s.mu.Unlock()
	started = true
	go func() {
		defer func() {
			s.mu.Lock()
			s.running--
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		var res *fixpoint.Result
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("the try panicked: %v", p)
				}
			}()
			res, err = fn(ctx, run.progress)
			return err
		}()
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil && err != nil {
			err = fmt.Errorf("the try ran past the playground's limit of %s: %w", s.timeout, err)
		}
		run.finish(res, err)
	}()
	return run, nil
}

// gc drops the runs past their time, and the oldest finished ones past
// tryKeptMax. Called with s.mu held.
func (s *tryState) gc(now time.Time) {
	keep := s.order[:0]
	for i, id := range s.order {
		run := s.runs[id]
		over := len(s.order)-i > tryKeptMax-1
		if run.finishedBefore(now.Add(-tryKeep)) || over && run.isDone() {
			delete(s.runs, id)
			continue
		}
		keep = append(keep, id)
	}
	s.order = keep
}

func (s *tryState) get(id string) *tryRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// tryRun is one try: its view, updated as it goes, and a channel closed at
// each change.
type tryRun struct {
	id string
	// document is the document the run reads, "" for none.
	document string
	mu       sync.Mutex
	view     tryRunView
	version  int
	changed  chan struct{}
	ended    time.Time
}

// tryRunView is what the run's part shows.
type tryRunView struct {
	ID, Events string
	// Source is the preset or the provider; the rest the settings.
	Source, Model, Mode, Strategy, Coerce, Seed string
	MaxAttempts                                 int
	// Attempt is the attempt the diagram shows; Stages its stages.
	Attempt int
	Stages  []tryStage
	Cards   []tryCard
	// Groups are the cards grouped by step, for a document strategy;
	// Doc says the run's strategy reads a document.
	Groups []stepGroup
	Doc    bool
	// Document is a finished document run's document with its final
	// check's spans, as a job's page shows it (clipped when long).
	Document *documentView
	Done     bool
	// The outcome, once Done.
	Status, Verdict, Value, Err string
	Result                      *fixpoint.Result
}

// tryStage is a box of the diagram: State is "idle", "run", "ok",
// "fail" or "skip".
type tryStage struct {
	Key, Label, State, Detail string
}

// tryCard is one attempt.
type tryCard struct {
	fixpoint.Attempt
	Badge, Value string
	LatencyMS    int64
	Diff         []diffLine
	HasPrev      bool
	// Anchor is the card's id; Doc its document step, nil for another
	// strategy's attempt.
	Anchor string
	Doc    *docStep
}

func newTryRun(id string, req TryRequest, base string) *tryRun {
	lim := req.Limits.WithDefaults()
	v := tryRunView{ID: id, Events: base + "/try/runs/" + id + "/events", Model: req.Model, Mode: string(req.Mode),
		Strategy: string(lim.Strategy), Coerce: string(lim.Coerce), MaxAttempts: lim.MaxAttempts, Doc: lim.Strategy.Document()}
	if req.Preset != "" {
		v.Source, v.Seed = "simulator "+req.Preset, req.Seed
		if v.Model == "" {
			v.Model = "sim-" + req.Preset
		}
	} else {
		v.Source = req.Provider
	}
	v.Stages = idleStages()
	return &tryRun{id: id, document: req.Document, view: v, changed: make(chan struct{})}
}

func idleStages() []tryStage {
	return []tryStage{
		{Key: "call", Label: "Call", State: "idle"},
		{Key: "extract", Label: "Parse / extract", State: "idle"},
		{Key: "validate", Label: "Validate", State: "idle"},
		{Key: "retry", Label: "Retry", State: "idle"},
	}
}

// update changes the view and wakes the streams.
func (r *tryRun) update(f func(v *tryRunView)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.view)
	r.version++
	close(r.changed)
	r.changed = make(chan struct{})
}

// snapshot is the view now (its slices are only appended to or replaced).
func (r *tryRun) snapshot() tryRunView {
	v, _, _ := r.state()
	return v
}

func (r *tryRun) state() (tryRunView, int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.view
	v.Cards = slices.Clone(v.Cards)
	v.Stages = slices.Clone(v.Stages)
	v.Groups = slices.Clone(v.Groups)
	return v, r.version, r.changed
}

func (r *tryRun) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view.Done
}

func (r *tryRun) finishedBefore(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view.Done && r.ended.Before(t)
}

// progress lights the diagram: a call going out, or an attempt recorded.
func (r *tryRun) progress(ev TryEvent) {
	r.update(func(v *tryRunView) {
		if ev.Sent > 0 {
			v.Attempt = ev.Sent
			v.Stages = idleStages()
			v.Stages[0].State, v.Stages[0].Detail = "run", "waiting for the reply"
		}
		if a := ev.Attempt; a != nil {
			v.Attempt = a.No
			v.Stages = attemptStages(a)
			v.Cards = append(v.Cards, newTryCard(a, v.Cards))
			v.Groups = tryGroups(v.Cards)
		}
	})
}

// attemptStages is how each stage of attempt a went.
func attemptStages(a *fixpoint.Attempt) []tryStage {
	s := idleStages()
	call, ext, val, retry := &s[0], &s[1], &s[2], &s[3]
	switch {
	case a.ProviderError != "" || a.Class == fixpoint.OutcomeProvider:
		call.State, call.Detail = "fail", "provider error"
		if a.ProviderClass != "" {
			call.Detail += ": " + string(a.ProviderClass)
		}
		ext.State, val.State = "skip", "skip"
	default:
		call.State = "ok"
		call.Detail = fmt.Sprintf("%d ms · %d+%d tokens", a.Latency.Milliseconds(), a.TokensIn, a.TokensOut)
		switch {
		case a.PatchOutcome != "":
			ext.State, ext.Detail = "ok", "patch "+string(a.PatchOutcome)
			if a.PatchOutcome != fixpoint.PatchApplied {
				ext.State = "fail"
			}
		case a.Source != "":
			ext.State, ext.Detail = "ok", "found: "+string(a.Source)
			if n := len(a.Repairs) - a.Coerced; n > 0 {
				ext.Detail += fmt.Sprintf(" · %d syntax repair%s", n, plural(n))
			}
			if a.Class == string(fixpoint.ClassSyntax) || a.Class == fixpoint.OutcomeTruncated {
				ext.State = "fail"
			}
		default:
			ext.State, ext.Detail = "fail", "no JSON value"
			if a.Class != "" {
				ext.Detail += " (" + a.Class + ")"
			}
		}
		switch {
		case a.Valid:
			val.State, val.Detail = "ok", "valid"
			if a.Coerced > 0 {
				val.Detail += fmt.Sprintf(" after %d coercion%s", a.Coerced, plural(a.Coerced))
			}
		case len(a.Errors) > 0:
			val.State, val.Detail = "fail", fmt.Sprintf("%d error%s", len(a.Errors), plural(len(a.Errors)))
		case ext.State == "fail":
			val.State = "skip"
		default:
			val.State, val.Detail = "fail", a.Class
		}
	}
	switch {
	case a.Step != "" && a.Valid:
		// A document step's number counts every call of the job (the
		// other chunks'), not the retries of this one.
		retry.State, retry.Detail = "skip", "not needed"
	case a.Valid && a.No > 1:
		// The run retried to get here: the stage went through.
		retry.State, retry.Detail = "ok", fmt.Sprintf("valid after %d retr%s", a.No-1, map[bool]string{true: "y", false: "ies"}[a.No == 2])
	case a.Valid:
		retry.State, retry.Detail = "skip", "not needed"
	case a.Feedback != "" && strings.Contains(strings.SplitN(a.Feedback, "\n", 2)[0], "JSON Patch"):
		retry.State, retry.Detail = "run", "patch request sent"
	case a.Feedback != "":
		retry.State, retry.Detail = "run", "feedback sent"
	default:
		retry.State, retry.Detail = "fail", "no feedback sent"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func newTryCard(a *fixpoint.Attempt, prev []tryCard) tryCard {
	c := tryCard{Attempt: *a, Badge: a.Class, LatencyMS: a.Latency.Milliseconds(), Anchor: "try-attempt-" + strconv.Itoa(a.No)}
	if a.Valid {
		c.Badge = "valid"
	} else if c.Badge == "" {
		c.Badge = "invalid"
	}
	c.Value = indent(a.Value)
	if c.Value == "" {
		c.Value = replyValue(a.Raw)
	}
	if c.Value != "" {
		for i := len(prev) - 1; i >= 0; i-- {
			// A chunk's value is diffed against its chunk's previous one,
			// any other against the previous of the main line (diffKey).
			if prev[i].Value != "" && tryDiffKey(prev[i].Attempt) == tryDiffKey(*a) {
				c.HasPrev = true
				c.Diff = lineDiff(prev[i].Value, c.Value)
				break
			}
		}
	}
	return c
}

// finish records the outcome.
func (r *tryRun) finish(res *fixpoint.Result, err error) {
	r.update(func(v *tryRunView) {
		v.Done = true
		r.ended = time.Now()
		if err != nil {
			v.Err = err.Error()
		}
		if res == nil {
			v.Status, v.Verdict = "failed", "the try did not run"
			for i := range v.Stages {
				if v.Stages[i].State == "run" {
					v.Stages[i].State = "fail"
				}
			}
			return
		}
		v.Result = res
		// An attempt no hook reported (a merge makes no call) is shown
		// with the others.
		for i := range res.Attempts {
			a := &res.Attempts[i]
			if !slices.ContainsFunc(v.Cards, func(c tryCard) bool { return c.No == a.No }) {
				v.Cards = append(v.Cards, newTryCard(a, v.Cards))
			}
		}
		v.Groups = tryGroups(v.Cards)
		if r.document != "" {
			v.Document = tryDocument(r.document, res, v.Cards)
		}
		v.Status = string(res.Status)
		v.Value = indent(res.Value)
		if res.Error != "" && v.Err == "" {
			v.Err = res.Error
		}
		n := len(res.Attempts)
		switch {
		case v.Doc:
			// A document run's attempts are its steps, a merge among
			// them with no call.
			v.Verdict = fmt.Sprintf("%s after %d step%s, %d call%s", res.Status, n, plural(n), res.Calls, plural(res.Calls))
		case res.Status == fixpoint.StatusValid && n == 1 && res.RepairedLocally:
			v.Verdict = "valid on the first attempt, after local repairs"
		case res.Status == fixpoint.StatusValid && n == 1:
			v.Verdict = "valid on the first attempt"
		case res.Status == fixpoint.StatusValid:
			v.Verdict = fmt.Sprintf("valid after %d attempts", n)
		default:
			v.Verdict = fmt.Sprintf("%s after %d attempt%s", res.Status, n, plural(n))
		}
		// A stage still running when the try ended (a call cut off, a
		// retry the job had no attempt left for) did not get through.
		for i := range v.Stages {
			if v.Stages[i].State == "run" && res.Status != fixpoint.StatusValid {
				v.Stages[i].State = "fail"
			}
		}
	})
}

// tryRunPart is a run's part as it stands (what the stream sends).
func (h *handler) tryRunPart(w http.ResponseWriter, r *http.Request) {
	run := h.try.get(r.PathValue("id"))
	if run == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("no such try (tries are kept for 30 minutes, the latest 32)"))
		return
	}
	h.render(w, r, http.StatusOK, "try", "try-run", run.snapshot())
}

// tryEvents streams a run's progress part at each change, then "done".
func (h *handler) tryEvents(w http.ResponseWriter, r *http.Request) {
	run := h.try.get(r.PathValue("id"))
	if run == nil {
		h.fail(w, r, http.StatusNotFound, errors.New("no such try"))
		return
	}
	ctx, rc, done, ok := h.openStream(w, r)
	if !ok {
		return
	}
	defer done()
	sent := -1
	for {
		v, version, changed := run.state()
		if version != sent {
			sent = version
			var b strings.Builder
			if err := h.pages["try"].ExecuteTemplate(&b, "try-progress", v); err != nil {
				h.cfg.Logger.Error("dashboard: render try", "err", err)
				return
			}
			if writeEvent(w, "progress", b.String()) != nil {
				return
			}
		}
		if v.Done {
			_ = writeEvent(w, "done", "done")
			_ = rc.Flush()
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// tryDiffKey is diffKey of a tried attempt.
func tryDiffKey(a fixpoint.Attempt) string {
	if a.Step == fixpoint.StepChunk && a.Chunk != nil {
		return "chunk " + strconv.Itoa(a.Chunk.N)
	}
	return ""
}

// tryGroups gives the cards their steps (an agent turn's tool results
// come with the next turn's request, so every card is done again) and
// groups them; nil when no card is a document step.
func tryGroups(cards []tryCard) []stepGroup {
	in := make([]stepInput, len(cards))
	for i, c := range cards {
		in[i] = stepInput{Kind: c.Step, Chunk: c.Chunk, ToolCalls: c.ToolCalls, Conflicts: c.Conflicts, Request: c.Request,
			NoCall: noCall(string(c.Step), int64(c.TokensIn+c.TokensOut), c.Raw, c.RequestHash)}
	}
	steps := docSteps(in)
	if steps == nil {
		return nil
	}
	rows := make([]stepRow, len(cards))
	for i := range cards {
		c := &cards[i]
		c.Doc = steps[i]
		if !c.Valid && c.Class == "" {
			c.Badge = stepBadge(c.Doc)
		}
		rows[i] = stepRow{Anchor: c.Anchor, No: c.No, Step: c.Doc, Badge: c.Badge, Class: c.Class, Valid: c.Valid, LatencyMS: c.LatencyMS,
			TokensIn: int64(c.TokensIn), TokensOut: int64(c.TokensOut), CostUSD: c.CostUSD, Errors: len(c.Errors)}
		if len(c.Errors) > 0 {
			rows[i].FirstError = c.Errors[0].Message
		}
		rows[i].FirstError = cmp.Or(rows[i].FirstError, c.Doc.toolError())
	}
	return stepGroups(rows)
}

// tryDocument is a document run's document with the grades of its final
// attempt (its valid one, else its last), placed in the chunks its steps
// read.
func tryDocument(doc string, res *fixpoint.Result, cards []tryCard) *documentView {
	var check string
	var grades json.RawMessage
	final := -1
	for i, a := range res.Attempts {
		if final < 0 || a.Valid && !res.Attempts[final].Valid || a.Valid == res.Attempts[final].Valid && a.No > res.Attempts[final].No {
			final = i
		}
	}
	if final >= 0 && res.Attempts[final].Evidence != nil {
		check = "attempt " + strconv.Itoa(res.Attempts[final].No)
		grades, _ = json.Marshal(res.Attempts[final].Evidence)
	}
	var chunks []fixpoint.ChunkRef
	for _, c := range cards {
		if c.Doc != nil && c.Doc.Chunk != nil && !slices.ContainsFunc(chunks, func(r fixpoint.ChunkRef) bool { return r.N == c.Doc.Chunk.N }) {
			chunks = append(chunks, *c.Doc.Chunk)
		}
	}
	return gradedDocument(doc, res.Value, check, grades, chunks, false)
}
