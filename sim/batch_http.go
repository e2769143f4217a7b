package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
)

// Batch limits, as the providers document them.
const (
	// maxBatchBytes caps a batch create or upload body (Anthropic: 256 MB
	// per batch; OpenAI: 200 MB per input file).
	maxBatchBytes = 256 << 20
	// openAIMaxBatchLines and anthropicMaxBatchRequests cap the requests of
	// one batch.
	openAIMaxBatchLines       = 50_000
	anthropicMaxBatchRequests = 100_000
	// maxBatchErrors caps the errors.data of an OpenAI batch that failed.
	maxBatchErrors = 100
	// fileRetention is how long a purpose=batch file lives (expires_at).
	fileRetention = 30 * 24 * time.Hour
	// anthropicTime is how Anthropic writes times: RFC 3339, microseconds.
	anthropicTime = "2006-01-02T15:04:05.000000Z07:00"
)

// batchRoute is a batch endpoint named by a request's path. Like the chat
// routes it is found from the end of the path, so any prefix (/v1 or none)
// is accepted.
type batchRoute struct {
	provider string
	// kind is "files", "file", "content" (OpenAI), "batches", "batch",
	// "cancel" or "results".
	kind string
	id   string
	// prefix is the path up to and including the batch collection, for
	// Anthropic's results_url.
	prefix string
}

func parseBatchRoute(path string) (batchRoute, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	n := len(segs)
	seg := func(i int) string {
		if i < 0 || i >= n {
			return ""
		}
		return segs[i]
	}
	prefix := func(upto int) string { return "/" + strings.Join(segs[:upto+1], "/") }
	switch {
	case seg(n-2) == "messages" && seg(n-1) == "batches":
		return batchRoute{provider: "anthropic", kind: "batches", prefix: prefix(n - 1)}, true
	case seg(n-3) == "messages" && seg(n-2) == "batches":
		return batchRoute{provider: "anthropic", kind: "batch", id: seg(n - 1), prefix: prefix(n - 2)}, true
	case seg(n-4) == "messages" && seg(n-3) == "batches" && (seg(n-1) == "cancel" || seg(n-1) == "results"):
		return batchRoute{provider: "anthropic", kind: seg(n - 1), id: seg(n - 2), prefix: prefix(n - 3)}, true
	case seg(n-1) == "batches":
		return batchRoute{provider: "openai", kind: "batches"}, true
	case seg(n-2) == "batches":
		return batchRoute{provider: "openai", kind: "batch", id: seg(n - 1)}, true
	case seg(n-3) == "batches" && seg(n-1) == "cancel":
		return batchRoute{provider: "openai", kind: "cancel", id: seg(n - 2)}, true
	case seg(n-1) == "models":
		// Both providers list models at /v1/models; the handler tells
		// Anthropic's request by its anthropic-version header.
		return batchRoute{provider: "openai", kind: "models"}, true
	case seg(n-1) == "files":
		return batchRoute{provider: "openai", kind: "files"}, true
	case seg(n-2) == "files":
		return batchRoute{provider: "openai", kind: "file", id: seg(n - 1)}, true
	case seg(n-3) == "files" && seg(n-1) == "content":
		return batchRoute{provider: "openai", kind: "content", id: seg(n - 2)}, true
	}
	return batchRoute{}, false
}

// serveBatch answers a call to a batch endpoint. Only Script applies here:
// no transport fault, latency or rate limit.
func (s *Server) serveBatch(c *call, br batchRoute) {
	s.stats.provider[providerIndex(c.provider)].Add(1)
	r := c.r
	body, err := readBody(r, maxBatchBytes+1)
	switch {
	case err != nil:
		c.fail(badRequest("read request body: %v", err), nil)
		return
	case len(body) > maxBatchBytes:
		c.fail(&apiError{status: 413, typ: "request_too_large", msg: fmt.Sprintf("Request exceeds the maximum size of %d bytes.", maxBatchBytes)}, nil)
		return
	}
	if s.cfg.Script != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		sr := s.cfg.Script(int(c.n), r)
		if sr != nil && c.scripted(sr) {
			return
		}
		if sr != nil && !sleep(r.Context(), s.done, sr.Delay) {
			s.stats.statusCode(0)
			c.drop()
			return
		}
	}
	type handler func(*call, batchRoute, []byte)
	routes := map[string]map[string]handler{
		"openai/files":      {http.MethodPost: s.oaUpload},
		"openai/file":       {http.MethodGet: s.oaFile},
		"openai/content":    {http.MethodGet: s.oaContent},
		"openai/batches":    {http.MethodPost: s.oaCreate, http.MethodGet: s.oaList},
		"openai/batch":      {http.MethodGet: s.oaRetrieve},
		"openai/cancel":     {http.MethodPost: s.oaCancel},
		"anthropic/batches": {http.MethodPost: s.antCreate, http.MethodGet: s.antList},
		"anthropic/batch":   {http.MethodGet: s.antRetrieve},
		"anthropic/cancel":  {http.MethodPost: s.antCancel},
		"anthropic/results": {http.MethodGet: s.antResults},
		"openai/models":     {http.MethodGet: s.listModels},
		"anthropic/models":  {http.MethodGet: s.listModels},
	}
	h := routes[br.provider+"/"+br.kind][r.Method]
	if h == nil {
		c.fail(&apiError{status: 405, typ: "invalid_request_error", msg: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)}, nil)
		return
	}
	h(c, br, body)
}

// listModels answers the model list (what a client asks to check its key)
// in the provider's format, naming the presets as models.
func (s *Server) listModels(c *call, _ batchRoute, _ []byte) {
	var data []any
	for _, p := range PresetNames() {
		if c.provider == "anthropic" {
			data = append(data, map[string]any{"type": "model", "id": "sim-" + p.Name, "display_name": "sim " + p.Name, "created_at": "2026-01-01T00:00:00Z"})
		} else {
			data = append(data, map[string]any{"id": "sim-" + p.Name, "object": "model", "created": 1767225600, "owned_by": "fixpoint-sim"})
		}
	}
	if c.provider == "anthropic" {
		c.writeJSON(map[string]any{"data": data, "has_more": false, "first_id": "sim-clean", "last_id": "sim-chaos"})
		return
	}
	c.writeJSON(map[string]any{"object": "list", "data": data})
}

// writeJSON sends v as the provider's JSON.
func (c *call) writeJSON(v any) {
	body, _ := json.Marshal(v)
	c.write(200, nil, body, false)
}

// download sends a file's bytes with the provider's content type.
func (c *call) download(ctype string, body []byte) {
	h := c.w.Header()
	if c.provider == "anthropic" {
		h.Set("Request-Id", c.reqID)
	} else {
		h.Set("X-Request-Id", c.reqID)
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.s.stats.statusCode(200)
	c.w.WriteHeader(200)
	_, _ = c.w.Write(body)
}

func missingParam(name string) *apiError {
	return &apiError{status: 400, typ: "invalid_request_error", param: name, code: "missing_required_parameter",
		msg: fmt.Sprintf("Missing required parameter: '%s'.", name)}
}

func invalidParam(name, format string, a ...any) *apiError {
	return &apiError{status: 400, typ: "invalid_request_error", param: name, msg: fmt.Sprintf(format, a...)}
}

// OpenAI file object.
type oaFileJSON struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int     `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

func (f *batchFile) json() oaFileJSON {
	out := oaFileJSON{ID: f.id, Object: "file", Bytes: len(f.data), CreatedAt: f.created.Unix(),
		Filename: f.filename, Purpose: f.purpose, Status: "processed"}
	if f.purpose == "batch" || f.purpose == "batch_output" {
		exp := f.created.Add(fileRetention).Unix()
		out.ExpiresAt = &exp
	}
	return out
}

var filePurposes = map[string]bool{"batch": true, "assistants": true, "fine-tune": true, "vision": true, "user_data": true, "evals": true}

// oaUpload is POST /v1/files: a multipart form with purpose and file.
func (s *Server) oaUpload(c *call, _ batchRoute, body []byte) {
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		c.fail(badRequest("Invalid Content-Type header (%s), expected multipart/form-data.", c.r.Header.Get("Content-Type")), nil)
		return
	}
	var purpose, filename string
	var data []byte
	haveFile := false
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.fail(badRequest("Invalid multipart body: %v", err), nil)
			return
		}
		b, err := io.ReadAll(p)
		if err != nil {
			c.fail(badRequest("Invalid multipart body: %v", err), nil)
			return
		}
		switch p.FormName() {
		case "purpose":
			purpose = string(b)
		case "file":
			filename, data, haveFile = p.FileName(), b, true
		}
	}
	switch {
	case purpose == "":
		c.fail(missingParam("purpose"), nil)
		return
	case !haveFile:
		c.fail(missingParam("file"), nil)
		return
	case !filePurposes[purpose]:
		c.fail(invalidParam("purpose", "Invalid value for 'purpose': '%s'.", purpose), nil)
		return
	case purpose == "batch" && !strings.HasSuffix(filename, ".jsonl"):
		c.fail(invalidParam("file", "Invalid file format for Batch API. Must be .jsonl"), nil)
		return
	}
	f := &batchFile{id: s.batches.newID(s, "file-", "file"), filename: filename, purpose: purpose, created: c.now, data: data}
	s.batches.addFile(f)
	s.batches.uploaded.Add(1)
	c.writeJSON(f.json())
}

func (s *Server) oaFileOr404(c *call, id string) *batchFile {
	f := s.batches.file(id)
	if f == nil {
		c.fail(&apiError{status: 404, typ: "invalid_request_error", param: "id", msg: fmt.Sprintf("No such File object: %s", id)}, nil)
	}
	return f
}

// oaFile is GET /v1/files/{id}.
func (s *Server) oaFile(c *call, br batchRoute, _ []byte) {
	if f := s.oaFileOr404(c, br.id); f != nil {
		c.writeJSON(f.json())
	}
}

// oaContent is GET /v1/files/{id}/content, sent as OpenAI is observed to
// send it: application/octet-stream.
func (s *Server) oaContent(c *call, br batchRoute, _ []byte) {
	if f := s.oaFileOr404(c, br.id); f != nil {
		c.download("application/octet-stream", f.data)
	}
}

// OpenAI batch object, keys in the API reference's order.
type oaBatchJSON struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Model            *string           `json:"model"`
	Errors           *oaBatchErrors    `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    oaRequestCounts   `json:"request_counts"`
	Usage            oaBatchUsage      `json:"usage"`
	Metadata         map[string]string `json:"metadata"`
}

type oaBatchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

type oaRequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

type oaBatchUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func unix(t time.Time) *int64 {
	u := t.Unix()
	return &u
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// oaStatus is an OpenAI batch's status. The caller holds b.mu.
func (b *simBatch) oaStatus() string {
	switch {
	case !b.ended && !b.cancelAt.IsZero():
		return "cancelling"
	case !b.ended:
		return "in_progress"
	case b.endReason == endCompleted:
		if _, _, expired, _ := b.counts(); expired > 0 {
			return "expired" // a request did not run in time
		}
		return "completed"
	}
	return b.endReason
}

// oaJSON renders an OpenAI batch. The caller holds b.mu.
func (b *simBatch) oaJSON() oaBatchJSON {
	out := oaBatchJSON{ID: b.id, Object: "batch", Endpoint: b.endpoint, Model: strPtr(b.model), InputFileID: b.inputFileID,
		CompletionWindow: b.window, Status: b.oaStatus(), OutputFileID: strPtr(b.outputFileID), ErrorFileID: strPtr(b.errorFileID),
		CreatedAt: b.created.Unix(), ExpiresAt: unix(b.deadline), Metadata: b.metadata}
	if out.Status == endFailed {
		out.Errors = &oaBatchErrors{Object: "list", Data: b.errors}
		out.FailedAt = unix(b.endedAt)
		return out
	}
	out.InProgressAt = unix(b.created)
	if !b.cancelAt.IsZero() {
		out.CancellingAt = unix(b.cancelAt)
	}
	switch out.Status {
	case "completed":
		out.FinalizingAt, out.CompletedAt = unix(b.endedAt), unix(b.endedAt)
	case "expired":
		out.ExpiredAt = unix(b.endedAt)
	case "cancelled":
		out.CancelledAt = unix(b.endedAt)
	}
	out.RequestCounts = oaRequestCounts{Total: len(b.lines), Completed: b.succeeded, Failed: b.errored}
	if b.ended {
		_, errored, expired, canceled := b.counts()
		out.RequestCounts.Failed = errored + expired + canceled
	}
	u := &out.Usage
	u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens = b.usage.input, b.usage.cached, b.usage.output
	u.TotalTokens = b.usage.input + b.usage.output
	return out
}

// oaCreate is POST /v1/batches. The input file is validated at once; a
// file with a bad line makes a batch that is failed from its first poll
// on, with the lines' errors in errors.data, as OpenAI reports them.
func (s *Server) oaCreate(c *call, _ batchRoute, body []byte) {
	var in struct {
		InputFileID      string          `json:"input_file_id"`
		Endpoint         string          `json:"endpoint"`
		CompletionWindow string          `json:"completion_window"`
		Metadata         json.RawMessage `json:"metadata"`
	}
	if err := decodeStrict(body, &in); err != nil {
		c.fail(badRequest("We could not parse the JSON body of your request. (%v)", err), nil)
		return
	}
	switch {
	case in.InputFileID == "":
		c.fail(missingParam("input_file_id"), nil)
		return
	case in.Endpoint == "":
		c.fail(missingParam("endpoint"), nil)
		return
	case in.CompletionWindow == "":
		c.fail(missingParam("completion_window"), nil)
		return
	case in.Endpoint != "/v1/chat/completions":
		c.fail(invalidParam("endpoint", "Invalid value: '%s'. The simulator serves batches of '/v1/chat/completions' only.", in.Endpoint), nil)
		return
	case in.CompletionWindow != "24h":
		c.fail(invalidParam("completion_window", "Invalid value: '%s'. Supported values are: '24h'.", in.CompletionWindow), nil)
		return
	}
	meta, aerr := openAIMetadata(in.Metadata)
	if aerr != nil {
		c.fail(aerr, nil)
		return
	}
	f := s.batches.file(in.InputFileID)
	switch {
	case f == nil:
		c.fail(invalidParam("input_file_id", "Invalid 'input_file_id': '%s'. No such File object.", in.InputFileID), nil)
		return
	case f.purpose != "batch":
		c.fail(invalidParam("input_file_id", "Invalid file purpose: the input file of a batch must have purpose 'batch', not '%s'.", f.purpose), nil)
		return
	}
	if s.cfg.QuotaExhausted {
		s.stats.event(EventQuota)
		c.quota()
		return
	}
	id := s.batches.newID(s, "batch_", "batch")
	lines, model, errs := openAILines(f.data, in.Endpoint)
	var b *simBatch
	if len(errs) > 0 {
		b = &simBatch{provider: "openai", id: id, created: c.now, deadline: c.now.Add(s.cfg.Batch.Deadline),
			errors: errs, ended: true, endedAt: c.now, endReason: endFailed}
		s.batches.created.Add(1)
		s.batches.failed.Add(1)
		s.batches.ended.Add(1)
	} else {
		b = s.newBatch("openai", id, c.now, lines)
	}
	b.endpoint, b.window, b.inputFileID, b.model, b.metadata = in.Endpoint, in.CompletionWindow, in.InputFileID, model, meta
	s.batches.add(b)
	b.mu.Lock()
	out := b.oaJSON()
	b.mu.Unlock()
	// The create call answers before validation, like OpenAI's.
	out.Status, out.Errors, out.FailedAt, out.InProgressAt, out.Model = "validating", nil, nil, nil, nil
	out.RequestCounts = oaRequestCounts{}
	c.writeJSON(out)
}

// openAIMetadata checks a batch's metadata: at most 16 string values,
// keys up to 64 characters, values up to 512.
func openAIMetadata(raw json.RawMessage) (map[string]string, *apiError) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalidParam("metadata", "Invalid type for 'metadata': expected an object with string values.")
	}
	if len(m) > 16 {
		return nil, invalidParam("metadata", "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got %d instead.", len(m))
	}
	for k, v := range m {
		if len(k) > 64 || len(v) > 512 {
			return nil, invalidParam("metadata", "Invalid 'metadata': keys may be at most 64 characters and values at most 512.")
		}
	}
	return m, nil
}

// openAILines reads a batch input file: one request a line, each
// {custom_id, method, url, body}. A bad line is an error with its line
// number, with the codes OpenAI documents where one fits.
func openAILines(data []byte, endpoint string) ([]*batchLine, string, []batchError) {
	var lines []*batchLine
	var errs []batchError
	model := ""
	seen := map[string]bool{}
	fail := func(line int, code, param, format string, a ...any) {
		if len(errs) < maxBatchErrors {
			e := batchError{Code: code, Message: fmt.Sprintf(format, a...), Line: &line}
			if param != "" {
				e.Param = &param
			}
			errs = append(errs, e)
		}
	}
	for i, raw := range bytes.Split(data, []byte("\n")) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		n := i + 1
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			fail(n, "invalid_json_line", "", "This line is not parseable as valid JSON.")
			continue
		}
		str := func(k string) (string, bool) {
			var v string
			return v, json.Unmarshal(obj[k], &v) == nil && v != ""
		}
		customID, ok := str("custom_id")
		if !ok {
			fail(n, "missing_required_parameter", "custom_id", "Missing required parameter: 'custom_id'.")
			continue
		}
		if seen[customID] {
			fail(n, "duplicate_custom_id", "custom_id", "The custom_id for this request is a duplicate of another request. The custom_id parameter must be unique for each request in a batch.")
			continue
		}
		seen[customID] = true
		switch method, ok := str("method"); {
		case !ok:
			fail(n, "missing_required_parameter", "method", "Missing required parameter: 'method'.")
			continue
		case method != http.MethodPost:
			fail(n, "invalid_value", "method", "Invalid value: '%s'. Supported values are: 'POST'.", method)
			continue
		}
		switch url, ok := str("url"); {
		case !ok:
			fail(n, "missing_required_parameter", "url", "Missing required parameter: 'url'.")
			continue
		case url != endpoint:
			fail(n, "url_mismatch", "url", "The URL provided for this request does not match the batch endpoint: '%s', want '%s'.", url, endpoint)
			continue
		}
		body := bytes.TrimSpace(obj["body"])
		if len(body) == 0 || body[0] != '{' {
			fail(n, "missing_required_parameter", "body", "Missing required parameter: 'body' (a JSON object).")
			continue
		}
		var head struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &head)
		if head.Model != "" {
			if model == "" {
				model = head.Model
			} else if head.Model != model {
				fail(n, "model_mismatch", "body.model", "The model '%s' of this request differs from the batch's model '%s'; a batch uses one model.", head.Model, model)
				continue
			}
		}
		lines = append(lines, &batchLine{customID: customID, body: append(json.RawMessage(nil), body...)})
	}
	switch {
	case len(errs) > 0:
	case len(lines) == 0:
		errs = append(errs, batchError{Code: "empty_file", Message: "The batch input file is empty."})
	case len(lines) > openAIMaxBatchLines:
		errs = append(errs, batchError{Code: "too_many_tasks", Message: fmt.Sprintf("The batch input file has %d requests; the maximum is %d.", len(lines), openAIMaxBatchLines)})
	}
	return lines, model, errs
}

func (s *Server) oaBatchOr404(c *call, id string) *simBatch {
	b := s.batches.get("openai", id)
	if b == nil {
		c.fail(&apiError{status: 404, typ: "invalid_request_error", msg: fmt.Sprintf("No batch found with id '%s'.", id)}, nil)
	}
	return b
}

// oaRetrieve is GET /v1/batches/{id}.
func (s *Server) oaRetrieve(c *call, br batchRoute, _ []byte) {
	b := s.oaBatchOr404(c, br.id)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.advance(s, c.now)
	out := b.oaJSON()
	b.mu.Unlock()
	c.writeJSON(out)
}

// oaCancel is POST /v1/batches/{id}/cancel: it answers cancelling; the
// batch is cancelled Config.Batch.CancelDelay later.
func (s *Server) oaCancel(c *call, br batchRoute, _ []byte) {
	b := s.oaBatchOr404(c, br.id)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.advance(s, c.now)
	if b.ended {
		status := b.oaStatus()
		b.mu.Unlock()
		c.fail(badRequest("Cannot cancel a batch with status '%s'.", status), nil)
		return
	}
	if b.cancelAt.IsZero() {
		b.cancelAt = c.now
	}
	out := b.oaJSON()
	b.mu.Unlock()
	c.writeJSON(out)
}

// listLimit reads a list's limit query parameter.
func listLimit(r *http.Request, maxLimit int) (int, *apiError) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 20, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, invalidParam("limit", "Invalid 'limit': expected an integer from 1 to %d, got '%s'.", maxLimit, v)
	}
	return n, nil
}

// page cuts a newest-first list after the id after (older ones) or before
// the id before (newer ones); more says whether the list goes on in that
// direction.
func page(all []*simBatch, after, before string, limit int) ([]*simBatch, bool) {
	from, to := 0, len(all)
	for i, b := range all {
		if after != "" && b.id == after {
			from = i + 1
		}
		if before != "" && b.id == before {
			to = i
		}
	}
	if from > to {
		return nil, false
	}
	if before != "" && after == "" { // the page just newer than before
		from = max(0, to-limit)
		return all[from:to], from > 0
	}
	end := min(to, from+limit)
	return all[from:end], end < to
}

// oaList is GET /v1/batches: newest first, with after and limit.
func (s *Server) oaList(c *call, _ batchRoute, _ []byte) {
	limit, aerr := listLimit(c.r, 100)
	if aerr != nil {
		c.fail(aerr, nil)
		return
	}
	items, more := page(s.batches.newestFirst("openai"), c.r.URL.Query().Get("after"), "", limit)
	out := struct {
		Object  string        `json:"object"`
		Data    []oaBatchJSON `json:"data"`
		FirstID *string       `json:"first_id"`
		LastID  *string       `json:"last_id"`
		HasMore bool          `json:"has_more"`
	}{Object: "list", Data: []oaBatchJSON{}, HasMore: more}
	for _, b := range items {
		b.mu.Lock()
		b.advance(s, c.now)
		out.Data = append(out.Data, b.oaJSON())
		b.mu.Unlock()
	}
	if len(items) > 0 {
		out.FirstID, out.LastID = &items[0].id, &items[len(items)-1].id
	}
	c.writeJSON(out)
}

// Anthropic Message Batch object.
type antBatchJSON struct {
	ID                string           `json:"id"`
	Type              string           `json:"type"`
	ProcessingStatus  string           `json:"processing_status"`
	RequestCounts     antRequestCounts `json:"request_counts"`
	EndedAt           *string          `json:"ended_at"`
	CreatedAt         string           `json:"created_at"`
	ExpiresAt         string           `json:"expires_at"`
	ArchivedAt        *string          `json:"archived_at"`
	CancelInitiatedAt *string          `json:"cancel_initiated_at"`
	ResultsURL        *string          `json:"results_url"`
}

type antRequestCounts struct {
	Processing int `json:"processing"`
	Succeeded  int `json:"succeeded"`
	Errored    int `json:"errored"`
	Canceled   int `json:"canceled"`
	Expired    int `json:"expired"`
}

func antTime(t time.Time) *string {
	s := t.UTC().Format(anthropicTime)
	return &s
}

// antJSON renders an Anthropic batch; base is the URL up to the batch
// collection, for results_url. The counts move only when the batch ends,
// as the documentation's examples show. The caller holds b.mu.
func (b *simBatch) antJSON(base string) antBatchJSON {
	out := antBatchJSON{ID: b.id, Type: "message_batch", ProcessingStatus: "in_progress",
		RequestCounts: antRequestCounts{Processing: len(b.lines)},
		CreatedAt:     *antTime(b.created), ExpiresAt: *antTime(b.deadline)}
	if !b.cancelAt.IsZero() {
		out.ProcessingStatus, out.CancelInitiatedAt = "canceling", antTime(b.cancelAt)
	}
	if b.ended {
		succeeded, errored, expired, canceled := b.counts()
		out.ProcessingStatus = "ended"
		out.RequestCounts = antRequestCounts{Succeeded: succeeded, Errored: errored, Canceled: canceled, Expired: expired}
		out.EndedAt = antTime(b.endedAt)
		url := base + "/" + b.id + "/results"
		out.ResultsURL = &url
	}
	return out
}

// antBase is the URL of the batch collection the request named.
func antBase(r *http.Request, br batchRoute) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + br.prefix
}

// validCustomID is Anthropic's ^[a-zA-Z0-9_-]{1,64}$.
func validCustomID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_', ch == '-':
		default:
			return false
		}
	}
	return true
}

// antCreate is POST /v1/messages/batches. The requests' params are not
// checked here: a request Anthropic would refuse ends errored with that
// error, as its single call would.
func (s *Server) antCreate(c *call, br batchRoute, body []byte) {
	var in struct {
		Requests []struct {
			CustomID *string         `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	if err := decodeStrict(body, &in); err != nil {
		c.fail(badRequest("invalid JSON body: %v", err), nil)
		return
	}
	switch n := len(in.Requests); {
	case n == 0:
		c.fail(badRequest("requests: List should have at least 1 item after validation, not 0"), nil)
		return
	case n > anthropicMaxBatchRequests:
		c.fail(badRequest("requests: List should have at most %d items after validation, not %d", anthropicMaxBatchRequests, n), nil)
		return
	}
	lines := make([]*batchLine, len(in.Requests))
	seen := make(map[string]bool, len(in.Requests))
	for i, q := range in.Requests {
		params := bytes.TrimSpace(q.Params)
		switch {
		case q.CustomID == nil:
			c.fail(badRequest("requests.%d.custom_id: Field required", i), nil)
			return
		case !validCustomID(*q.CustomID):
			c.fail(badRequest("requests.%d.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i), nil)
			return
		case seen[*q.CustomID]:
			c.fail(badRequest("requests.%d.custom_id: Duplicate custom_id '%s'; each request of a batch needs its own", i, *q.CustomID), nil)
			return
		case len(params) == 0 || string(params) == "null":
			c.fail(badRequest("requests.%d.params: Field required", i), nil)
			return
		case params[0] != '{':
			c.fail(badRequest("requests.%d.params: Input should be a valid dictionary", i), nil)
			return
		}
		seen[*q.CustomID] = true
		lines[i] = &batchLine{customID: *q.CustomID, body: append(json.RawMessage(nil), params...)}
	}
	if s.cfg.QuotaExhausted {
		s.stats.event(EventQuota)
		c.quota()
		return
	}
	id := s.batches.newID(s, "msgbatch_01", "msgbatch")[:len("msgbatch_01")+22]
	b := s.newBatch("anthropic", id, c.now, lines)
	s.batches.add(b)
	b.mu.Lock()
	out := b.antJSON(antBase(c.r, br))
	b.mu.Unlock()
	c.writeJSON(out)
}

func (s *Server) antBatchOr404(c *call, id string) *simBatch {
	b := s.batches.get("anthropic", id)
	if b == nil {
		c.fail(&apiError{status: 404, typ: "not_found_error", msg: "The requested resource could not be found."}, nil)
	}
	return b
}

// antRetrieve is GET /v1/messages/batches/{id}.
func (s *Server) antRetrieve(c *call, br batchRoute, _ []byte) {
	b := s.antBatchOr404(c, br.id)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.advance(s, c.now)
	out := b.antJSON(antBase(c.r, br))
	b.mu.Unlock()
	c.writeJSON(out)
}

// antCancel is POST /v1/messages/batches/{id}/cancel: it answers
// canceling; the batch ends Config.Batch.CancelDelay later.
func (s *Server) antCancel(c *call, br batchRoute, _ []byte) {
	b := s.antBatchOr404(c, br.id)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.advance(s, c.now)
	if b.ended {
		b.mu.Unlock()
		c.fail(badRequest("Message Batch %s has ended and can no longer be canceled.", b.id), nil)
		return
	}
	if b.cancelAt.IsZero() {
		b.cancelAt = c.now
	}
	out := b.antJSON(antBase(c.r, br))
	b.mu.Unlock()
	c.writeJSON(out)
}

// antResults is GET /v1/messages/batches/{id}/results (results_url).
func (s *Server) antResults(c *call, br batchRoute, _ []byte) {
	b := s.antBatchOr404(c, br.id)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.advance(s, c.now)
	if !b.ended {
		b.mu.Unlock()
		c.fail(badRequest("Message Batch %s is still processing; its results are available once processing_status is 'ended'.", b.id), nil)
		return
	}
	data := b.anthropicResults()
	b.mu.Unlock()
	c.download("application/x-jsonl", data)
}

// antList is GET /v1/messages/batches: newest first, with limit, after_id
// and before_id.
func (s *Server) antList(c *call, br batchRoute, _ []byte) {
	limit, aerr := listLimit(c.r, 1000)
	if aerr != nil {
		c.fail(aerr, nil)
		return
	}
	q := c.r.URL.Query()
	items, more := page(s.batches.newestFirst("anthropic"), q.Get("after_id"), q.Get("before_id"), limit)
	out := struct {
		Data    []antBatchJSON `json:"data"`
		HasMore bool           `json:"has_more"`
		FirstID *string        `json:"first_id"`
		LastID  *string        `json:"last_id"`
	}{Data: []antBatchJSON{}, HasMore: more}
	base := antBase(c.r, br)
	for _, b := range items {
		b.mu.Lock()
		b.advance(s, c.now)
		out.Data = append(out.Data, b.antJSON(base))
		b.mu.Unlock()
	}
	if len(items) > 0 {
		out.FirstID, out.LastID = &items[0].id, &items[len(items)-1].id
	}
	c.writeJSON(out)
}
