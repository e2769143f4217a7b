package llm

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// OpenAI Batch API wire types (only the fields we send or read).

// oaBatch is a Batch object. Every *_at key may be null or absent.
type oaBatch struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	InputFileID  string `json:"input_file_id"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	Errors       *struct {
		Data []struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Param   string          `json:"param"`
			Line    json.RawMessage `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	CreatedAt     int64 `json:"created_at"`
	ExpiresAt     int64 `json:"expires_at"`
	CompletedAt   int64 `json:"completed_at"`
	FailedAt      int64 `json:"failed_at"`
	ExpiredAt     int64 `json:"expired_at"`
	CancelledAt   int64 `json:"cancelled_at"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Metadata map[string]string `json:"metadata"`
}

// oaTokenLimitExceeded is the code of a batch failed because the
// organization's enqueued-token limit for the model was full: it can be
// created again once running batches finish.
const oaTokenLimitExceeded = "token_limit_exceeded"

func unixTime(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// status normalizes the Batch object.
func (b *oaBatch) status() BatchStatus {
	st := BatchStatus{ID: b.ID, Raw: b.Status, InputFileID: b.InputFileID, OutputFileID: b.OutputFileID,
		ErrorFileID: b.ErrorFileID, Metadata: b.Metadata, CreatedAt: unixTime(b.CreatedAt), ExpiresAt: unixTime(b.ExpiresAt)}
	var endedAt int64
	switch b.Status {
	case "validating":
		st.State = BatchValidating
	case "in_progress":
		st.State = BatchInProgress
	case "finalizing":
		st.State = BatchFinalizing
	case "cancelling":
		st.State = BatchCancelling
	case "completed":
		st.State, st.Ended, endedAt = BatchCompleted, true, b.CompletedAt
	case "failed":
		st.State, st.Ended, endedAt = BatchFailed, true, b.FailedAt
	case "expired":
		st.State, st.Ended, endedAt = BatchExpired, true, b.ExpiredAt
	case "cancelled":
		st.State, st.Ended, endedAt = BatchCancelled, true, b.CancelledAt
	default:
		st.State = BatchState(b.Status) // a status we do not know: not ended, poll on
	}
	st.EndedAt = unixTime(endedAt)
	rc := b.RequestCounts
	st.Counts = BatchCounts{Total: rc.Total, Succeeded: rc.Completed, Errored: rc.Failed}
	if !st.Ended {
		st.Counts.Processing = max(0, rc.Total-rc.Completed-rc.Failed)
	}
	if b.Errors != nil {
		for _, d := range b.Errors.Data {
			var line int
			_ = json.Unmarshal(d.Line, &line) // null or absent: 0
			st.Errors = append(st.Errors, BatchError{Code: d.Code, Message: d.Message, Param: d.Param, Line: line})
		}
	}
	if st.State == BatchFailed {
		e := &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "batch failed"}
		if len(st.Errors) > 0 {
			e.Code = st.Errors[0].Code
			msgs := make([]string, len(st.Errors))
			for i, be := range st.Errors {
				msgs[i] = be.Message
				if be.Line > 0 {
					msgs[i] = fmt.Sprintf("line %d: %s", be.Line, be.Message)
				}
				if be.Code == oaTokenLimitExceeded {
					e.Class = fixpoint.ClassRateLimited
				}
			}
			e.Message = "batch failed: " + strings.Join(msgs, "; ")
		}
		st.Err = e
	}
	return st
}

// openAIUpload uploads jsonl (the encoded items) with purpose=batch.
func (c *Client) openAIUpload(ctx context.Context, jsonl []byte) (string, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return "", &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "build upload: " + err.Error(), Err: err}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="batch.jsonl"`)
	h.Set("Content-Type", "application/jsonl")
	if _, err := mw.CreatePart(h); err != nil {
		return "", &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "build upload: " + err.Error(), Err: err}
	}
	// The file's bytes follow the part's header; the closing boundary is
	// what multipart.Writer.Close would write.
	tail := []byte("\r\n--" + mw.Boundary() + "--\r\n")
	op := &batchOp{what: "upload batch file", method: http.MethodPost, url: c.url("/files", nil),
		body: [][]byte{head.Bytes(), jsonl, tail}, contentType: mw.FormDataContentType(), create: true, large: true}
	var f struct {
		ID string `json:"id"`
	}
	if err := c.batchJSON(ctx, op, &f); err != nil {
		return "", err
	}
	if f.ID == "" {
		return "", &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: http.StatusOK, Message: "upload batch file: the file object has no id", Err: ErrBatchMaybeCreated}
	}
	return f.ID, nil
}

// OpenAI's documented metadata limits.
const (
	oaMetadataMaxPairs    = 16
	oaMetadataMaxKeyLen   = 64
	oaMetadataMaxValueLen = 512
)

// openAICreate creates a batch from the uploaded file fileID.
func (c *Client) openAICreate(ctx context.Context, fileID string, metadata map[string]string) (BatchStatus, error) {
	if fileID == "" {
		return BatchStatus{}, batchInvalid(nil, "create batch: input file id is empty (upload the items first)")
	}
	if len(metadata) > oaMetadataMaxPairs {
		return BatchStatus{}, batchInvalid(nil, "create batch: %d metadata pairs, over OpenAI's %d", len(metadata), oaMetadataMaxPairs)
	}
	for k, v := range metadata {
		if utf8.RuneCountInString(k) > oaMetadataMaxKeyLen || utf8.RuneCountInString(v) > oaMetadataMaxValueLen {
			return BatchStatus{}, batchInvalid(nil, "create batch: metadata %q is over OpenAI's limits (key %d, value %d characters)",
				k, oaMetadataMaxKeyLen, oaMetadataMaxValueLen)
		}
	}
	body, err := json.Marshal(struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata,omitempty"`
	}{fileID, openAIBatchEndpoint, openAIBatchWindow, metadata})
	if err != nil {
		return BatchStatus{}, batchInvalid(nil, "create batch: encode: %v", err)
	}
	op := &batchOp{what: "create batch", method: http.MethodPost, url: c.url("/batches", nil), body: [][]byte{body}, create: true}
	return c.batchObjectOp(ctx, op)
}

// oaResultLine is one line of an output or error file.
type oaResultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"error"`
}

// openAIResultLine reads one line of an output or error file. Its
// failure is in error ({code, message}, e.g. batch_expired, with response
// null) or, for a request the API refused, in response.status_code and
// response.body.error (with error null).
func (c *Client) openAIResultLine(data []byte, rs *resultSink) BatchResult {
	var w oaResultLine
	if err := json.Unmarshal(data, &w); err != nil {
		return BatchResult{CustomID: customIDFromHead(data), Err: &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse,
			Message: "decode result line: " + err.Error() + ": " + snippet(data), Err: err}}
	}
	r := BatchResult{CustomID: w.CustomID}
	switch resp := w.Response; {
	case resp != nil && resp.StatusCode != 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		pe := parseProviderError(resp.Body)
		class, hint := classify(WireOpenAIChat, resp.StatusCode, http.Header{}, pe, c.cfg.Clock.Now(), demand{})
		msg := pe.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		r.Err = &fixpoint.ProviderError{Class: class, Status: resp.StatusCode, Code: pe.Code, Message: msg, RequestID: resp.RequestID, RetryAfter: hint}
	case w.Error != nil:
		code := rawString(w.Error.Code)
		class := fixpoint.ClassServer // a failure the line does not explain: try again later
		switch code {
		case "batch_expired":
			class = fixpoint.ClassExpired
		case "batch_cancelled", "batch_canceled":
			class = fixpoint.ClassCancelled
		}
		msg := w.Error.Message
		if msg == "" {
			msg = "request failed in the batch"
		}
		r.Err = &fixpoint.ProviderError{Class: class, Code: code, Message: msg}
		if resp != nil {
			r.Err.Status, r.Err.RequestID = resp.StatusCode, resp.RequestID
		}
	case resp != nil && len(bytes.TrimSpace(resp.Body)) > 0 && string(bytes.TrimSpace(resp.Body)) != "null":
		status := resp.StatusCode
		if status == 0 {
			status = http.StatusOK
		}
		return rs.decode(w.CustomID, resp.Body, status, resp.RequestID)
	default:
		r.Err = &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Message: "result line has neither a response nor an error: " + snippet(data)}
	}
	return r
}
