package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// Provider batch APIs: OpenAI's Batch API (a JSONL file uploaded with
// purpose=batch, then POST /v1/batches) and Anthropic's Message Batches
// (POST /v1/messages/batches). Both run requests within 24 hours at half
// the realtime price. Each request of a batch is encoded exactly as
// Complete would send it, and each result is decoded by the same decoders
// as a realtime reply. The calls go through the transport retry layer
// (batch_http.go) but take nothing from a lane's budgets.

// Documented limits of one provider batch (see BatchLimits).
const (
	// OpenAIBatchMaxRequests is the most requests in one OpenAI batch input file.
	OpenAIBatchMaxRequests = 50_000
	// OpenAIBatchMaxBytes is the largest OpenAI batch input file (200 MB).
	OpenAIBatchMaxBytes = 200_000_000
	// AnthropicBatchMaxRequests is the most requests in one Message Batch.
	AnthropicBatchMaxRequests = 100_000
	// AnthropicBatchMaxBytes is the largest Message Batch create request (256 MB).
	AnthropicBatchMaxBytes = 256_000_000
	// anthropicEnvelopeBytes is what {"requests":[ ... ]} adds around the items.
	anthropicEnvelopeBytes = len(`{"requests":[]}`)

	// openAIBatchEndpoint is the endpoint every line of an OpenAI batch calls.
	openAIBatchEndpoint = "/v1/chat/completions"
	// openAIBatchWindow is the only completion window OpenAI accepts.
	openAIBatchWindow = "24h"
	// batchListPageDefault is the page size of ListBatches when limit <= 0.
	batchListPageDefault = 20
)

// Sentinels of the batch calls, wrapped by the *Error they return (test
// with errors.Is).
var (
	// ErrBatchUnsupported: the provider or server has no batch API (Ollama
	// always; an OpenAI-compatible server that answers 404 or 405 to the
	// batch endpoints). Deliver realtime instead.
	ErrBatchUnsupported = errors.New("no batch API on this provider or server")
	// ErrBatchNotFound: a 404 for a batch or file id. Anthropic has been
	// seen to answer 404 for a few seconds right after a create, so a
	// poller should not give up on a batch it just created at the first one.
	ErrBatchNotFound = errors.New("batch or file not found")
	// ErrBatchMaybeCreated: an upload or create failed in a way that does
	// not show whether the server acted on it (the request was sent, then
	// no usable answer: a timeout, a reset connection, a 5xx other than
	// 503/529, a 2xx body that does not parse). It is not retried, because
	// a retry could create the file or batch twice: reconcile first
	// (ListBatches, by metadata on OpenAI) and create again only if it is
	// not there.
	ErrBatchMaybeCreated = errors.New("the server may have created it: reconcile before creating it again")
	// ErrInvalidCustomID: a custom_id that Anthropic would refuse (see
	// ValidateCustomID).
	ErrInvalidCustomID = errors.New("invalid custom_id")
)

// BatchItem is one request of a provider batch. CustomID identifies its
// result: unique within the batch and, to be usable with every provider,
// valid for ValidateCustomID.
type BatchItem struct {
	CustomID string
	Request  fixpoint.Request
}

// BatchState is a batch's status, normalized across providers. Raw in
// BatchStatus keeps the provider's own word.
type BatchState string

// The states of a batch. The last four are final (BatchStatus.Ended).
const (
	// BatchValidating: OpenAI is checking the input file.
	BatchValidating BatchState = "validating"
	// BatchInProgress: requests are running (OpenAI in_progress,
	// Anthropic in_progress).
	BatchInProgress BatchState = "in_progress"
	// BatchFinalizing: OpenAI is writing the output files.
	BatchFinalizing BatchState = "finalizing"
	// BatchCancelling: a cancel was asked for and the batch has not ended
	// (OpenAI cancelling, Anthropic canceling).
	BatchCancelling BatchState = "cancelling"
	// BatchCompleted: the batch ended by running every request (OpenAI
	// completed, Anthropic ended without a cancel or expired requests).
	// Requests may still have failed: see Counts and the results.
	BatchCompleted BatchState = "completed"
	// BatchFailed: OpenAI refused the batch as a whole (BatchStatus.Err
	// says why); nothing ran and there are no results.
	BatchFailed BatchState = "failed"
	// BatchExpired: the batch ran out of its 24 hours (OpenAI expired,
	// Anthropic ended with expired requests). The requests that ran have
	// results; the rest are ClassExpired.
	BatchExpired BatchState = "expired"
	// BatchCancelled: the batch ended after a cancel (OpenAI cancelled,
	// Anthropic ended with cancel_initiated_at set). Requests that ran
	// before it have results; the rest are ClassCancelled (OpenAI may
	// leave them out of the results altogether).
	BatchCancelled BatchState = "cancelled"
)

// BatchCounts counts a batch's requests by outcome as the provider
// reports them. OpenAI reports only total, completed and failed: its
// expired and cancelled requests are in Errored, and Processing is what
// is left while the batch runs. Anthropic moves requests out of Processing
// only when the whole batch ends.
type BatchCounts struct {
	Total      int `json:"total"`
	Succeeded  int `json:"succeeded"`
	Errored    int `json:"errored"`
	Expired    int `json:"expired"`
	Cancelled  int `json:"cancelled"`
	Processing int `json:"processing"`
}

// BatchError is one reason OpenAI gave for failing a whole batch (Batch
// errors.data[]): e.g. token_limit_exceeded, or a line of the input file
// that does not parse (Line is its 1-based number, 0 when not given).
type BatchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// BatchStatus is a provider batch as last seen.
type BatchStatus struct {
	ID string `json:"id"`
	// State is the normalized status; Raw the provider's own.
	State BatchState `json:"state"`
	Raw   string     `json:"raw"`
	// Ended reports that no more results will come: completed, failed,
	// expired or cancelled. Only an ended batch has results to download.
	Ended  bool        `json:"ended"`
	Counts BatchCounts `json:"counts"`
	// InputFileID, OutputFileID and ErrorFileID are OpenAI's files ("" when
	// none); ResultsURL is Anthropic's results_url ("" until the batch
	// ended). BatchResults does not follow ResultsURL (see there).
	InputFileID  string `json:"input_file_id,omitempty"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
	ResultsURL   string `json:"results_url,omitempty"`
	// Metadata is what CreateBatch was given (OpenAI only: Anthropic
	// batches have none).
	Metadata map[string]string `json:"metadata,omitempty"`
	// CreatedAt, EndedAt and ExpiresAt are zero when the provider has not
	// set them (OpenAI has no expires_at while validating).
	CreatedAt time.Time `json:"created_at"`
	EndedAt   time.Time `json:"ended_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Errors are OpenAI's reasons for a failed batch.
	Errors []BatchError `json:"errors,omitempty"`
	// Err is set when State is BatchFailed: ClassRateLimited for
	// token_limit_exceeded (the organization's enqueued-token limit was
	// full: create it again once running batches finish), else
	// ClassBadRequest (the input itself was refused). Code and Message are
	// the first of Errors.
	Err *fixpoint.ProviderError `json:"-"`
}

// BatchResult is the outcome of one request of a batch: exactly one of
// Response and Err is set. Response is decoded as a realtime reply would
// be (text or tool arguments, finish reason, refusal, usage; Status is the
// request's own status, Latency and RateLimit are zero). Err has the class
// the same failure would have in realtime, or ClassExpired or
// ClassCancelled for a request that never ran.
type BatchResult struct {
	CustomID string
	Response *fixpoint.Response
	Err      *fixpoint.ProviderError
}

// SupportsBatch reports whether the provider has a batch API: its row
// has DeliveryBatch (an OpenAI-compatible server may still lack it: see
// ProbeBatch).
func (c *Client) SupportsBatch() bool {
	return c.row.Has(DeliveryBatch)
}

// BatchLimits returns the most requests one batch may hold and the most
// bytes its items may take, counting len(EncodeBatchItem(it))+1 for each
// item: OpenAI 50,000 requests in an input file of 200 MB, Anthropic
// 100,000 requests in a create request of 256 MB (less its envelope).
// Both are 0 when the provider has no batch API.
func (c *Client) BatchLimits() (maxRequests int, maxBytes int64) {
	if !c.SupportsBatch() {
		return 0, 0
	}
	switch c.row.Wire {
	case WireOpenAIChat:
		return OpenAIBatchMaxRequests, OpenAIBatchMaxBytes
	case WireAnthropic:
		return AnthropicBatchMaxRequests, AnthropicBatchMaxBytes - int64(anthropicEnvelopeBytes)
	}
	return 0, 0
}

// customIDPattern is Anthropic's rule for custom_id; OpenAI takes any
// string, so an id that passes it works everywhere.
var customIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidateCustomID returns nil when id matches ^[a-zA-Z0-9_-]{1,64}$,
// Anthropic's rule for custom_id (OpenAI accepts any string), else an
// error wrapping ErrInvalidCustomID.
func ValidateCustomID(id string) error {
	if customIDPattern.MatchString(id) {
		return nil
	}
	return fmt.Errorf("%w %q: must be 1 to 64 letters, digits, '_' or '-'", ErrInvalidCustomID, id)
}

// EncodeBatchItem returns the bytes it adds to a batch, without the
// separator after it: OpenAI's JSONL line {"custom_id", "method": "POST",
// "url": "/v1/chat/completions", "body"}, Anthropic's request {"custom_id",
// "params"}. The body or params are exactly what Complete would send for
// it.Request. Use it to pack batches under BatchLimits.
func (c *Client) EncodeBatchItem(it BatchItem) ([]byte, error) {
	b, e := c.encodeBatchItem(it)
	if e != nil {
		return nil, e
	}
	return b, nil
}

func (c *Client) encodeBatchItem(it BatchItem) ([]byte, *fixpoint.ProviderError) {
	if !c.SupportsBatch() {
		return nil, c.unsupported()
	}
	req := it.Request
	body, _, e := c.encode(&req)
	if e != nil {
		e.Message = fmt.Sprintf("batch item %q: %s", it.CustomID, e.Message)
		return nil, e
	}
	id, err := json.Marshal(it.CustomID)
	if err != nil {
		return nil, &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: fmt.Sprintf("batch item %q: encode custom_id: %v", it.CustomID, err), Err: err}
	}
	var head string
	if c.row.Wire == WireOpenAIChat {
		head = `,"method":"POST","url":"` + openAIBatchEndpoint + `","body":`
	} else {
		head = `,"params":`
	}
	out := make([]byte, 0, len(`{"custom_id":`)+len(id)+len(head)+len(body)+1)
	out = append(out, `{"custom_id":`...)
	out = append(out, id...)
	out = append(out, head...)
	out = append(out, body...)
	return append(out, '}'), nil
}

// encodeBatch checks items against the provider's rules and limits and
// encodes them: each item, then the separator sep.
func (c *Client) encodeBatch(items []BatchItem, sep byte) ([]byte, *fixpoint.ProviderError) {
	if !c.SupportsBatch() {
		return nil, c.unsupported()
	}
	maxReq, maxBytes := c.BatchLimits()
	if len(items) == 0 {
		return nil, batchInvalid(nil, "batch has no items")
	}
	if len(items) > maxReq {
		return nil, batchInvalid(nil, "batch has %d items, over the %s limit of %d", len(items), c.cfg.Provider, maxReq)
	}
	seen := make(map[string]struct{}, len(items))
	var out []byte
	for i := range items {
		it := &items[i]
		switch {
		case c.row.Wire == WireAnthropic:
			if err := ValidateCustomID(it.CustomID); err != nil {
				return nil, batchInvalid(ErrInvalidCustomID, "batch item %d: %v", i, err)
			}
		case it.CustomID == "":
			return nil, batchInvalid(ErrInvalidCustomID, "batch item %d: custom_id is empty", i)
		}
		if _, dup := seen[it.CustomID]; dup {
			return nil, batchInvalid(nil, "batch item %d: custom_id %q repeats an earlier item's", i, it.CustomID)
		}
		seen[it.CustomID] = struct{}{}
		if c.row.Wire == WireOpenAIChat && it.Request.Model != items[0].Request.Model {
			// OpenAI: "each input file can only include requests to a single model".
			return nil, batchInvalid(nil, "batch item %d: model %q differs from the first item's %q (an OpenAI batch has one model)",
				i, it.Request.Model, items[0].Request.Model)
		}
		b, e := c.encodeBatchItem(*it)
		if e != nil {
			return nil, e
		}
		if int64(len(out)+len(b)+1) > maxBytes {
			return nil, batchInvalid(nil, "batch is over the %s limit of %d bytes at item %d", c.cfg.Provider, maxBytes, i)
		}
		out = append(out, b...)
		out = append(out, sep)
	}
	return out, nil
}

func batchInvalid(sentinel error, format string, args ...any) *fixpoint.ProviderError {
	return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: fmt.Sprintf(format, args...), Err: sentinel}
}

func (c *Client) unsupported() *fixpoint.ProviderError {
	return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: c.cfg.Provider + " has no batch API", Err: ErrBatchUnsupported}
}

// ProbeBatch asks the server whether it serves the batch endpoints, by
// listing one batch. nil means it does. An error wrapping
// ErrBatchUnsupported means it does not (ollama, or a 404, 405 or 501 from
// an OpenAI-compatible server): deliver realtime. Any other *Error (a bad
// key, the server down) says nothing either way.
func (c *Client) ProbeBatch(ctx context.Context) error {
	if !c.SupportsBatch() {
		return c.unsupported()
	}
	_, err := c.listBatchPage(ctx, 1, "")
	var e *fixpoint.ProviderError
	if errors.As(err, &e) && (e.Status == 404 || e.Status == 405 || e.Status == 501) {
		e.Err = ErrBatchUnsupported
		e.Message = "no batch endpoints at " + RedactURL(c.cfg.BaseURL) + " (" + e.Message + ")"
	}
	return err
}

// UploadBatchFile uploads items as an OpenAI batch input file (Files API,
// purpose=batch) and returns its id, for the caller to record before
// CreateBatch. Items are checked first: unique non-empty custom_ids, one
// model, BatchLimits. OpenAI only: other providers get an error wrapping
// ErrBatchUnsupported. A failure that may have left a file behind wraps
// ErrBatchMaybeCreated (an unused file expires after 30 days).
func (c *Client) UploadBatchFile(ctx context.Context, items []BatchItem) (string, error) {
	if c.row.Wire != WireOpenAIChat {
		return "", c.unsupported()
	}
	jsonl, e := c.encodeBatch(items, '\n')
	if e != nil {
		return "", e
	}
	return c.openAIUpload(ctx, jsonl)
}

// CreateBatch creates a provider batch and returns its first status.
// OpenAI: from the uploaded file fileID (items are not used), with
// metadata (at most 16 pairs, keys up to 64 and values up to 512
// characters; record a wave id there to find the batch again with
// ListBatches). Anthropic: from items (fileID and metadata are not used:
// Message Batches have none), each custom_id checked with
// ValidateCustomID. A failure that may have created the batch wraps
// ErrBatchMaybeCreated and is not retried.
func (c *Client) CreateBatch(ctx context.Context, fileID string, items []BatchItem, metadata map[string]string) (BatchStatus, error) {
	if !c.SupportsBatch() {
		return BatchStatus{}, c.unsupported()
	}
	switch c.row.Wire {
	case WireOpenAIChat:
		return c.openAICreate(ctx, fileID, metadata)
	case WireAnthropic:
		return c.anthropicCreate(ctx, items)
	}
	return BatchStatus{}, c.unsupported()
}

// RetrieveBatch returns the batch's current status. A 404 wraps
// ErrBatchNotFound.
func (c *Client) RetrieveBatch(ctx context.Context, id string) (BatchStatus, error) {
	if !c.SupportsBatch() {
		return BatchStatus{}, c.unsupported()
	}
	if id == "" {
		return BatchStatus{}, batchInvalid(nil, "batch id is empty")
	}
	return c.batchObject(ctx, "GET", c.batchURL(id), "retrieve batch")
}

// CancelBatch asks the provider to cancel the batch and returns its status
// (usually cancelling: it ends, with the results of what ran, within
// minutes). A 404 wraps ErrBatchNotFound.
func (c *Client) CancelBatch(ctx context.Context, id string) (BatchStatus, error) {
	if !c.SupportsBatch() {
		return BatchStatus{}, c.unsupported()
	}
	if id == "" {
		return BatchStatus{}, batchInvalid(nil, "batch id is empty")
	}
	return c.batchObject(ctx, "POST", c.batchURL(id)+"/cancel", "cancel batch")
}

// ListBatches returns up to limit of the key's batches, newest first (the
// order both providers list in), following pages as needed; limit <= 0
// means 20. It finds a batch that was created but not recorded: on OpenAI
// by its Metadata; Anthropic batches carry none, so there only the
// created time and the custom_ids of its results can tell.
func (c *Client) ListBatches(ctx context.Context, limit int) ([]BatchStatus, error) {
	if !c.SupportsBatch() {
		return nil, c.unsupported()
	}
	if limit <= 0 {
		limit = batchListPageDefault
	}
	var out []BatchStatus
	after := ""
	for len(out) < limit {
		page, err := c.listBatchPage(ctx, limit-len(out), after)
		if err != nil {
			return nil, err
		}
		out = append(out, page.batches...)
		if !page.hasMore || len(page.batches) == 0 || page.lastID == "" {
			break
		}
		after = page.lastID
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListBatchesSince returns the key's batches created at or after since,
// newest first, following pages until one is older (or max have been
// read; max <= 0 means 100,000). A batch created but not recorded is looked
// for among all of them: the newest hundred missed it once a cluster had
// made a hundred more since.
func (c *Client) ListBatchesSince(ctx context.Context, since time.Time, max int) ([]BatchStatus, error) {
	if !c.SupportsBatch() {
		return nil, c.unsupported()
	}
	if max <= 0 {
		max = 100_000
	}
	var out []BatchStatus
	after := ""
	for len(out) < max {
		page, err := c.listBatchPage(ctx, 100, after)
		if err != nil {
			return nil, err
		}
		for _, b := range page.batches {
			if b.CreatedAt.Before(since) {
				return out, nil
			}
			out = append(out, b)
		}
		if !page.hasMore || len(page.batches) == 0 || page.lastID == "" {
			break
		}
		after = page.lastID
	}
	return out, nil
}

// BatchResults calls fn with every result of an ended batch, in the order
// the provider wrote them (any order: key on CustomID). OpenAI: the lines
// of the output file, then of the error file. Anthropic: the results of
// GET /v1/messages/batches/{id}/results, built from the client's base URL
// like both official SDKs do, not st.ResultsURL: the API key is only ever
// sent to the configured base URL, and a base URL override (the
// simulator, a gateway) is not bypassed by the absolute URL the provider
// hands out.
//
// The download is streamed line by line: a results file is not capped at
// MaxBodyBytes as a whole, only each line is; a line over the cap is a
// ClassTooLarge result for its custom_id. A download cut short is retried
// like any transient failure, and a custom_id already passed to fn is not
// passed again, so fn sees each custom_id at most once per call.
//
// request returns the request sent under a custom_id, to decode its reply
// exactly as Complete would (the tool named like its schema,
// DroppedKeywords); nil means every id was sent with a zero Request. A
// line whose custom_id request does not know (or that has none) is still
// passed to fn, as an Err of ClassBadResponse with Code
// "unknown_custom_id": the caller decides what a stray result means.
//
// An error from fn stops the download and is returned as it is; any other
// error is a *Error. A batch that has not ended is refused, and one with
// no result files (a failed batch) calls fn no times.
func (c *Client) BatchResults(ctx context.Context, st BatchStatus, request func(customID string) (fixpoint.Request, bool), fn func(BatchResult) error) error {
	if !c.SupportsBatch() {
		return c.unsupported()
	}
	if !st.Ended {
		return batchInvalid(nil, "batch %s has not ended (state %s): no results yet", st.ID, st.Raw)
	}
	rs := &resultSink{c: c, request: request, fn: fn, seen: make(map[string]struct{})}
	switch c.row.Wire {
	case WireOpenAIChat:
		for _, f := range []string{st.OutputFileID, st.ErrorFileID} {
			if f == "" {
				continue
			}
			if err := c.download(ctx, c.url("/files/"+pathID(f)+"/content", nil), "download batch file "+f, rs); err != nil {
				return err
			}
		}
		return nil
	default:
		if st.ID == "" {
			return batchInvalid(nil, "batch id is empty")
		}
		return c.download(ctx, c.batchURL(st.ID)+"/results", "download batch results", rs)
	}
}

// resultSink turns result lines into BatchResults for fn, each custom_id
// at most once.
type resultSink struct {
	c       *Client
	request func(string) (fixpoint.Request, bool)
	fn      func(BatchResult) error
	seen    map[string]struct{}
	file    int // download number, for the key of a line without an id
}

// lookup returns the request sent under id.
func (rs *resultSink) lookup(id string) (fixpoint.Request, bool) {
	if rs.request == nil {
		return fixpoint.Request{}, id != ""
	}
	if id == "" {
		return fixpoint.Request{}, false
	}
	return rs.request(id)
}

// deliver passes r to fn unless its key was delivered before.
func (rs *resultSink) deliver(key string, r BatchResult) error {
	if _, ok := rs.seen[key]; ok {
		return nil
	}
	rs.seen[key] = struct{}{}
	if r.Response != nil {
		rs.c.redactResponse(r.Response)
	}
	if r.Err != nil {
		rs.c.redactError(r.Err)
	}
	return rs.fn(r)
}

// line handles one result line (already redacted) or, when size > 0, a
// line over MaxBodyBytes of which head is the start.
func (rs *resultSink) line(n int, data []byte, size int64) error {
	var r BatchResult
	if size > 0 {
		id := customIDFromHead(data)
		req, _ := rs.lookup(id)
		billed := fixpoint.EstimateUsage(&req, size)
		r = BatchResult{CustomID: id, Err: &fixpoint.ProviderError{Class: fixpoint.ClassTooLarge, Status: http.StatusOK, Size: size, Head: cutUTF8(data, headBytes),
			Billed: billed, Message: fmt.Sprintf("result line is %d bytes, over the MaxBodyBytes cap of %d bytes; the reply was made (and billed); charged by estimate: %d input, %d output tokens",
				size, rs.c.cfg.MaxBodyBytes, billed.InputTokens, billed.OutputTokens)}}
	} else if rs.c.row.Wire == WireOpenAIChat {
		r = rs.c.openAIResultLine(data, rs)
	} else {
		r = rs.c.anthropicResultLine(data, rs)
	}
	key := r.CustomID
	if _, known := rs.lookup(r.CustomID); !known {
		if r.CustomID == "" {
			key = fmt.Sprintf("\x00%d:%d", rs.file, n) // one line, not one id
		}
		msg := fmt.Sprintf("result for custom_id %q, which this batch did not send", r.CustomID)
		if r.CustomID == "" {
			msg = fmt.Sprintf("result line %d has no readable custom_id: %s", n, snippet(data))
		}
		r = BatchResult{CustomID: r.CustomID, Err: &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Code: "unknown_custom_id", Message: msg}}
	}
	return rs.deliver(key, r)
}

// decode decodes a succeeded reply as Complete would for the request sent
// under id.
func (rs *resultSink) decode(id string, body []byte, status int, requestID string) BatchResult {
	req, _ := rs.lookup(id)
	out := &fixpoint.Response{Status: status, RequestID: requestID}
	var err error
	if rs.c.row.Wire == WireOpenAIChat {
		err = decodeOpenAI(body, &req, out)
		if err == nil && (req.Mode == fixpoint.ModeJSONSchema || req.Mode == fixpoint.ModeTool) {
			if sr, serr := rs.c.strict(req.Schema); serr == nil {
				out.DroppedKeywords = sr.dropped
			}
		}
	} else {
		err = decodeAnthropic(body, &req, out)
		if sr, ok, _ := rs.c.outputConfig(&req); err == nil && ok {
			out.DroppedKeywords = sr.dropped
		}
	}
	if err != nil {
		e := &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: status, RequestID: requestID,
			Message: err.Error() + ": " + snippet(body), Err: err, Size: int64(len(body)), Head: cutUTF8(body, headBytes)}
		var note string
		e.Billed, note = billedUsage(rs.c.row.Wire, body, &req)
		e.Message += "; " + note
		return BatchResult{CustomID: id, Err: e}
	}
	out.UsageAnomaly = plausibleUsage(&out.Usage, out.UsageAnomaly, &req, int64(len(out.Text)))
	return BatchResult{CustomID: id, Response: out}
}

// customIDHeadRE finds the custom_id in the start of a line too long to decode.
var customIDHeadRE = regexp.MustCompile(`"custom_id"\s*:\s*("(?:[^"\\]|\\.)*")`)

func customIDFromHead(head []byte) string {
	m := customIDHeadRE.FindSubmatch(head)
	if m == nil {
		return ""
	}
	var id string
	if json.Unmarshal(m[1], &id) != nil {
		return ""
	}
	return id
}
