package sim

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
)

// maxRequestBytes caps a request body.
const maxRequestBytes = 32 << 20

// route maps a path to a wire format. Like the providers' own routers it
// accepts the paths with or without the /v1 prefix.
func route(path string) string {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return "openai"
	case strings.HasSuffix(path, "/api/chat"):
		return "ollama"
	case strings.HasSuffix(path, "/messages"):
		return "anthropic"
	}
	return ""
}

func providerIndex(p string) int {
	switch p {
	case "anthropic":
		return 1
	case "ollama":
		return 2
	}
	return 0
}

// call is one request in flight.
type call struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	n        int64
	provider string
	reqID    string
	now      time.Time
	// batch is set for a request of a batch: no think time, and the
	// usage says so where the provider does (Anthropic's service_tier).
	batch bool
}

// ServeHTTP answers one call. See the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.calls.Add(1)
	c := &call{s: s, w: w, r: r, n: n, provider: route(r.URL.Path), now: s.cfg.Now()}
	c.reqID = "req_" + idFrom(strconv.FormatUint(s.cfg.Seed, 10), strconv.FormatInt(n, 10))
	if c.provider == "" {
		s.serveOther(c)
		return
	}
	s.stats.provider[providerIndex(c.provider)].Add(1)
	req, script, ok := c.request()
	if !ok {
		return
	}
	pTok := tokens(promptBytes(req))
	lr, ok := c.admit(req, pTok)
	if !ok {
		return
	}
	if req.flex && s.cfg.FlexBusy > 0 && s.rng("flex", strconv.FormatInt(n, 10)).Float64() < s.cfg.FlexBusy {
		s.stats.event(EventCapacity)
		c.fail(&apiError{status: 429, typ: "resource_unavailable", code: "resource_unavailable",
			msg: "Resource Unavailable: flex processing capacity is not available right now. Please retry later or use the default service tier."}, nil)
		return
	}
	fault := s.transportFault(n)
	if c.transportFault(fault, req, pTok, lr) {
		return
	}
	out := c.reply(req, pTok, s.cache(c.provider, req, c.now, true), lr, fault == EventHuge)
	c.send(out, fault, script)
}

// serveOther serves a path that is not a chat endpoint: a batch API's, or
// none (404).
func (s *Server) serveOther(c *call) {
	r := c.r
	br, ok := parseBatchRoute(r.URL.Path)
	if !ok {
		c.provider = "openai"
		c.fail(&apiError{status: 404, typ: "invalid_request_error", msg: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}, nil)
		return
	}
	bc := *c // a copy, so that the chat path's call stays on the stack
	if br.kind == "models" && r.Header.Get("Anthropic-Version") != "" {
		br.provider = "anthropic"
	}
	bc.provider = br.provider
	if s.cfg.APIKey != "" && apiKey(bc.provider, r) != s.cfg.APIKey {
		s.stats.event(EventAuth)
		bc.fail(statusError(bc.provider, http.StatusUnauthorized), nil)
		return
	}
	s.serveBatch(&bc, br)
}

// request reads and parses a chat request, answering it when it is
// refused or scripted: ok is false then.
func (c *call) request() (req *chatReq, script *ScriptedReply, ok bool) {
	s, r := c.s, c.r
	if r.Method != http.MethodPost {
		c.fail(&apiError{status: 405, typ: "invalid_request_error", msg: "method not allowed"}, nil)
		return nil, nil, false
	}
	body, err := readBody(r, maxRequestBytes)
	if err != nil {
		c.fail(badRequest("read request body: %v", err), nil)
		return nil, nil, false
	}
	if s.cfg.Script != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		script = s.cfg.Script(int(c.n), r)
		if script != nil && c.scripted(script) {
			return nil, nil, false
		}
	}
	var aerr *apiError
	switch c.provider {
	case "anthropic":
		req, aerr = parseAnthropic(body, &s.systems)
	case "ollama":
		req, aerr = parseOllama(body)
	default:
		req, aerr = parseOpenAI(body, &s.systems)
	}
	if aerr != nil {
		c.fail(aerr, nil)
		return nil, nil, false
	}
	if s.cfg.APIKey != "" && c.provider != "ollama" && apiKey(c.provider, r) != s.cfg.APIKey {
		s.stats.event(EventAuth)
		c.fail(statusError(c.provider, http.StatusUnauthorized), nil)
		return nil, nil, false
	}
	return req, script, true
}

// admit applies the quota and the rate limits to a request of pTok prompt
// tokens, answering it when it is refused: ok is false then.
func (c *call) admit(req *chatReq, pTok int) (lr limitResult, ok bool) {
	s := c.s
	if s.cfg.QuotaExhausted {
		s.stats.event(EventQuota)
		c.quota()
		return lr, false
	}
	if s.limits.enabled() {
		lr = s.limits.take(req.model+"\x00"+c.r.Header.Get("Authorization")+c.r.Header.Get("X-Api-Key"), pTok+req.maxTokens)
		if !lr.ok {
			s.stats.event(EventRateLimited)
			c.rateLimited(req.model, lr, pTok+req.maxTokens)
			return lr, false
		}
	}
	return lr, true
}

// transportFault answers the call with a transport fault drawn for it (a
// status, an injected 429, a hang, a reset) and reports whether it did.
func (c *call) transportFault(fault string, req *chatReq, pTok int, lr limitResult) bool {
	s := c.s
	switch fault {
	case EventStatus500, EventStatus503, EventStatus529:
		s.stats.event(fault)
		code, _ := strconv.Atoi(strings.TrimPrefix(fault, "status_"))
		c.fail(statusError(c.provider, code), nil)
	case EventInjected429:
		s.stats.event(fault)
		c.rateLimited(req.model, limitResult{which: "requests", retryAfter: s.cfg.RetryAfter, reqReset: s.cfg.RetryAfter,
			tokRemain: lr.tokRemain, tokReset: lr.tokReset}, pTok+req.maxTokens)
	case EventHang:
		s.stats.event(fault)
		s.stats.statusCode(0)
		c.hang()
	case EventReset:
		s.stats.event(fault)
		s.stats.statusCode(0)
		c.reset()
	default:
		return false
	}
	return true
}

// send writes a reply after its thinking time, cut in half by a malformed
// fault, and counts it.
func (c *call) send(out replyOut, fault string, script *ScriptedReply) {
	s := c.s
	body, hdr, p, d := out.body, out.hdr, out.plan, out.think
	if fault == EventMalformed {
		body = body[:len(body)/2]
	}
	if fault != "" {
		s.stats.event(fault)
	}
	if script != nil {
		d += script.Delay
	}
	if !sleep(c.r.Context(), s.done, d) {
		s.stats.statusCode(0)
		c.drop()
		return
	}
	s.stats.replies.Add(1)
	if p.turn > 0 {
		s.stats.corrections.Add(1)
	}
	if p.patch {
		s.stats.patches.Add(1)
	}
	for _, k := range faultSet(p) {
		s.stats.faults[faultIndex(k)].Add(1)
	}
	c.write(200, hdr, body, fault == EventTrickle || script != nil && script.Trickle)
}

// faultSet lists the fault kinds in a reply, once each.
func faultSet(p plan) []FaultKind {
	var ks []FaultKind
	if p.outcome != "" {
		ks = append(ks, p.outcome)
	}
	ks = append(ks, p.formats...)
	for _, f := range p.faults {
		seen := false
		for _, k := range ks {
			if k == f.Kind {
				seen = true
				break
			}
		}
		if !seen {
			ks = append(ks, f.Kind)
		}
	}
	return ks
}

func faultHeader(p plan) string {
	var parts []string
	if p.outcome != "" {
		parts = append(parts, string(p.outcome))
	}
	for _, k := range p.formats {
		parts = append(parts, string(k))
	}
	for _, f := range p.faults {
		parts = append(parts, string(f.Kind)+":"+f.Pointer)
	}
	return strings.Join(parts, ",")
}

// transportFault draws call n's transport fault ("" for none).
func (s *Server) transportFault(n int64) string {
	t := s.cfg.Transport
	if t.sum() == 0 {
		return ""
	}
	u := s.rng("transport", strconv.FormatInt(n, 10)).Float64()
	for _, e := range []struct {
		p    float64
		name string
	}{
		{t.Status500, EventStatus500}, {t.Status503, EventStatus503}, {t.Status529, EventStatus529},
		{t.RateLimited, EventInjected429}, {t.Hang, EventHang}, {t.Trickle, EventTrickle},
		{t.Reset, EventReset}, {t.Malformed, EventMalformed}, {t.Huge, EventHuge},
	} {
		if u < e.p {
			return e.name
		}
		u -= e.p
	}
	return ""
}

// thinkTime is the simulated latency of call n with cTok completion tokens.
func (s *Server) thinkTime(n int64, cTok int) time.Duration {
	if s.cfg.Latency == (Latency{Dist: s.cfg.Latency.Dist}) {
		return 0
	}
	return s.cfg.Latency.delay(cTok, s.rng("latency", strconv.FormatInt(n, 10)))
}

// replyOut is a rendered answer.
type replyOut struct {
	body  []byte
	hdr   http.Header
	plan  plan
	think time.Duration // to wait before sending it
	cTok  int           // completion tokens
}

// reply renders the model's answer in the provider's shape, with the
// prompt cache's part of the usage.
func (c *call) reply(req *chatReq, pTok int, cu cacheUse, lr limitResult, huge bool) replyOut {
	if req.agent != nil {
		return c.agentReply(req, pTok, cu, lr, huge)
	}
	s := c.s
	p := s.model(req)
	objectChannel := req.toolName != "" && c.provider != "openai" && p.isJSON
	if objectChannel && p.outcome != FaultTruncation {
		p.formats = nil
		p.text = string(encode(p.value, encOpts{}))
	}
	if req.maxTokens > 0 && tokens(len(p.text)) > req.maxTokens && p.outcome != FaultRefusal {
		p.text = truncateUTF8(p.text, req.maxTokens*4)
		p.outcome, p.value = FaultTruncation, nil
	}
	pad := ""
	if huge {
		pad = hugePad(s.cfg.HugeBytes)
	}
	outText := p.text
	if pad != "" && !objectChannel {
		outText += "\n\n" + pad
	}
	cTok := tokens(len(outText))
	if objectChannel {
		cTok = tokens(len(p.text) + len(pad))
	}
	if p.outcome == FaultEmpty {
		cTok = 0
	}
	think := time.Duration(0)
	if !c.batch {
		think = s.thinkTime(c.n, cTok)
		if req.flex {
			think += s.cfg.FlexLatency
		}
	}
	msgID := idFrom("msg", p.key, strconv.Itoa(p.turn), p.text)
	r := replyParts{plan: p, text: outText, pad: pad, object: objectChannel, pTok: pTok, cTok: cTok, cu: cu, msgID: msgID, think: think}
	var v any
	switch c.provider {
	case "anthropic":
		v = c.anthropicReply(req, r)
	case "ollama":
		v = c.ollamaReply(req, r)
	default:
		v = c.openAIReply(req, r)
	}
	body, _ := json.Marshal(v)
	hdr := http.Header{}
	hdr.Set("X-Sim-Faults", faultHeader(p))
	hdr.Set("X-Sim-Turn", strconv.Itoa(p.turn))
	if p.patch {
		hdr.Set("X-Sim-Patch", "1")
	}
	if c.provider == "openai" {
		hdr.Set("Openai-Processing-Ms", "0")
	}
	c.rateHeaders(hdr, lr)
	return replyOut{body: body, hdr: hdr, plan: p, think: think, cTok: cTok}
}

// replyParts is what a reply says, before it is put in a provider's format.
type replyParts struct {
	plan   plan
	text   string // the reply's text, padded when huge
	pad    string // the padding of a huge reply
	object bool   // the value goes in a tool call (the object channel)
	pTok   int
	cTok   int
	cu     cacheUse
	msgID  string
	think  time.Duration
}

// anthropicReply is a Messages API response body.
func (c *call) anthropicReply(req *chatReq, r replyParts) antResponse {
	p, outText, pad, objectChannel := r.plan, r.text, r.pad, r.object
	pTok, cTok, cu, msgID := r.pTok, r.cTok, r.cu, r.msgID
	out := antResponse{ID: "msg_01" + msgID, Type: "message", Role: "assistant", Model: req.model,
		Content: []any{}, StopReason: "end_turn",
		Usage: antUsage{InputTokens: pTok - cu.read - cu.write(), CacheReadInputTokens: cu.read,
			CacheCreationInputTokens: cu.write(), OutputTokens: cTok, ServiceTier: "standard"}}
	out.Usage.CacheCreation.Ephemeral5m, out.Usage.CacheCreation.Ephemeral1h = cu.write5m, cu.write1h
	if c.batch {
		out.Usage.ServiceTier = "batch"
	}
	if pad != "" && objectChannel {
		out.Content = append(out.Content, antText{"text", pad})
	}
	switch {
	case p.outcome == FaultRefusal:
		out.Content = append(out.Content, antText{"text", p.text})
		out.StopReason = "refusal"
	case p.outcome == FaultEmpty:
	case objectChannel && p.outcome == FaultTruncation:
		out.Content = append(out.Content, antToolUse{"tool_use", "toolu_01" + msgID, req.toolName, json.RawMessage("{}")})
		out.StopReason = "max_tokens"
	case objectChannel:
		if !req.toolForced {
			out.Content = append(out.Content, antText{"text", "I'll call " + req.toolName + " with the details."})
		}
		out.Content = append(out.Content, antToolUse{"tool_use", "toolu_01" + msgID, req.toolName, json.RawMessage(p.text)})
		out.StopReason = "tool_use"
	default:
		out.Content = append(out.Content, antText{"text", outText})
		if p.outcome == FaultTruncation {
			out.StopReason = "max_tokens"
		}
	}
	return out
}

// ollamaReply is an Ollama /api/chat response body.
func (c *call) ollamaReply(req *chatReq, r replyParts) olResponse {
	p, outText, pad, objectChannel := r.plan, r.text, r.pad, r.object
	pTok, cTok, think := r.pTok, r.cTok, r.think
	total := int64(think)
	out := olResponse{Model: req.model, CreatedAt: c.now.UTC().Format(time.RFC3339Nano),
		Message: olMessage{Role: "assistant", Content: outText}, DoneReason: "stop", Done: true,
		TotalDuration: total, PromptEvalCount: pTok, PromptEvalDuration: total / 4, EvalCount: cTok, EvalDuration: total - total/4}
	if objectChannel && p.outcome != FaultTruncation && p.outcome != FaultEmpty {
		var tc olToolCall
		tc.Function.Name = req.toolName
		tc.Function.Arguments = json.RawMessage(p.text)
		out.Message.Content = pad
		out.Message.ToolCalls = []olToolCall{tc}
	}
	if p.outcome == FaultTruncation {
		out.DoneReason = "length"
		if objectChannel {
			out.Message.Content = ""
		}
	}
	return out
}

// openAIReply is a Chat Completions response body.
func (c *call) openAIReply(req *chatReq, r replyParts) oaResponse {
	p, outText := r.plan, r.text
	pTok, cTok, cu, msgID, s := r.pTok, r.cTok, r.cu, r.msgID, c.s
	tier := "default"
	if req.flex {
		tier = "flex"
	}
	out := oaResponse{ID: "chatcmpl-" + msgID, Object: "chat.completion", Created: c.now.Unix(), Model: req.model,
		ServiceTier: tier, SystemFingerprint: "fp_sim" + strconv.FormatUint(s.cfg.Seed%1000, 10)}
	u := oaUsage{PromptTokens: pTok, CompletionTokens: cTok, TotalTokens: pTok + cTok}
	u.PromptTokensDetails.CachedTokens = cu.read
	out.Usage = u
	ch := oaChoice{Message: oaMessage{Role: "assistant", Annotations: []struct{}{}}, FinishReason: "stop"}
	text := outText
	switch {
	case p.outcome == FaultRefusal:
		ch.Message.Refusal = &text
	case req.toolName != "" && p.outcome != FaultEmpty && (p.isJSON || p.outcome == FaultTruncation):
		tc := oaToolCall{ID: "call_" + msgID, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = req.toolName, text
		ch.Message.ToolCalls = []oaToolCall{tc}
		if !req.toolForced {
			ch.FinishReason = "tool_calls"
		}
	default:
		ch.Message.Content = &text
	}
	if p.outcome == FaultTruncation {
		ch.FinishReason = "length"
	}
	out.Choices = []oaChoice{ch}
	return out
}

func hugePad(n int) string {
	const unit = "This paragraph is padding in a reply that is far too long. "
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

func durString(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return max(d.Round(time.Millisecond), time.Millisecond).String()
}

// rateHeaders sets the provider's rate-limit headers.
func (c *call) rateHeaders(h http.Header, lr limitResult) {
	rpm, tpm := c.s.cfg.RPM, c.s.cfg.TPM
	switch c.provider {
	case "openai":
		if rpm > 0 {
			h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(rpm))
		}
		if rpm > 0 || lr.which == "requests" {
			h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(lr.reqRemain))
			h.Set("X-Ratelimit-Reset-Requests", durString(lr.reqReset))
		}
		if tpm > 0 {
			h.Set("X-Ratelimit-Limit-Tokens", strconv.Itoa(tpm))
			h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(lr.tokRemain))
			h.Set("X-Ratelimit-Reset-Tokens", durString(lr.tokReset))
		}
	case "anthropic":
		at := func(d time.Duration) string {
			return c.now.Add(d).UTC().Add(time.Second - 1).Truncate(time.Second).Format(time.RFC3339)
		}
		if rpm > 0 {
			h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(rpm))
		}
		if rpm > 0 || lr.which == "requests" {
			h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(lr.reqRemain))
			h.Set("Anthropic-Ratelimit-Requests-Reset", at(lr.reqReset))
		}
		if tpm > 0 {
			for _, k := range []string{"Tokens", "Input-Tokens"} {
				h.Set("Anthropic-Ratelimit-"+k+"-Limit", strconv.Itoa(tpm))
				h.Set("Anthropic-Ratelimit-"+k+"-Remaining", strconv.Itoa(lr.tokRemain))
				h.Set("Anthropic-Ratelimit-"+k+"-Reset", at(lr.tokReset))
			}
		}
	}
}

// rateLimited answers 429 (Ollama: 503 busy) for an exhausted budget.
func (c *call) rateLimited(model string, lr limitResult, requested int) {
	h := http.Header{}
	c.rateHeaders(h, lr)
	e := statusError(c.provider, 429)
	if c.provider == "openai" {
		limit, unit, abbr := c.s.cfg.RPM, "requests per min", "RPM"
		if lr.which == "tokens" {
			limit, unit, abbr = c.s.cfg.TPM, "tokens per min", "TPM"
			e.typ = "tokens"
		} else {
			requested = 1
		}
		e.msg = fmt.Sprintf("Rate limit reached for %s in organization org-sim on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			model, unit, abbr, limit, limit, requested, durString(lr.retryAfter))
	}
	if c.provider != "ollama" {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(lr.retryAfter.Seconds()))))
	}
	c.fail(e, h)
}

// quota answers the provider's permanent quota error. Anthropic's is not a
// 429 (a 429 there is a rate limit, retried) but the 400 of an account out
// of credit.
func (c *call) quota() {
	switch c.provider {
	case "anthropic":
		c.fail(&apiError{status: 400, typ: "invalid_request_error",
			msg: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}, nil)
	case "ollama":
		c.fail(&apiError{status: 429, msg: "quota exhausted"}, nil)
	default:
		c.fail(&apiError{status: 429, typ: "insufficient_quota", code: "insufficient_quota",
			msg: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}, nil)
	}
}

// fail writes an error in the provider's shape.
func (c *call) fail(e *apiError, h http.Header) {
	if h == nil {
		h = http.Header{}
	}
	c.write(e.status, h, errorBody(c.provider, e, c.reqID), false)
}

// write sends a response, optionally one byte per TrickleInterval.
func (c *call) write(status int, h http.Header, body []byte, trickle bool) {
	w := c.w
	dst := w.Header()
	for k, vs := range h {
		dst[k] = vs
	}
	switch c.provider {
	case "anthropic":
		dst.Set("Request-Id", c.reqID)
		dst.Set("Content-Type", "application/json")
	case "ollama":
		dst.Set("Content-Type", "application/json; charset=utf-8")
	default:
		dst.Set("X-Request-Id", c.reqID)
		dst.Set("Content-Type", "application/json")
	}
	c.s.stats.statusCode(status)
	if !trickle {
		dst.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(status)
	f, _ := w.(http.Flusher)
	for i := range body {
		if _, err := w.Write(body[i : i+1]); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
		if !sleep(c.r.Context(), c.s.done, c.s.cfg.TrickleInterval) {
			return
		}
	}
}

// hang waits until the client or the server goes away, then drops the
// connection so that no response is ever sent.
func (c *call) hang() {
	select {
	case <-c.r.Context().Done():
	case <-c.s.done:
	}
	c.drop()
}

// drop closes the connection of a call that will not be answered (a wait
// cut short by the client or by Close), so that net/http does not send an
// empty 200 in its place.
func (c *call) drop() {
	if hj, ok := c.w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// reset closes the connection without a response.
func (c *call) reset() {
	hj, ok := c.w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// scripted applies a scripted reply; it reports whether the call is done.
func (c *call) scripted(sr *ScriptedReply) bool {
	s := c.s
	if sr.Hang || sr.Reset || sr.Status != 0 || sr.Body != nil {
		s.stats.event(EventScripted)
	}
	switch {
	case sr.Hang:
		s.stats.statusCode(0)
		c.hang()
		return true
	case sr.Reset:
		s.stats.statusCode(0)
		c.reset()
		return true
	case sr.Status == 0 && sr.Body == nil:
		return false
	}
	if !sleep(c.r.Context(), s.done, sr.Delay) {
		s.stats.statusCode(0)
		c.drop()
		return true
	}
	status := cmp.Or(sr.Status, 200)
	h := sr.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	body := sr.Body
	if body == nil {
		e := statusError(c.provider, status)
		if status == 429 && h.Get("Retry-After") == "" && c.provider != "ollama" {
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(s.cfg.RetryAfter.Seconds()))))
		}
		status = e.status
		body = errorBody(c.provider, e, c.reqID)
	}
	c.write(status, h, body, sr.Trickle)
	return true
}

// readBody reads at most limit bytes of r's body into one buffer sized from
// Content-Length when the client sent it (io.ReadAll would grow and copy
// its buffer several times for a typical request).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead free before the read that sees EOF
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit))
	return buf.Bytes(), err
}

// apiKey is the key a request carries the way its provider takes it.
func apiKey(provider string, r *http.Request) string {
	if provider == "anthropic" {
		return r.Header.Get("X-Api-Key")
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}
