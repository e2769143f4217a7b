package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// toolDescription describes the forced tool in ModeTool.
const toolDescription = "Return the result. The arguments must match the schema."

// schemaNameDefault names the schema / tool when Request.SchemaName is empty.
const schemaNameDefault = "result"

func schemaName(req *fixpoint.Request) string {
	if req.SchemaName != "" {
		return req.SchemaName
	}
	return schemaNameDefault
}

// Causes of an attempt's cancellation, wrapped by a *Error of ClassTimeout
// (test with errors.Is).
var (
	ErrFirstByteTimeout = errors.New("no response headers within FirstByteTimeout")
	ErrIdleTimeout      = errors.New("no body bytes within IdleTimeout (trickling server)")
	ErrTotalTimeout     = errors.New("attempt exceeded TotalTimeout")
)

// Client calls one provider at one base URL with one API key. It is safe for
// concurrent use; each model gets its own Lane.
type Client struct {
	cfg      Config
	row      Provider // cfg.Provider's row of the table
	wire     wireInfo
	base     *url.URL // cfg.BaseURL parsed: endpoints join its path, before its query
	http     *http.Client
	lanes    *Registry
	obs      Observer
	endpoint string
	keyHash  string
	key      []byte      // the API key, redacted from all a server sends back; nil when shorter than redactMinKey
	headers  http.Header // sent on every request

	laneCache   sync.Map // model -> *Lane
	schemaCache sync.Map // schema text -> strictResult
	// anSchemaCache holds anthropicSchema's results by schema text.
	anSchemaCache sync.Map
	bufPool       sync.Pool
}

type strictResult struct {
	schema  json.RawMessage
	dropped []string
	strict  bool
}

// New returns a client for cfg (defaults applied, then validated; errors
// wrap ErrConfig and name the field).
func New(cfg Config) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil { // validate parsed it
		return nil, configErr("BaseURL", "%q: %v", RedactURL(cfg.BaseURL), err)
	}
	row, _ := ProviderNamed(cfg.Provider) // validate checked it
	c := &Client{cfg: cfg, row: row, wire: wires[row.Wire], base: base, http: cfg.HTTPClient, lanes: cfg.Lanes, obs: cfg.Observer, keyHash: KeyHash(cfg.APIKey)}
	if len(cfg.APIKey) >= redactMinKey {
		c.key = []byte(cfg.APIKey)
	}
	if c.obs == nil {
		c.obs = NopObserver{}
	}
	if c.lanes == nil {
		c.lanes = NewRegistry(cfg.Clock, c.obs)
	}
	if c.http == nil {
		d := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		c.http = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: cfg.ConnectTimeout,
			// Keep a connection per concurrent call: a lane at 1,000
			// calls in flight would otherwise redial most of them each round.
			MaxIdleConns:        max(256, cfg.Lane.MaxConcurrency),
			MaxIdleConnsPerHost: max(256, cfg.Lane.MaxConcurrency),
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}}
	}
	c.endpoint = c.url(c.wire.chatPath, nil)
	c.headers = http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
		"User-Agent":   {"fixpoint-llm/1"},
	}
	switch {
	case row.Wire == WireAnthropic:
		c.headers["Anthropic-Version"] = []string{cfg.AnthropicVersion}
		if cfg.APIKey != "" {
			c.headers["X-Api-Key"] = []string{cfg.APIKey}
		}
	case cfg.APIKey != "":
		c.headers["Authorization"] = []string{"Bearer " + cfg.APIKey}
	}
	c.bufPool.New = func() any { return new(bytes.Buffer) }
	return c, nil
}

// url is the URL of path (and query) under the base URL.
func (c *Client) url(path string, query url.Values) string {
	return endpointURL(c.base, path, query)
}

// Config returns the client's configuration with defaults applied.
func (c *Client) Config() Config { return c.cfg }

// Lane returns the lane of model on this client's provider, base URL and key.
func (c *Client) Lane(model string) *Lane {
	if l, ok := c.laneCache.Load(model); ok {
		return l.(*Lane)
	}
	key := LaneKey{Provider: c.cfg.Provider, BaseURL: c.cfg.BaseURL, Model: model, KeyHash: c.keyHash}
	l, err := c.lanes.Get(key, c.cfg.Lane)
	if err != nil {
		panic(fmt.Sprintf("llm: lane config validated in New: %v", err))
	}
	c.laneCache.Store(model, l)
	return l
}

// Registry returns the registry the client takes its lanes from.
func (c *Client) Registry() *Registry { return c.lanes }

// Complete sends req, retrying transient failures (exponential backoff with
// jitter, waiting at least the server's retry hint) within the lane's
// budgets. The error is always a *Error (errors.Is(err, ErrProvider)); both
// the Response and the *Error record the retries made.
func (c *Client) Complete(ctx context.Context, req fixpoint.Request) (*fixpoint.Response, error) {
	body, dropped, perr := c.encode(&req)
	if perr != nil {
		return nil, perr
	}
	lane := c.Lane(req.Model)
	need := estimateDemand(&req, c.cfg.Lane.OutputTokensEstimate)
	maxHint := lane.Config().MaxHintWait

	hb, bo := c.retryBackOff(ctx)
	flex := req.ServiceTier == fixpoint.ServiceTierFlex
	if flex {
		bo = c.flexBackOff(ctx, hb, &flex)
	}
	start := c.cfg.Clock.Now()

	var (
		resp    *fixpoint.Response
		last    *fixpoint.ProviderError
		retries []fixpoint.Retry
		attempt int
		billed  fixpoint.Usage // of 2xx bodies that could not be used
	)
	check := retryCheckOf(ctx)
	op := func() error {
		if attempt > 0 && check != nil {
			if err := check(ctx); err != nil {
				// The retry noted before the wait was never sent.
				retries = retries[:len(retries)-1]
				last.RetriesStopped = err
				return backoff.Permanent(last)
			}
		}
		r, e := c.attempt(ctx, lane, need, body, &req, attempt)
		attempt++
		if e == nil {
			resp = r
			return nil
		}
		billed = addUsage(billed, e.Billed)
		last = e
		hb.hint, hb.capacity = e.RetryAfter, e.Class == fixpoint.ClassCapacity
		if flex && e.Class == fixpoint.ClassCapacity && c.cfg.FlexFallbackAfter >= 0 &&
			c.cfg.Clock.Now().Sub(start) >= c.cfg.FlexFallbackAfter {
			// The flex tier has had no room for FlexFallbackAfter: the
			// call goes again on the default tier, at the default price.
			req.ServiceTier = ""
			var ferr *fixpoint.ProviderError
			if body, dropped, ferr = c.encode(&req); ferr != nil {
				return backoff.Permanent(ferr)
			}
			flex = false
		}
		if !e.Class.Retryable() || e.Replied() {
			// A reply that came and could not be used was billed: asking
			// again inside the call would pay for it again, unseen. It is
			// an attempt of its job, which the caller bounds.
			return backoff.Permanent(e)
		}
		if e.RetryAfter > maxHint {
			// Longer than a worker should be held: hand it to the caller.
			e.HintOverCap = true
			return backoff.Permanent(e)
		}
		return e
	}
	notify := func(_ error, d time.Duration) {
		retries = append(retries, fixpoint.Retry{Class: last.Class, Status: last.Status, Wait: d})
	}
	err := backoff.RetryNotifyWithTimer(op, bo, notify, &backoffTimer{clock: c.cfg.Clock})
	if err == nil {
		resp.Retries = retries
		resp.DroppedKeywords = dropped
		resp.Usage = addUsage(resp.Usage, billed) // the call's retries were paid for too
		return resp, nil
	}
	last = retriesEnded(ctx, "", last)
	last.Retries = retries
	last.Billed = billed
	return nil, last
}

func addUsage(a, b fixpoint.Usage) fixpoint.Usage {
	return fixpoint.Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CachedInputTokens: a.CachedInputTokens + b.CachedInputTokens, CacheWriteTokens: a.CacheWriteTokens + b.CacheWriteTokens}
}

type retryCheckKey struct{}

type sendHookKey struct{}

// WithSendHook returns a context whose calls (Complete) call hook as each
// request goes out, after the wait for its lane's slot and budget, with
// the time it is sent: a driver keeping a journal of its calls writes a
// call down then, not while it waits (a kill -9 found calls that had
// waited for a --rpm budget recorded as sent). hook runs on the calling
// goroutine.
func WithSendHook(ctx context.Context, hook func(sent time.Time)) context.Context {
	return context.WithValue(ctx, sendHookKey{}, hook)
}

// WithRetryCheck returns a context whose calls (Complete) ask check before
// each transport retry: when it returns an error, no further request is
// sent and the call ends with its last failure, RetriesStopped set to that
// error. A worker uses it to stop retrying for a job that was cancelled or
// moved elsewhere while its call was failing. check runs on the calling
// goroutine; a wait already begun is waited out first.
func WithRetryCheck(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, retryCheckKey{}, check)
}

func retryCheckOf(ctx context.Context) func(context.Context) error {
	check, _ := ctx.Value(retryCheckKey{}).(func(context.Context) error)
	return check
}

// retryBackOff is the transport retry policy of one call: Retry's
// exponential backoff on the client's clock, raised to the server's hint
// (hb.hint, set by the caller after each failure), at most MaxRetries, ended
// with ctx.
func (c *Client) retryBackOff(ctx context.Context) (*hintBackOff, backoff.BackOff) {
	rc := c.cfg.Retry
	exp := &backoff.ExponentialBackOff{
		InitialInterval:     rc.InitialInterval,
		RandomizationFactor: rc.RandomizationFactor,
		Multiplier:          rc.Multiplier,
		MaxInterval:         rc.MaxInterval,
		MaxElapsedTime:      rc.MaxElapsedTime,
		Stop:                backoff.Stop,
		Clock:               c.cfg.Clock,
	}
	hb := &hintBackOff{exp: exp, maxElapsed: rc.MaxElapsedTime}
	return hb, backoff.WithContext(backoff.WithMaxRetries(hb, uint64(rc.MaxRetries)), ctx)
}

// Capacity retries of a flex call (flexBackOff).
const (
	// FlexRetryInitialInterval is the first wait after a capacity 429.
	FlexRetryInitialInterval = time.Second
	// FlexRetryMaxInterval caps the wait between capacity retries: the
	// tier's capacity comes back without notice, and a call that waits
	// minutes between tries misses it.
	FlexRetryMaxInterval = time.Minute
)

// flexBackOff is the retry policy of a flex call: after a capacity 429
// (ClassCapacity) while *flex holds, jittered exponential backoff from
// FlexRetryInitialInterval to FlexRetryMaxInterval with no bound on the
// retries, raised to the server's hint; after any other failure, or once
// the call fell back to the default tier, normal's policy (hb's, bounded
// by Retry.MaxRetries). Capacity retries are bounded by the fallback
// (Config.FlexFallbackAfter) or, with none, by ctx.
func (c *Client) flexBackOff(ctx context.Context, hb *hintBackOff, flex *bool) backoff.BackOff {
	rc := c.cfg.Retry
	capExp := &backoff.ExponentialBackOff{
		InitialInterval:     FlexRetryInitialInterval,
		RandomizationFactor: rc.RandomizationFactor,
		Multiplier:          RetryMultiplierDefault,
		MaxInterval:         FlexRetryMaxInterval,
		Stop:                backoff.Stop,
		Clock:               c.cfg.Clock,
	}
	capExp.Reset()
	normal := backoff.WithMaxRetries(hb, uint64(rc.MaxRetries))
	return backoff.WithContext(&tierBackOff{normal: normal, capacity: capExp, hb: hb, flex: flex, wasFlex: *flex}, ctx)
}

// tierBackOff picks the capacity policy or the normal one by the failure
// just seen (hb.capacity).
type tierBackOff struct {
	normal   backoff.BackOff
	capacity *backoff.ExponentialBackOff
	hb       *hintBackOff
	flex     *bool
	// wasFlex is *flex at the last failure: a change means the call has
	// just fallen back, and goes again at once.
	wasFlex bool
}

func (t *tierBackOff) Reset() { t.normal.Reset(); t.capacity.Reset() }

func (t *tierBackOff) NextBackOff() time.Duration {
	if t.wasFlex && !*t.flex {
		t.wasFlex = false
		return 0
	}
	if *t.flex && t.hb.capacity {
		return max(t.capacity.NextBackOff(), t.hb.hint)
	}
	return t.normal.NextBackOff()
}

// retriesEnded is the error of a retried call that gave up: last, unless
// the context ended while waiting to retry (or before any try), then a
// timeout naming last. what prefixes the message ("" for a completion).
func retriesEnded(ctx context.Context, what string, last *fixpoint.ProviderError) *fixpoint.ProviderError {
	if last != nil && (ctx.Err() == nil || last.Class == fixpoint.ClassTimeout || last.Class == fixpoint.ClassStopped) {
		return last
	}
	msg := "context done before the call could be retried"
	if what != "" {
		msg = what + ": " + msg
	}
	e := &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: msg, Err: context.Cause(ctx)}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		e.Class = fixpoint.ClassStopped
	}
	if last != nil {
		e.Message += " (last failure: " + last.Error() + ")"
		e.Status = last.Status
	}
	return e
}

// hintBackOff is the exponential backoff, raised to the server's retry hint
// of the last failure, stopping when the wait would overrun maxElapsed.
type hintBackOff struct {
	exp        *backoff.ExponentialBackOff
	maxElapsed time.Duration
	hint       time.Duration
	// capacity: the last failure was a capacity 429 (see tierBackOff).
	capacity bool
}

func (h *hintBackOff) Reset() { h.exp.Reset(); h.hint = 0 }

func (h *hintBackOff) NextBackOff() time.Duration {
	d := h.exp.NextBackOff()
	if d == backoff.Stop {
		return backoff.Stop
	}
	d = max(d, h.hint)
	if h.maxElapsed > 0 && h.exp.GetElapsedTime()+d > h.maxElapsed {
		return backoff.Stop
	}
	return d
}

// backoffTimer adapts Clock to backoff.Timer.
type backoffTimer struct {
	clock Clock
	t     Timer
}

func (b *backoffTimer) Start(d time.Duration) {
	if b.t != nil {
		b.t.Stop()
	}
	b.t = b.clock.NewTimer(d)
}

func (b *backoffTimer) Stop() {
	if b.t != nil {
		b.t.Stop()
	}
}

func (b *backoffTimer) C() <-chan time.Time { return b.t.C() }

// estimateDemand is the tokens a call is charged before it is made:
// prompt bytes / 4 in, the output cap (or the configured estimate when
// none is set) out. Their sum is the TPM charge.
func estimateDemand(req *fixpoint.Request, outputEstimate int) demand {
	out := req.MaxTokens
	if out <= 0 {
		out = outputEstimate
	}
	return demand{input: fixpoint.EstimateUsage(req, 0).InputTokens, output: out}
}

// encode validates req and builds the provider body once for all attempts.
func (c *Client) encode(req *fixpoint.Request) ([]byte, []string, *fixpoint.ProviderError) {
	bad := func(format string, args ...any) *fixpoint.ProviderError {
		return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: fmt.Sprintf(format, args...)}
	}
	if req.Model == "" {
		return nil, nil, bad("request: model is required")
	}
	switch req.Mode {
	case "", fixpoint.ModePrompt:
	case fixpoint.ModeJSONSchema, fixpoint.ModeTool:
		if len(bytes.TrimSpace(req.Schema)) == 0 {
			return nil, nil, bad("request: mode %s needs a schema", req.Mode)
		}
		if !json.Valid(req.Schema) {
			return nil, nil, bad("request: schema is not valid JSON")
		}
	default:
		return nil, nil, bad("request: unknown mode %q", req.Mode)
	}
	if why := checkTools(req); why != "" {
		return nil, nil, bad("request: %s", why)
	}
	switch req.ServiceTier {
	case "":
	case fixpoint.ServiceTierFlex:
		if !c.row.Has(DeliveryFlex) {
			return nil, nil, bad("request: service tier flex: provider %s has no flex tier", c.row.Name)
		}
	default:
		return nil, nil, bad("request: unknown service tier %q (want flex or none)", req.ServiceTier)
	}
	var (
		body    []byte
		dropped []string
		err     error
	)
	switch c.row.Wire {
	case WireOpenAIChat:
		schema, strict := req.Schema, false
		if req.Mode == fixpoint.ModeJSONSchema || req.Mode == fixpoint.ModeTool {
			sr, serr := c.strict(req.Schema)
			if serr != nil {
				return nil, nil, bad("request: %v", serr)
			}
			schema, strict, dropped = sr.schema, sr.strict, sr.dropped
		}
		body, err = c.encodeOpenAI(req, schema, strict)
	case WireAnthropic:
		body, dropped, err = c.encodeAnthropic(req)
	case WireOllama:
		body, err = c.encodeOllama(req)
	}
	if err != nil {
		return nil, nil, bad("encode request: %v", err)
	}
	return body, dropped, nil
}

func (c *Client) strict(schema json.RawMessage) (strictResult, error) {
	if v, ok := c.schemaCache.Load(string(schema)); ok {
		return v.(strictResult), nil
	}
	s, dropped, strict, err := strictSchema(schema)
	if err != nil {
		return strictResult{}, err
	}
	sr := strictResult{schema: s, dropped: dropped, strict: strict}
	c.schemaCache.Store(string(schema), sr)
	return sr, nil
}

// attempt makes one HTTP call inside a lane permit.
func (c *Client) attempt(ctx context.Context, lane *Lane, need demand, body []byte, req *fixpoint.Request, n int) (*fixpoint.Response, *fixpoint.ProviderError) {
	p, err := lane.acquire(ctx, need.input+need.output)
	if err != nil {
		var e *fixpoint.ProviderError
		if errors.As(err, &e) {
			return nil, e
		}
		class := fixpoint.ClassTimeout
		if errors.Is(err, context.Canceled) {
			class = fixpoint.ClassStopped
		}
		return nil, &fixpoint.ProviderError{Class: class, Message: "wait for lane " + lane.key.Model + ": " + err.Error(), Err: err, NotSent: n == 0}
	}
	start := time.Now()
	if hook, _ := ctx.Value(sendHookKey{}).(func(time.Time)); hook != nil {
		hook(start)
	}
	resp, e := c.do(ctx, body, req, need)
	latency := time.Since(start)
	if e != nil {
		c.redactError(e)
		p.done(e.Class, e.RetryAfter, e.Billed.InputTokens+e.Billed.OutputTokens, e)
		c.obs.OnCall(CallEvent{Lane: lane.key, Class: e.Class, Status: e.Status, Latency: latency, Attempt: n})
		return nil, e
	}
	c.redactResponse(resp)
	resp.Latency, resp.SentAt = latency, start
	p.done("", 0, resp.Usage.InputTokens+resp.Usage.OutputTokens, nil)
	lane.observeRemaining(resp.RateLimit)
	c.obs.OnCall(CallEvent{Lane: lane.key, Status: resp.Status, Latency: latency, Attempt: n})
	return resp, nil
}

// redacted replaces the API key wherever a server echoes it.
const redacted = "[redacted]"

// redactMinKey is the shortest key that is redacted. Shorter ones are the
// placeholders local servers accept ("EMPTY", "ollama"), not secrets, and
// replacing them would mangle ordinary text and JSON.
const redactMinKey = 8

func (c *Client) redact(s string) string {
	if c.key == nil || !strings.Contains(s, c.cfg.APIKey) {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.APIKey, redacted)
}

// redactBody replaces the API key in a body as read, before anything is
// decoded from it or cut out of it: a cut first (a snippet, the 32 bytes a
// JSON error quotes) could keep part of a key that straddles it, which no
// exact match finds afterwards. A key is long and random, so it only ever
// occurs inside a JSON string, where the replacement keeps the JSON valid.
func (c *Client) redactBody(b []byte) []byte {
	if c.key == nil || !bytes.Contains(b, c.key) {
		return b
	}
	return bytes.ReplaceAll(b, c.key, []byte(redacted))
}

// redactHeaders redacts the values of stored rate-limit headers, in place.
func (c *Client) redactHeaders(m map[string]string) {
	for k, v := range m {
		m[k] = c.redact(v)
	}
}

// redactError redacts every text field of e. The body it was built from
// was redacted as read; this also catches a key the body held in escaped
// form (decoded into Message) and one sent back in a header.
func (c *Client) redactError(e *fixpoint.ProviderError) {
	if c.key == nil {
		return
	}
	e.Message, e.Code, e.RequestID = c.redact(e.Message), c.redact(e.Code), c.redact(e.RequestID)
	c.redactHeaders(e.RateLimit)
}

// redactResponse does for a response what redactError does for an error.
func (c *Client) redactResponse(r *fixpoint.Response) {
	if c.key == nil {
		return
	}
	r.Text, r.Refusal, r.Model, r.RequestID = c.redact(r.Text), c.redact(r.Refusal), c.redact(r.Model), c.redact(r.RequestID)
	for i := range r.ToolCalls {
		tc := &r.ToolCalls[i]
		tc.ID, tc.Name, tc.Arguments = c.redact(tc.ID), c.redact(tc.Name), c.redact(tc.Arguments)
	}
	c.redactHeaders(r.RateLimit)
}

// do sends body and reads the reply under the attempt's timeouts.
func (c *Client) do(ctx context.Context, body []byte, req *fixpoint.Request, need demand) (*fixpoint.Response, *fixpoint.ProviderError) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	total, firstByte := c.cfg.TotalTimeout, c.cfg.FirstByteTimeout
	if req.ServiceTier == fixpoint.ServiceTierFlex {
		total, firstByte = c.cfg.FlexTimeout, c.cfg.FlexTimeout
	}
	tctx, tcancel := context.WithTimeoutCause(actx, total, ErrTotalTimeout)
	defer tcancel()
	var reading atomic.Bool // false: waiting for headers; true: reading the body
	watchdog := time.AfterFunc(firstByte, func() {
		if reading.Load() {
			cancel(ErrIdleTimeout)
		} else {
			cancel(ErrFirstByteTimeout)
		}
	})
	defer watchdog.Stop()

	hreq, err := http.NewRequestWithContext(tctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "build request: " + err.Error(), Err: err}
	}
	for k, v := range c.headers {
		hreq.Header[k] = v // shared, never modified
	}

	hresp, err := c.http.Do(hreq)
	if err != nil {
		return nil, transportError(tctx, "send request", err)
	}
	defer hresp.Body.Close()
	reading.Store(true)
	watchdog.Reset(c.cfg.IdleTimeout)

	ir := idleReader{r: hresp.Body, t: watchdog, d: c.cfg.IdleTimeout}
	if hresp.ContentLength > c.cfg.MaxBodyBytes {
		// Read only the head (and a key's length more, so that a key across
		// its end is redacted whole), not the megabytes after it.
		head := make([]byte, headBytes+len(c.key))
		n, _ := io.ReadFull(ir, head)
		return nil, c.tooLarge(hresp, hresp.ContentLength, head[:n], req)
	}
	buf := c.bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			c.bufPool.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(io.LimitReader(ir, c.cfg.MaxBodyBytes+1)); err != nil {
		e := transportError(tctx, "read response body", err)
		e.Status = hresp.StatusCode
		return nil, e
	}
	watchdog.Stop()
	if int64(buf.Len()) > c.cfg.MaxBodyBytes {
		return nil, c.tooLarge(hresp, -1, buf.Bytes(), req)
	}
	data := c.redactBody(buf.Bytes())
	now := c.cfg.Clock.Now()
	reqID := c.requestID(hresp.Header)

	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		pe := parseProviderError(data)
		if reqID == "" {
			reqID = pe.ReqID
		}
		class, hint := classify(c.row.Wire, hresp.StatusCode, hresp.Header, pe, now, need)
		msg := pe.Message
		if msg == "" {
			msg = http.StatusText(hresp.StatusCode)
		}
		return nil, &fixpoint.ProviderError{Class: class, Status: hresp.StatusCode, Message: msg, Code: pe.Code,
			RequestID: reqID, RetryAfter: hint, RateLimit: rateLimitHeaders(hresp.Header)}
	}

	out := &fixpoint.Response{Status: hresp.StatusCode, RequestID: reqID, RateLimit: rateLimitHeaders(hresp.Header)}
	switch c.row.Wire {
	case WireOpenAIChat:
		err = decodeOpenAI(data, req, out)
	case WireAnthropic:
		err = decodeAnthropic(data, req, out)
	case WireOllama:
		err = decodeOllama(data, req, out)
	}
	if err != nil {
		return nil, c.unreadable(hresp, reqID, data, err, req)
	}
	out.UsageAnomaly = plausibleUsage(&out.Usage, out.UsageAnomaly, req, int64(len(out.Text)))
	return out, nil
}

// unreadable is the error of a 2xx body that could not be decoded (HTML
// from a proxy, a body cut short, JSON of another shape): the reply was
// made and billed, so it is charged (billedUsage) and not asked for again
// inside the call (Replied).
func (c *Client) unreadable(hresp *http.Response, reqID string, data []byte, err error, req *fixpoint.Request) *fixpoint.ProviderError {
	e := &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: hresp.StatusCode, RequestID: reqID,
		RateLimit: rateLimitHeaders(hresp.Header), Message: err.Error() + ": " + snippet(data), Err: err,
		Size: int64(len(data)), Head: cutUTF8(data, headBytes)}
	var note string
	e.Billed, note = billedUsage(c.row.Wire, data, req)
	e.Message += "; " + note
	return e
}

// plausibleUsage replaces usage that cannot be what req used (see
// fixpoint.Usage.Anomaly), or whose counts could not be read (unread names
// them), by an estimate (fixpoint.EstimateUsage), at the measure the
// lane's budgets use. It returns what the provider reported, for the
// record, or "" when the usage stands. Every reader of a reply's usage
// (the lane's token budget, the attempt's cost, a batch's spend cap, the
// metrics) gets the estimate: -99999999 tokens credited a cap, 10^18
// overflowed the ledger and held the token budget's limiter for good, and
// millions of tokens for a short prompt spent a cap several times over.
func plausibleUsage(u *fixpoint.Usage, unread string, req *fixpoint.Request, replyBytes int64) string {
	why := unread
	if why == "" {
		why = u.Anomaly(req)
	}
	if why == "" {
		return ""
	}
	est := fixpoint.EstimateUsage(req, replyBytes)
	note := fmt.Sprintf("usage anomaly: the provider reported input %d, output %d, cached %d, cache write %d tokens (%s); charged by estimate: %d input, %d output",
		u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteTokens, why, est.InputTokens, est.OutputTokens)
	*u = est
	return note
}

// billedUsage is what a 2xx body that could not be decoded as a whole is
// charged: the usage it reports when that can be read and be true, else
// an estimate from the request and the body's length (a body with no
// usage, or none to read, was billed all the same). note says which.
func billedUsage(wire Wire, data []byte, req *fixpoint.Request) (fixpoint.Usage, string) {
	var u fixpoint.Usage
	unread := "no usage could be read"
	switch wire {
	case WireOpenAIChat:
		var w struct {
			Usage *oaUsage `json:"usage"`
		}
		if json.Unmarshal(data, &w) == nil && w.Usage != nil {
			u, unread = w.Usage.usage()
		}
	case WireAnthropic:
		var w struct {
			Usage *anUsage `json:"usage"`
		}
		if json.Unmarshal(data, &w) == nil && w.Usage != nil {
			u, unread = w.Usage.usage()
		}
	case WireOllama:
		var w olResponse
		if json.Unmarshal(data, &w) == nil && w.EvalCount.n+w.PromptEvalCount.n > 0 {
			u, unread = w.usage()
		}
	}
	if unread == "" && u.InputTokens+u.OutputTokens == 0 {
		unread = "the reported usage is zero"
	}
	if note := plausibleUsage(&u, unread, req, int64(len(data))); note != "" {
		return u, note
	}
	return u, fmt.Sprintf("charged as reported: %d input, %d output tokens", u.InputTokens, u.OutputTokens)
}

// tooLarge is the error of a body over MaxBodyBytes: size is its
// Content-Length, or -1 when the server sent none; head is its first bytes
// as read. A 2xx was made and billed (charged by estimate: its usage is
// past the cap, unread), and asking again would get the same reply, so it
// is ClassTooLarge (permanent); any other status keeps the class it gives
// (a 503 stays retryable). req is nil for a batch API's own bodies, which
// are not billed.
func (c *Client) tooLarge(hresp *http.Response, size int64, head []byte, req *fixpoint.Request) *fixpoint.ProviderError {
	sizeText := fmt.Sprintf("%d bytes", size)
	if size < 0 {
		size = c.cfg.MaxBodyBytes + 1
		sizeText = fmt.Sprintf("more than %d bytes", c.cfg.MaxBodyBytes)
	}
	if n := headBytes + len(c.key); len(head) > n {
		head = head[:n] // what the head can hold, and a key across its end
	}
	e := &fixpoint.ProviderError{Status: hresp.StatusCode, RequestID: c.requestID(hresp.Header), RateLimit: rateLimitHeaders(hresp.Header),
		Size: size, Head: cutUTF8(c.redactBody(head), headBytes)}
	msg := fmt.Sprintf("response body is %s, over the MaxBodyBytes cap of %d bytes", sizeText, c.cfg.MaxBodyBytes)
	if e.Replied() {
		e.Class = fixpoint.ClassTooLarge
		e.Message = msg + "; the reply was made (and billed), so it is not asked for again"
		if req != nil {
			e.Billed = fixpoint.EstimateUsage(req, size)
			e.Message += fmt.Sprintf("; charged by estimate: %d input, %d output tokens", e.Billed.InputTokens, e.Billed.OutputTokens)
		}
		return e
	}
	var need demand
	if req != nil {
		need = estimateDemand(req, c.cfg.Lane.OutputTokensEstimate)
	}
	e.Class, e.RetryAfter = classify(c.row.Wire, hresp.StatusCode, hresp.Header, providerError{}, c.cfg.Clock.Now(), need)
	e.Message = http.StatusText(hresp.StatusCode) + ": " + msg
	return e
}

func (c *Client) requestID(h http.Header) string {
	return h.Get(c.wire.requestIDHeader)
}

// headBytes is the most bytes of an oversized body kept in Error.Head.
const headBytes = 1 << 10

// snippet is the start of a body for an error message: 200 bytes at most,
// valid UTF-8. Redact b first (see redactBody).
func snippet(b []byte) string {
	const n = 200
	if len(b) > n {
		return cutUTF8(b, n) + "..."
	}
	return cutUTF8(b, n)
}

// cutUTF8 returns at most the first n bytes of b as valid UTF-8: a rune
// the cut would split is left out, invalid bytes become U+FFFD.
func cutUTF8(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
			if utf8.RuneStart(b[len(b)-k]) {
				if !utf8.FullRune(b[len(b)-k:]) {
					b = b[:len(b)-k]
				}
				break
			}
		}
	}
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if len(s) > n { // replacements are longer than the bytes they replace
			return cutUTF8([]byte(s), n)
		}
	}
	return s
}

// idleReader restarts the watchdog after every read, so a server that
// trickles bytes slower than the idle timeout is cut off.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (ir idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.t.Reset(ir.d)
	}
	return n, err
}

// transportError classifies a failure to send or read: our timeouts and
// the caller's deadline are ClassTimeout, the rest ClassNetwork.
func transportError(ctx context.Context, op string, err error) *fixpoint.ProviderError {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		ue.URL = RedactURL(ue.URL) // it is quoted in the message
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrFirstByteTimeout), errors.Is(cause, ErrIdleTimeout), errors.Is(cause, ErrTotalTimeout):
		return &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: op + ": " + cause.Error(), Err: cause}
	case errors.Is(cause, context.Canceled):
		return &fixpoint.ProviderError{Class: fixpoint.ClassStopped, Message: op + ": the caller stopped waiting (" + cause.Error() + ")", Err: cause}
	case cause != nil:
		return &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: op + ": " + cause.Error(), Err: cause}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: op + ": " + err.Error(), Err: err}
	}
	return &fixpoint.ProviderError{Class: fixpoint.ClassNetwork, Message: op + ": " + err.Error(), Err: err}
}

// parseProviderError reads the error bodies of all three providers:
// {"error": {"message", "type", "code"}} (OpenAI, Anthropic, with an
// optional top-level request_id), {"error": "text"} (Ollama), and
// {"message", "type", "code"} (vLLM and other compatible servers).
func parseProviderError(body []byte) providerError {
	var w struct {
		Error     json.RawMessage `json:"error"`
		Message   string          `json:"message"`
		Type      string          `json:"type"`
		Code      json.RawMessage `json:"code"`
		RequestID string          `json:"request_id"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return providerError{Message: strings.TrimSpace(snippet(body))}
	}
	pe := providerError{Message: w.Message, Type: w.Type, Code: rawString(w.Code), ReqID: w.RequestID}
	if len(w.Error) > 0 {
		var s string
		if json.Unmarshal(w.Error, &s) == nil {
			pe.Message = s
		} else {
			var o struct {
				Message string          `json:"message"`
				Type    string          `json:"type"`
				Code    json.RawMessage `json:"code"`
			}
			if json.Unmarshal(w.Error, &o) == nil {
				pe.Message, pe.Type, pe.Code = o.Message, o.Type, rawString(o.Code)
			}
		}
	}
	if pe.Code == "" {
		pe.Code = pe.Type
	}
	return pe
}

// rawString renders a JSON string or number as text; null as "".
func rawString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// normalizeRefusal makes a refusal always carry a message and no answer.
func normalizeRefusal(out *fixpoint.Response) {
	if out.FinishReason != fixpoint.FinishRefusal {
		return
	}
	out.Text, out.ToolCalls = "", nil
	if out.Refusal == "" {
		out.Refusal = "refused"
	}
}
