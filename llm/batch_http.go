package llm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// The transport of the batch calls: Complete's retry policy (exponential
// backoff with jitter on the injected clock, at least the server's hint,
// a hint over MaxHintWait handed back) and its timeouts, redaction and
// error classes, without a lane: no RPM/TPM budget or concurrency permit
// is spent on managing a batch.
//
// Two differences, both because batch calls are not completions:
//   - A call that creates something (upload, create) is retried only when
//     the server surely did not act on it: the request never went out
//     whole, or the answer was a 4xx, 503 or 529. Anything else wraps
//     ErrBatchMaybeCreated and is returned at once.
//   - A call that moves a large body (upload, Anthropic create, results
//     download) is bounded by FirstByteTimeout, counted from the last byte
//     sent, and IdleTimeout, not by TotalTimeout, which is sized for one
//     completion, not for 200 MB.

// batchOp is one batch call.
type batchOp struct {
	what        string // for messages: "retrieve batch"
	method, url string
	body        [][]byte // sent in order; nil: no body
	contentType string   // default application/json
	accept      string   // default application/json
	create      bool     // creates something: retried only when the server did not act
	large       bool     // may move a large body: no TotalTimeout
	// read handles a 2xx body: a *Error is a failed attempt (retried as
	// its class says), the error is the caller's and ends the call.
	read func(b *batchBody) (*fixpoint.ProviderError, error)
}

// batchBody is a 2xx response being read.
type batchBody struct {
	c    *Client
	ctx  context.Context
	resp *http.Response
	r    io.Reader // the body, restarting the idle watchdog on every read
	// hold stops the idle watchdog while the caller's callback runs;
	// resume starts it again.
	hold, resume func()
}

// readErr classifies a failure to read the body.
func (b *batchBody) readErr(err error) *fixpoint.ProviderError {
	e := transportError(b.ctx, "read response body", err)
	e.Status = b.resp.StatusCode
	return e
}

// readAll reads the whole body, up to MaxBodyBytes, redacted.
func (b *batchBody) readAll() ([]byte, *fixpoint.ProviderError) {
	c := b.c
	if b.resp.ContentLength > c.cfg.MaxBodyBytes {
		head := make([]byte, headBytes+len(c.key))
		n, _ := io.ReadFull(b.r, head)
		return nil, c.tooLarge(b.resp, b.resp.ContentLength, head[:n], nil)
	}
	data, err := io.ReadAll(io.LimitReader(b.r, c.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, b.readErr(err)
	}
	if int64(len(data)) > c.cfg.MaxBodyBytes {
		return nil, c.tooLarge(b.resp, -1, data, nil)
	}
	return c.redactBody(data), nil
}

// decodeJSON reads the body into out.
func (b *batchBody) decodeJSON(out any) *fixpoint.ProviderError {
	data, e := b.readAll()
	if e != nil {
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: b.resp.StatusCode, RequestID: b.c.requestID(b.resp.Header),
			Message: "decode " + err.Error() + ": " + snippet(data), Err: err}
	}
	return nil
}

// batchJSON makes op and decodes its 2xx body into out.
func (c *Client) batchJSON(ctx context.Context, op *batchOp, out any) error {
	op.read = func(b *batchBody) (*fixpoint.ProviderError, error) { return b.decodeJSON(out), nil }
	return c.batchDo(ctx, op)
}

// batchDo runs op under the transport retry layer. The error is a *Error,
// or the error op.read returned as the caller's.
func (c *Client) batchDo(ctx context.Context, op *batchOp) error {
	hb, bo := c.retryBackOff(ctx)
	maxHint := c.cfg.Lane.MaxHintWait

	var (
		last    *fixpoint.ProviderError
		other   error
		retries []fixpoint.Retry
	)
	try := func() error {
		e, acted, err := c.batchAttempt(ctx, op)
		if err != nil {
			other = err
			return backoff.Permanent(err)
		}
		if e == nil {
			return nil
		}
		c.redactError(e)
		if e.Message == "" {
			e.Message = http.StatusText(e.Status)
		}
		e.Message = op.what + ": " + e.Message
		last = e
		hb.hint = e.RetryAfter
		if op.create && acted {
			if e.Err == nil {
				e.Err = ErrBatchMaybeCreated
			} else {
				e.Err = fmt.Errorf("%w: %w", ErrBatchMaybeCreated, e.Err)
			}
			return backoff.Permanent(e)
		}
		if !e.Class.Retryable() {
			return backoff.Permanent(e)
		}
		if e.RetryAfter > maxHint {
			e.HintOverCap = true
			return backoff.Permanent(e)
		}
		return e
	}
	notify := func(_ error, d time.Duration) {
		retries = append(retries, fixpoint.Retry{Class: last.Class, Status: last.Status, Wait: d})
	}
	err := backoff.RetryNotifyWithTimer(try, bo, notify, &backoffTimer{clock: c.cfg.Clock})
	if err == nil {
		return nil
	}
	if other != nil {
		return other
	}
	last = retriesEnded(ctx, op.what, last)
	last.Retries = retries
	return last
}

// batchAttempt makes one HTTP call of op. acted reports that the server
// may have acted on the request (it was sent whole and no answer says it
// was refused).
func (c *Client) batchAttempt(ctx context.Context, op *batchOp) (e *fixpoint.ProviderError, acted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tctx := context.Context(actx)
	if !op.large {
		var tcancel context.CancelFunc
		tctx, tcancel = context.WithTimeoutCause(actx, c.cfg.TotalTimeout, ErrTotalTimeout)
		defer tcancel()
	}
	var reading atomic.Bool // false: sending, or waiting for headers; true: reading the body
	watchdog := time.AfterFunc(c.cfg.FirstByteTimeout, func() {
		if reading.Load() {
			cancel(ErrIdleTimeout)
		} else {
			cancel(ErrFirstByteTimeout)
		}
	})
	defer watchdog.Stop()

	var body io.Reader
	var size int64
	if op.body != nil {
		rs := make([]io.Reader, len(op.body))
		for i, p := range op.body {
			rs[i] = bytes.NewReader(p)
			size += int64(len(p))
		}
		// While the body goes out, FirstByteTimeout restarts with every
		// read of it: it counts from the last byte sent.
		body = &sendReader{r: io.MultiReader(rs...), t: watchdog, d: c.cfg.FirstByteTimeout, reading: &reading}
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	hreq, rerr := http.NewRequestWithContext(httptrace.WithClientTrace(tctx, trace), op.method, op.url, body)
	if rerr != nil {
		return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "build request: " + rerr.Error(), Err: rerr}, false, nil
	}
	if body != nil {
		hreq.ContentLength = size
		if size == 0 {
			hreq.Body = http.NoBody
		}
	}
	for k, v := range c.headers {
		hreq.Header[k] = v // shared, never modified
	}
	if op.contentType != "" {
		hreq.Header["Content-Type"] = []string{op.contentType}
	}
	if op.accept != "" {
		hreq.Header["Accept"] = []string{op.accept}
	}

	hresp, derr := c.http.Do(hreq)
	if derr != nil {
		return transportError(tctx, "send request", derr), wrote.Load(), nil
	}
	defer hresp.Body.Close()
	reading.Store(true)
	watchdog.Reset(c.cfg.IdleTimeout)
	ir := idleReader{r: hresp.Body, t: watchdog, d: c.cfg.IdleTimeout}

	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		// A 4xx, 503 or 529 refused the request; any other status leaves
		// open whether the server acted on it.
		refused := hresp.StatusCode < 500 || hresp.StatusCode == http.StatusServiceUnavailable || hresp.StatusCode == 529
		b := &batchBody{c: c, ctx: tctx, resp: hresp, r: ir}
		data, e := b.readAll()
		if e != nil {
			return e, !refused, nil
		}
		pe := parseProviderError(data)
		reqID := c.requestID(hresp.Header)
		if reqID == "" {
			reqID = pe.ReqID
		}
		class, hint := classify(c.row.Wire, hresp.StatusCode, hresp.Header, pe, c.cfg.Clock.Now(), demand{})
		e = &fixpoint.ProviderError{Class: class, Status: hresp.StatusCode, Message: pe.Message, Code: pe.Code,
			RequestID: reqID, RetryAfter: hint, RateLimit: rateLimitHeaders(hresp.Header)}
		if hresp.StatusCode == http.StatusNotFound {
			e.Err = ErrBatchNotFound
		}
		return e, !refused, nil
	}
	b := &batchBody{c: c, ctx: tctx, resp: hresp, r: ir,
		hold:   func() { watchdog.Stop() },
		resume: func() { watchdog.Reset(c.cfg.IdleTimeout) },
	}
	e, err = op.read(b)
	return e, true, err
}

// sendReader restarts the first-byte watchdog with every read of the
// request body, until the response is being read.
type sendReader struct {
	r       io.Reader
	t       *time.Timer
	d       time.Duration
	reading *atomic.Bool
}

func (s *sendReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if !s.reading.Load() {
		s.t.Reset(s.d)
	}
	return n, err
}

// download streams the JSONL body at u into rs, line by line.
func (c *Client) download(ctx context.Context, u, what string, rs *resultSink) error {
	rs.file++
	op := &batchOp{what: what, method: http.MethodGet, url: u, large: true,
		// Both SDKs ask for these bodies as binary.
		accept: "application/binary",
		read: func(b *batchBody) (*fixpoint.ProviderError, error) {
			return c.readLines(b, rs.line)
		},
	}
	return c.batchDo(ctx, op)
}

// readLines calls fn with every non-blank line of the body (without its
// line ending), redacted, and size 0; or, for a line over MaxBodyBytes,
// with its first bytes and its size. The last line needs no newline. The
// idle watchdog is held while fn runs.
func (c *Client) readLines(b *batchBody, fn func(n int, line []byte, size int64) error) (*fixpoint.ProviderError, error) {
	const ending = 2 // "\r\n"
	br := bufio.NewReaderSize(b.r, 64<<10)
	maxLine := c.cfg.MaxBodyBytes
	keep := headBytes + len(c.key) // of a line over the cap: its head, and a key across its end
	var (
		buf  []byte // the line, or its first maxLine+ending bytes
		size int64  // bytes of the line so far, ending included
		n    int    // line number, from 1
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if room := maxLine + ending - int64(len(buf)); room > 0 {
			buf = append(buf, chunk[:min(int64(len(chunk)), room)]...)
		}
		size += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return b.readErr(err), nil
		}
		if size > 0 {
			n++
			line := bytes.TrimRight(buf, "\r\n")
			var over int64
			switch {
			case size > maxLine+ending:
				over = size - int64(len(chunk)-len(bytes.TrimRight(chunk, "\r\n")))
			case int64(len(line)) > maxLine:
				over = int64(len(line))
			}
			if over > 0 {
				line = buf[:min(len(buf), keep)]
			}
			if len(bytes.TrimSpace(line)) > 0 {
				b.hold()
				ferr := fn(n, c.redactBody(line), over)
				b.resume()
				if ferr != nil {
					return nil, ferr
				}
			}
		}
		buf, size = buf[:0], 0
		if err != nil { // io.EOF
			return nil, nil
		}
	}
}

// pathID escapes an id for a URL path.
func pathID(id string) string { return url.PathEscape(id) }

// batchURL is the URL of the batch id.
func (c *Client) batchURL(id string) string {
	if c.row.Wire == WireOpenAIChat {
		return c.url("/batches/"+pathID(id), nil)
	}
	return c.url("/v1/messages/batches/"+pathID(id), nil)
}

// batchPage is one page of a batch list.
type batchPage struct {
	batches []BatchStatus
	hasMore bool
	lastID  string
}

// listBatchPage lists up to limit batches after the id after ("" from the
// newest), within one page of the provider's.
func (c *Client) listBatchPage(ctx context.Context, limit int, after string) (batchPage, error) {
	q := url.Values{}
	var u string
	if c.row.Wire == WireOpenAIChat {
		q.Set("limit", fmt.Sprint(min(limit, 100)))
		if after != "" {
			q.Set("after", after)
		}
		u = c.url("/batches", q)
	} else {
		q.Set("limit", fmt.Sprint(min(limit, 1000)))
		if after != "" {
			q.Set("after_id", after)
		}
		u = c.url("/v1/messages/batches", q)
	}
	op := &batchOp{what: "list batches", method: http.MethodGet, url: u}
	var page batchPage
	var err error
	if c.row.Wire == WireOpenAIChat {
		page, err = decodeBatchPage[oaBatch](ctx, c, op)
	} else {
		page, err = decodeBatchPage[anBatch](ctx, c, op)
	}
	if err != nil {
		return page, err
	}
	if page.lastID == "" && len(page.batches) > 0 {
		page.lastID = page.batches[len(page.batches)-1].ID
	}
	return page, nil
}

// decodeBatchPage makes a list call and reads its page of the provider's
// batch objects (B: oaBatch or anBatch; both providers wrap them alike).
func decodeBatchPage[B any, P interface {
	*B
	status() BatchStatus
}](ctx context.Context, c *Client, op *batchOp) (batchPage, error) {
	var w struct {
		Data    []B    `json:"data"`
		HasMore bool   `json:"has_more"`
		LastID  string `json:"last_id"`
	}
	if err := c.batchJSON(ctx, op, &w); err != nil {
		return batchPage{}, err
	}
	page := batchPage{hasMore: w.HasMore, lastID: w.LastID}
	for i := range w.Data {
		page.batches = append(page.batches, P(&w.Data[i]).status())
	}
	return page, nil
}

// batchObject makes a call that answers with a batch object.
func (c *Client) batchObject(ctx context.Context, method, u, what string) (BatchStatus, error) {
	op := &batchOp{what: what, method: method, url: u}
	if method == http.MethodPost {
		op.body = [][]byte{}
	}
	return c.batchObjectOp(ctx, op)
}

func (c *Client) batchObjectOp(ctx context.Context, op *batchOp) (BatchStatus, error) {
	var st BatchStatus
	if c.row.Wire == WireOpenAIChat {
		var w oaBatch
		if err := c.batchJSON(ctx, op, &w); err != nil {
			return st, err
		}
		st = w.status()
	} else {
		var w anBatch
		if err := c.batchJSON(ctx, op, &w); err != nil {
			return st, err
		}
		st = w.status()
	}
	if st.ID == "" {
		e := &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: http.StatusOK, Message: op.what + ": the batch object has no id"}
		if op.create {
			e.Err = ErrBatchMaybeCreated
		}
		return st, e
	}
	return st, nil
}
