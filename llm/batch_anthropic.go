package llm

import (
	"context"
	"net/http"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// Anthropic Message Batches wire types (only the fields we send or read).

// anBatch is a Message Batch object; times are RFC 3339, null until set.
type anBatch struct {
	ID               string `json:"id"`
	ProcessingStatus string `json:"processing_status"`
	RequestCounts    struct {
		Processing int `json:"processing"`
		Succeeded  int `json:"succeeded"`
		Errored    int `json:"errored"`
		Canceled   int `json:"canceled"`
		Expired    int `json:"expired"`
	} `json:"request_counts"`
	CreatedAt         *time.Time `json:"created_at"`
	EndedAt           *time.Time `json:"ended_at"`
	ExpiresAt         *time.Time `json:"expires_at"`
	CancelInitiatedAt *time.Time `json:"cancel_initiated_at"`
	ResultsURL        string     `json:"results_url"`
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// status normalizes the Message Batch object. An ended batch is
// cancelled when a cancel was asked for, expired when requests expired,
// else completed.
func (b *anBatch) status() BatchStatus {
	rc := b.RequestCounts
	st := BatchStatus{ID: b.ID, Raw: b.ProcessingStatus, ResultsURL: b.ResultsURL,
		CreatedAt: timeOf(b.CreatedAt), EndedAt: timeOf(b.EndedAt), ExpiresAt: timeOf(b.ExpiresAt),
		Counts: BatchCounts{Succeeded: rc.Succeeded, Errored: rc.Errored, Expired: rc.Expired, Cancelled: rc.Canceled,
			Processing: rc.Processing, Total: rc.Processing + rc.Succeeded + rc.Errored + rc.Canceled + rc.Expired}}
	switch b.ProcessingStatus {
	case "in_progress":
		st.State = BatchInProgress
	case "canceling":
		st.State = BatchCancelling
	case "ended":
		st.Ended = true
		switch {
		case b.CancelInitiatedAt != nil:
			st.State = BatchCancelled
		case rc.Expired > 0:
			st.State = BatchExpired
		default:
			st.State = BatchCompleted
		}
	default:
		st.State = BatchState(b.ProcessingStatus) // a status we do not know: not ended, poll on
	}
	return st
}

// anthropicCreate creates a Message Batch of items.
func (c *Client) anthropicCreate(ctx context.Context, items []BatchItem) (BatchStatus, error) {
	reqs, e := c.encodeBatch(items, ',')
	if e != nil {
		return BatchStatus{}, e
	}
	op := &batchOp{what: "create batch", method: http.MethodPost, url: c.url("/v1/messages/batches", nil),
		// reqs ends with the separator after its last item: the closing
		// bracket replaces it.
		body:   [][]byte{[]byte(`{"requests":[`), reqs[:len(reqs)-1], []byte(`]}`)},
		create: true, large: true}
	return c.batchObjectOp(ctx, op)
}

// anResultLine is one line of a Message Batch's results.
type anResultLine struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
		// Error is the whole error envelope {type: "error", error: {type,
		// message}, request_id}: the useful type is error.error.type.
		Error *struct {
			Type  string `json:"type"`
			Error *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	} `json:"result"`
}

// anErrorStatus is the HTTP status of each Anthropic error type (the
// errors reference), so that an errored batch request is classified like
// the same error in realtime.
var anErrorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// anthropicResultLine reads one line of the results.
func (c *Client) anthropicResultLine(data []byte, rs *resultSink) BatchResult {
	var w anResultLine
	if err := json.Unmarshal(data, &w); err != nil {
		return BatchResult{CustomID: customIDFromHead(data), Err: &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse,
			Message: "decode result line: " + err.Error() + ": " + snippet(data), Err: err}}
	}
	r := BatchResult{CustomID: w.CustomID}
	switch w.Result.Type {
	case "succeeded":
		return rs.decode(w.CustomID, w.Result.Message, http.StatusOK, "")
	case "errored":
		r.Err = c.anthropicResultError(&w)
	case "canceled":
		r.Err = &fixpoint.ProviderError{Class: fixpoint.ClassCancelled, Code: "canceled", Message: "the batch was cancelled before this request ran"}
	case "expired":
		r.Err = &fixpoint.ProviderError{Class: fixpoint.ClassExpired, Code: "expired", Message: "the batch expired before this request ran"}
	default:
		r.Err = &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Message: "result of unknown type " + w.Result.Type + ": " + snippet(data)}
	}
	return r
}

// anthropicResultError classifies an errored result by its nested error
// type, as classify would classify that error's status in realtime. Some
// documentation reads result.error.type, which is always "error": both
// nestings are read.
func (c *Client) anthropicResultError(w *anResultLine) *fixpoint.ProviderError {
	env := w.Result.Error
	if env == nil {
		return &fixpoint.ProviderError{Class: fixpoint.ClassServer, Message: "errored result without an error"}
	}
	pe := providerError{Type: env.Type, Message: env.Message, ReqID: env.RequestID}
	if env.Error != nil && env.Error.Type != "" {
		pe.Type, pe.Message = env.Error.Type, env.Error.Message
	}
	pe.Code = pe.Type
	e := &fixpoint.ProviderError{Code: pe.Code, Message: pe.Message, RequestID: pe.ReqID}
	if e.Message == "" {
		e.Message = "request errored in the batch"
	}
	status, ok := anErrorStatus[pe.Type]
	switch {
	case pe.Type == "billing_error":
		e.Class = fixpoint.ClassQuotaExhausted
	case ok:
		e.Class, e.RetryAfter = classify(WireAnthropic, status, http.Header{}, pe, c.cfg.Clock.Now(), demand{})
	default:
		e.Class = fixpoint.ClassServer // a type this client does not know: try again later
	}
	return e
}
