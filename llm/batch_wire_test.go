package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// The batch client against the recorded batch responses of
// testdata/wire/batch, served by batchReplay with ids kept consistent
// across upload, create, poll and download.

const batchTestKey = "sk-batch-test-key-0123456789"

// batchTestClient is a client of provider at base with two quick retries.
func batchTestClient(t *testing.T, provider, base string) *Client {
	t.Helper()
	if WireOf(provider) == WireOpenAIChat {
		base += "/v1"
	}
	return testClient(t, Config{Provider: provider, BaseURL: base, APIKey: batchTestKey,
		Retry: RetryConfig{MaxRetries: 2, NoJitter: true}})
}

// completeBody returns the body Complete sends for req from a client
// configured like c.
func completeBody(t *testing.T, c *Client, req fixpoint.Request) []byte {
	t.Helper()
	reply := okOpenAI
	if c.cfg.Provider == ProviderAnthropic {
		reply = okAnthropic
	}
	rec := newRecorder(t, replyJSON(200, reply))
	cfg := c.Config()
	cfg.BaseURL = rec.srv.URL
	if WireOf(cfg.Provider) == WireOpenAIChat {
		cfg.BaseURL += "/v1"
	}
	cfg.Lanes = nil
	if _, err := testClient(t, cfg).Complete(context.Background(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("Complete made %d requests", len(reqs))
	}
	return reqs[0].Body
}

// batchTestSchema has keywords OpenAI's strict mode leaves out.
var batchTestSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1},"age":{"type":"integer"}},"required":["name"]}`)

// batchTestItems are n items of one model in every mode.
func batchTestItems(n int, ids ...string) []BatchItem {
	temp := 0.3
	items := make([]BatchItem, n)
	for i := range items {
		req := fixpoint.Request{Model: "gpt-4o-mini", System: "Extract the person. <json-schema> & co", MaxTokens: 200 + i, Temperature: &temp,
			Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "row " + string(rune('A'+i))}}, User: "job-" + string(rune('a'+i))}
		switch i % 3 {
		case 1:
			req.Mode, req.Schema = fixpoint.ModeJSONSchema, batchTestSchema
		case 2:
			req.Mode, req.Schema, req.SchemaName = fixpoint.ModeTool, batchTestSchema, "person"
		default:
			req.Mode = fixpoint.ModePrompt
		}
		if i%2 == 1 {
			req.CacheKey, req.CacheSystem = "nightly-1:schema-9f2c", true // prompt caching, as in realtime
		}
		items[i] = BatchItem{CustomID: ids[i], Request: req}
	}
	return items
}

// collect runs BatchResults and returns the results in delivery order.
func collect(t *testing.T, c *Client, st BatchStatus, items []BatchItem) []BatchResult {
	t.Helper()
	var got []BatchResult
	err := c.BatchResults(context.Background(), st, itemLookup(items), func(r BatchResult) error {
		if (r.Response == nil) == (r.Err == nil) {
			t.Errorf("result %q: want exactly one of Response and Err, got %+v", r.CustomID, r)
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("BatchResults: %v", err)
	}
	return got
}

func itemLookup(items []BatchItem) func(string) (fixpoint.Request, bool) {
	m := make(map[string]fixpoint.Request, len(items))
	for _, it := range items {
		m[it.CustomID] = it.Request
	}
	return func(id string) (fixpoint.Request, bool) {
		r, ok := m[id]
		return r, ok
	}
}

// wantResp checks a succeeded result.
func wantResp(t *testing.T, r BatchResult, id, text string, usage fixpoint.Usage, model, requestID string, dropped []string) {
	t.Helper()
	if r.CustomID != id || r.Response == nil {
		t.Fatalf("result %q (err %v), want %q to succeed", r.CustomID, r.Err, id)
	}
	p := r.Response
	if p.Text != text || p.FinishReason != fixpoint.FinishStop || p.Usage != usage || p.Model != model || p.RequestID != requestID || p.Status != 200 ||
		!reflect.DeepEqual(p.DroppedKeywords, dropped) {
		t.Fatalf("result %q: text=%q finish=%s usage=%+v model=%q requestID=%q status=%d dropped=%v\nwant text=%q usage=%+v model=%q requestID=%q dropped=%v",
			id, p.Text, p.FinishReason, p.Usage, p.Model, p.RequestID, p.Status, p.DroppedKeywords, text, usage, model, requestID, dropped)
	}
}

// wantErr checks a failed result.
func wantErr(t *testing.T, r BatchResult, id string, class fixpoint.ErrorClass, status int, code, requestID, msgPart string) {
	t.Helper()
	if r.CustomID != id || r.Err == nil {
		t.Fatalf("result %q (response %+v), want %q to fail", r.CustomID, r.Response, id)
	}
	e := r.Err
	if e.Class != class || e.Status != status || e.Code != code || e.RequestID != requestID || !strings.Contains(e.Message, msgPart) {
		t.Fatalf("result %q: class=%s status=%d code=%q requestID=%q message=%q\nwant class=%s status=%d code=%q requestID=%q message containing %q",
			id, e.Class, e.Status, e.Code, e.RequestID, e.Message, class, status, code, requestID, msgPart)
	}
}

func wantPaths(t *testing.T, reqs []bRequest, want ...string) {
	t.Helper()
	var got []string
	for _, r := range reqs {
		got = append(got, r.method+" "+r.path)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("requests\n got: %q\nwant: %q", got, want)
	}
}

func TestBatchOpenAIFlow(t *testing.T) {
	t.Parallel()
	rp := newBatchReplay(t, map[string][]bEntry{
		"openai.files.create":   {{name: "openai_batch_file_upload"}},
		"openai.batches.create": {{name: "openai_batch_create_validating", set: map[string]any{"input_file_id": "${input_file_id}"}}},
		"openai.batches.retrieve": {
			{name: "openai_batch_retrieve_in_progress", set: map[string]any{"id": "${batch_id}", "input_file_id": "${input_file_id}"}},
			{name: "openai_batch_retrieve_completed", set: map[string]any{"id": "${batch_id}", "input_file_id": "${input_file_id}"}},
		},
		// Output file then error file; the output's two lines are out of
		// upload order.
		"openai.files.content": {
			{name: "openai_batch_output_jsonl", customIDs: []any{1, 0}},
			{name: "openai_batch_error_file_http_400", customIDs: []any{2}},
		},
		"openai.batches.cancel": {{name: "openai_batch_cancel_cancelling", set: map[string]any{"id": "${batch_id}"}}},
	})
	c := batchTestClient(t, ProviderOpenAI, rp.srv.URL)
	ctx := context.Background()
	items := batchTestItems(3, "job-1", "job-2", "job-3")

	fileID, err := c.UploadBatchFile(ctx, items)
	if err != nil {
		t.Fatalf("UploadBatchFile: %v", err)
	}
	if fileID != "file-nG1JDPSMRMinN8FOdaL30kVD" {
		t.Fatalf("file id = %q, want the uploaded file's", fileID)
	}
	up := rp.requests()[0].upload
	if up == nil || up.fields["purpose"] != "batch" || !strings.HasSuffix(up.filename, ".jsonl") || len(up.fields) != 1 {
		t.Fatalf("upload = %+v, want one field purpose=batch and a .jsonl file", up)
	}
	lines := bytes.Split(bytes.TrimSuffix(up.content, []byte("\n")), []byte("\n"))
	if len(lines) != len(items) {
		t.Fatalf("uploaded %d lines, want %d:\n%s", len(lines), len(items), up.content)
	}
	for i, line := range lines {
		var l map[string]json.RawMessage
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("line %d is not a JSON object: %v", i, err)
		}
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, []string{"body", "custom_id", "method", "url"}) ||
			string(l["custom_id"]) != `"`+items[i].CustomID+`"` || string(l["method"]) != `"POST"` || string(l["url"]) != `"/v1/chat/completions"` {
			t.Fatalf("line %d = %s, want {custom_id %q, method POST, url /v1/chat/completions, body}", i, line, items[i].CustomID)
		}
		if want := completeBody(t, c, items[i].Request); !bytes.Equal(l["body"], want) {
			t.Fatalf("line %d body differs from what Complete sends:\n got: %s\nwant: %s", i, l["body"], want)
		}
	}

	meta := map[string]string{"fixpoint_wave": "nightly-1/w1", "fixpoint_batch": "nightly-1"}
	st, err := c.CreateBatch(ctx, fileID, nil, meta)
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	jsonEqual(t, rp.requests()[1].body, `{"input_file_id":"file-nG1JDPSMRMinN8FOdaL30kVD","endpoint":"/v1/chat/completions","completion_window":"24h",
		"metadata":{"fixpoint_wave":"nightly-1/w1","fixpoint_batch":"nightly-1"}}`)
	if st.ID != "batch_abc123" || st.State != BatchValidating || st.Raw != "validating" || st.Ended || st.InputFileID != fileID ||
		st.Metadata["batch_description"] != "Nightly eval job" || !st.CreatedAt.Equal(time.Unix(1711471533, 0)) || !st.ExpiresAt.IsZero() {
		t.Fatalf("created = %+v", st)
	}

	st, err = c.RetrieveBatch(ctx, st.ID)
	if err != nil {
		t.Fatalf("RetrieveBatch: %v", err)
	}
	if st.State != BatchInProgress || st.Ended || st.Counts != (BatchCounts{Total: 100, Succeeded: 23, Errored: 1, Processing: 76}) || st.OutputFileID != "" {
		t.Fatalf("in progress = %+v", st)
	}
	st, err = c.RetrieveBatch(ctx, st.ID)
	if err != nil {
		t.Fatalf("RetrieveBatch: %v", err)
	}
	if st.State != BatchCompleted || !st.Ended || st.OutputFileID != "file-cvaTdG" || st.ErrorFileID != "file-HOWS94" ||
		st.Counts != (BatchCounts{Total: 100, Succeeded: 95, Errored: 5}) || !st.EndedAt.Equal(time.Unix(1711493163, 0)) || st.Err != nil {
		t.Fatalf("completed = %+v", st)
	}

	got := collect(t, c, st, items)
	if len(got) != 3 {
		t.Fatalf("got %d results, want 3: %+v", len(got), got)
	}
	wantResp(t, got[0], "job-2", "Hello.", fixpoint.Usage{InputTokens: 22, OutputTokens: 2, CachedInputTokens: 0}, "gpt-3.5-turbo-0125", "req_123", []string{"/properties/name/minLength", "/required"})
	wantResp(t, got[1], "job-1", "Hello! How can I assist you today?", fixpoint.Usage{InputTokens: 20, OutputTokens: 9, CachedInputTokens: 0}, "gpt-3.5-turbo-0125", "req_789", nil)
	wantErr(t, got[2], "job-3", fixpoint.ClassBadRequest, 400, "context_length_exceeded", "0538a1cc8f8f8500bbe07250e6aa2b26", "maximum context length is 128000 tokens")
	if !got[2].Err.Permanent() {
		t.Errorf("a 400 in the error file must be permanent")
	}

	if st, err = c.CancelBatch(ctx, st.ID); err != nil || st.State != BatchCancelling || st.Raw != "cancelling" || st.Ended || st.ID != "batch_abc123" {
		t.Fatalf("CancelBatch = %+v, %v", st, err)
	}

	reqs := rp.requests()
	wantPaths(t, reqs, "POST /v1/files", "POST /v1/batches", "GET /v1/batches/batch_abc123", "GET /v1/batches/batch_abc123",
		"GET /v1/files/file-cvaTdG/content", "GET /v1/files/file-HOWS94/content", "POST /v1/batches/batch_abc123/cancel")
	for _, r := range reqs {
		if r.header.Get("Authorization") != "Bearer "+batchTestKey || r.header.Get("X-Api-Key") != "" {
			t.Errorf("%s %s: Authorization %q, want the bearer key", r.method, r.path, r.header.Get("Authorization"))
		}
	}
	if a := reqs[4].header.Get("Accept"); a != "application/binary" {
		t.Errorf("download Accept = %q", a)
	}
	if len(c.Registry().Lanes()) != 0 {
		t.Errorf("batch calls took a lane: %v", c.Registry().Lanes())
	}
}

func TestBatchAnthropicFlow(t *testing.T) {
	t.Parallel()
	rp := newBatchReplay(t, map[string][]bEntry{
		"anthropic.batches.create": {{name: "anthropic_batch_create_in_progress"}},
		"anthropic.batches.retrieve": {
			{name: "anthropic_batch_create_in_progress", set: map[string]any{"id": "${batch_id}"}},
			// results_url on another path, so that following it would show.
			{name: "anthropic_batch_retrieve_ended", set: map[string]any{"id": "${batch_id}",
				"results_url": "${base_url}/signed/v1/messages/batches/${batch_id}/results?sig=abc"}},
		},
		// One result of each type, none in request order; job-f gets none.
		"anthropic.batches.results": {{name: "anthropic_batch_results_all_types", customIDs: []any{3, 0, 4, 1, 2}}},
		"anthropic.batches.cancel":  {{name: "anthropic_batch_cancel_canceling", set: map[string]any{"id": "${batch_id}"}}},
	})
	c := batchTestClient(t, ProviderAnthropic, rp.srv.URL)
	ctx := context.Background()
	items := batchTestItems(6, "job-a", "job-b", "job-c", "job-d", "job-e", "job-f")
	for i := range items {
		items[i].Request.Model = []string{"claude-sonnet-4-5", "claude-haiku-4-5"}[i%2] // models may differ
	}

	if _, err := c.UploadBatchFile(ctx, items); !errors.Is(err, ErrBatchUnsupported) {
		t.Fatalf("UploadBatchFile on anthropic = %v, want ErrBatchUnsupported", err)
	}
	st, err := c.CreateBatch(ctx, "ignored", items, map[string]string{"ignored": "yes"})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	var create struct {
		Requests []struct {
			CustomID string          `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	body := rp.requests()[0].body
	if err := json.Unmarshal(body, &create); err != nil || len(create.Requests) != len(items) {
		t.Fatalf("create body = %s (%v), want %d requests", body, err, len(items))
	}
	var top map[string]json.RawMessage
	json.Unmarshal(body, &top)
	if len(top) != 1 {
		t.Fatalf("create body has keys beyond requests: %s", body)
	}
	for i, r := range create.Requests {
		if r.CustomID != items[i].CustomID {
			t.Fatalf("request %d custom_id = %q, want %q", i, r.CustomID, items[i].CustomID)
		}
		if want := completeBody(t, c, items[i].Request); !bytes.Equal(r.Params, want) {
			t.Fatalf("request %d params differ from what Complete sends:\n got: %s\nwant: %s", i, r.Params, want)
		}
	}
	if st.ID != "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d" || st.State != BatchInProgress || st.Ended || st.Counts != (BatchCounts{Total: 2, Processing: 2}) ||
		!st.CreatedAt.Equal(time.Date(2024, 9, 24, 18, 37, 24, 100435000, time.UTC)) || !st.ExpiresAt.Equal(time.Date(2024, 9, 25, 18, 37, 24, 100435000, time.UTC)) ||
		st.ResultsURL != "" || st.Metadata != nil {
		t.Fatalf("created = %+v", st)
	}

	if st, err = c.RetrieveBatch(ctx, st.ID); err != nil || st.State != BatchInProgress {
		t.Fatalf("RetrieveBatch = %+v, %v", st, err)
	}
	if st, err = c.RetrieveBatch(ctx, st.ID); err != nil {
		t.Fatalf("RetrieveBatch: %v", err)
	}
	if st.State != BatchCompleted || st.Raw != "ended" || !st.Ended || st.Counts != (BatchCounts{Total: 4, Succeeded: 4}) ||
		!st.EndedAt.Equal(time.Date(2024, 10, 8, 0, 46, 47, 283392000, time.UTC)) ||
		!strings.Contains(st.ResultsURL, "/signed/v1/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d/results?sig=abc") {
		t.Fatalf("ended = %+v", st)
	}

	got := collect(t, c, st, items)
	if len(got) != 5 {
		t.Fatalf("got %d results, want 5: %+v", len(got), got)
	}
	wantResp(t, got[0], "job-d", "Hello again! It's nice to see you. How can I assist you today? Is there anything specific you'd like to chat about or any questions you have?",
		fixpoint.Usage{InputTokens: 11, OutputTokens: 36, CachedInputTokens: 0}, "claude-3-5-sonnet-20240620", "", nil)
	wantResp(t, got[1], "job-a", "Hello! How can I assist you today? Feel free to ask me any questions or let me know if there's anything you'd like to chat about.",
		fixpoint.Usage{InputTokens: 10, OutputTokens: 34, CachedInputTokens: 0}, "claude-3-5-sonnet-20240620", "", nil)
	wantErr(t, got[2], "job-e", fixpoint.ClassBadRequest, 0, "invalid_request_error", "req_011CSHoEeqs5C35K2UUqR7Fy", `roles must alternate between "user" and "assistant"`)
	wantErr(t, got[3], "job-b", fixpoint.ClassCancelled, 0, "canceled", "", "cancelled")
	wantErr(t, got[4], "job-c", fixpoint.ClassExpired, 0, "expired", "", "expired")
	if !got[3].Err.Class.Retryable() || !got[4].Err.Class.Retryable() || got[4].Err.Permanent() || !got[2].Err.Permanent() {
		t.Errorf("expired and cancelled must be retryable, invalid_request_error permanent")
	}

	if st, err = c.CancelBatch(ctx, st.ID); err != nil || st.State != BatchCancelling || st.Raw != "canceling" || st.Ended {
		t.Fatalf("CancelBatch = %+v, %v", st, err)
	}

	reqs := rp.requests()
	const id = "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d"
	wantPaths(t, reqs, "POST /v1/messages/batches", "GET /v1/messages/batches/"+id, "GET /v1/messages/batches/"+id,
		"GET /v1/messages/batches/"+id+"/results", "POST /v1/messages/batches/"+id+"/cancel")
	for _, r := range reqs {
		if r.header.Get("X-Api-Key") != batchTestKey || r.header.Get("Anthropic-Version") != AnthropicVersionDefault || r.header.Get("Authorization") != "" {
			t.Errorf("%s %s: headers %v, want x-api-key and anthropic-version", r.method, r.path, r.header)
		}
	}
	if len(reqs[3].query) != 0 || reqs[3].header.Get("Accept") != "application/binary" {
		t.Errorf("results request query %v, Accept %q", reqs[3].query, reqs[3].header.Get("Accept"))
	}
}

func TestBatchStatusFixtures(t *testing.T) {
	t.Parallel()
	unix := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	meta := map[string]string{"customer_id": "user_123456789", "batch_description": "Nightly eval job"}
	tests := []struct {
		name    string
		entry   bEntry
		want    BatchStatus
		wantErr *fixpoint.ProviderError // st.Err
	}{
		{name: "openai validating", entry: bEntry{name: "openai_batch_create_validating"},
			want: BatchStatus{ID: "batch_abc123", State: BatchValidating, Raw: "validating", InputFileID: "file-abc123", Metadata: meta, CreatedAt: unix(1711471533)}},
		{name: "openai validating with expires_at and keys absent", entry: bEntry{name: "openai_batch_create_validating_guide"},
			want: BatchStatus{ID: "batch_abc123", State: BatchValidating, Raw: "validating", InputFileID: "file-abc123", CreatedAt: unix(1714508499), ExpiresAt: unix(1714536634)}},
		{name: "openai completed without error file or metadata", entry: bEntry{name: "openai_batch_retrieve_completed_live"},
			want: BatchStatus{ID: "batch_xU74ytOBYUpaUQE3Cwi8SCbA", State: BatchCompleted, Raw: "completed", Ended: true, Counts: BatchCounts{Total: 312, Succeeded: 312},
				InputFileID: "file-6y0JPmkHU42qtaEK8x8ZYzkp", OutputFileID: "file-XPfkEFZSaM4Avps7mcD3i8BY",
				CreatedAt: unix(1714049780), EndedAt: unix(1714049914), ExpiresAt: unix(1714136180)}},
		{name: "openai failed on the enqueued token limit", entry: bEntry{name: "openai_batch_retrieve_failed_token_limit"},
			want: BatchStatus{ID: "batch_abc123", State: BatchFailed, Raw: "failed", Ended: true, InputFileID: "file-abc123", Metadata: meta,
				CreatedAt: unix(1711471533), EndedAt: unix(1711471538),
				Errors: []BatchError{{Code: "token_limit_exceeded", Message: "Enqueued token limit reached for gpt-4o-mini in organization org-snq6hvcTYRCMyB87hjZjkoFr. Limit: 2,000,000 enqueued tokens. Please try again once some in_progress batches have been completed."}}},
			wantErr: &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited, Code: "token_limit_exceeded"}},
		{name: "openai failed on a bad line", entry: bEntry{name: "openai_batch_retrieve_failed_token_limit", set: map[string]any{"errors": map[string]any{"object": "list",
			"data": []any{map[string]any{"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.", "param": nil, "line": 7}}}}},
			want: BatchStatus{ID: "batch_abc123", State: BatchFailed, Raw: "failed", Ended: true, InputFileID: "file-abc123", Metadata: meta,
				CreatedAt: unix(1711471533), EndedAt: unix(1711471538),
				Errors: []BatchError{{Code: "invalid_json_line", Message: "This line is not parseable as valid JSON.", Line: 7}}},
			wantErr: &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Code: "invalid_json_line"}},
		// No published expired or cancelled Batch: derived as the fixture notes say.
		{name: "openai expired", entry: bEntry{name: "openai_batch_retrieve_completed", set: map[string]any{"status": "expired", "completed_at": nil, "expired_at": 1711557933}},
			want: BatchStatus{ID: "batch_abc123", State: BatchExpired, Raw: "expired", Ended: true, Counts: BatchCounts{Total: 100, Succeeded: 95, Errored: 5},
				InputFileID: "file-abc123", OutputFileID: "file-cvaTdG", ErrorFileID: "file-HOWS94", Metadata: meta,
				CreatedAt: unix(1711471533), EndedAt: unix(1711557933), ExpiresAt: unix(1711557933)}},
		{name: "openai cancelled", entry: bEntry{name: "openai_batch_cancel_cancelling", set: map[string]any{"status": "cancelled", "cancelled_at": 1711475200, "output_file_id": "file-out"}},
			want: BatchStatus{ID: "batch_abc123", State: BatchCancelled, Raw: "cancelled", Ended: true, Counts: BatchCounts{Total: 100, Succeeded: 23, Errored: 1},
				InputFileID: "file-abc123", OutputFileID: "file-out", Metadata: meta,
				CreatedAt: unix(1711471533), EndedAt: unix(1711475200), ExpiresAt: unix(1711557933)}},
		{name: "anthropic canceling", entry: bEntry{name: "anthropic_batch_cancel_canceling"},
			want: BatchStatus{ID: "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF", State: BatchCancelling, Raw: "canceling", Counts: BatchCounts{Total: 2, Processing: 2},
				CreatedAt: time.Date(2024, 9, 24, 18, 37, 24, 100435000, time.UTC), ExpiresAt: time.Date(2024, 9, 25, 18, 37, 24, 100435000, time.UTC)}},
		{name: "anthropic ended after a cancel", entry: bEntry{name: "anthropic_batch_cancel_canceling", set: map[string]any{"processing_status": "ended",
			"ended_at": "2024-09-24T18:40:00Z", "request_counts": map[string]any{"processing": 0, "succeeded": 1, "errored": 0, "canceled": 1, "expired": 0}}},
			want: BatchStatus{ID: "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF", State: BatchCancelled, Raw: "ended", Ended: true, Counts: BatchCounts{Total: 2, Succeeded: 1, Cancelled: 1},
				CreatedAt: time.Date(2024, 9, 24, 18, 37, 24, 100435000, time.UTC), EndedAt: time.Date(2024, 9, 24, 18, 40, 0, 0, time.UTC),
				ExpiresAt: time.Date(2024, 9, 25, 18, 37, 24, 100435000, time.UTC)}},
		{name: "anthropic ended with expired requests", entry: bEntry{name: "anthropic_batch_retrieve_ended", set: map[string]any{"results_url": nil,
			"request_counts": map[string]any{"processing": 0, "succeeded": 3, "errored": 0, "canceled": 0, "expired": 1}}},
			want: BatchStatus{ID: "msgbatch_01GgqTz9XzriGNHzTSGZsJJ8", State: BatchExpired, Raw: "ended", Ended: true, Counts: BatchCounts{Total: 4, Succeeded: 3, Expired: 1},
				CreatedAt: time.Date(2024, 10, 8, 0, 46, 30, 694748000, time.UTC), EndedAt: time.Date(2024, 10, 8, 0, 46, 47, 283392000, time.UTC),
				ExpiresAt: time.Date(2024, 10, 9, 0, 46, 30, 694748000, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			provider := ProviderOpenAI
			if strings.HasPrefix(tt.entry.name, "anthropic") {
				provider = ProviderAnthropic
			}
			rp := newBatchReplay(t, map[string][]bEntry{provider + ".batches.retrieve": {tt.entry}})
			c := batchTestClient(t, provider, rp.srv.URL)
			st, err := c.RetrieveBatch(context.Background(), "b-1")
			if err != nil {
				t.Fatalf("RetrieveBatch: %v", err)
			}
			gotErr := st.Err
			st.Err = nil
			if !reflect.DeepEqual(st, tt.want) {
				t.Fatalf("status\n got: %+v\nwant: %+v", st, tt.want)
			}
			switch {
			case tt.wantErr == nil && gotErr != nil:
				t.Fatalf("Err = %v, want none", gotErr)
			case tt.wantErr != nil && (gotErr == nil || gotErr.Class != tt.wantErr.Class || gotErr.Code != tt.wantErr.Code ||
				!strings.Contains(gotErr.Message, tt.want.Errors[0].Message)):
				t.Fatalf("Err = %+v, want class %s code %s with the message", gotErr, tt.wantErr.Class, tt.wantErr.Code)
			}
			if tt.want.State == BatchFailed {
				// A failed batch has no results: nothing is downloaded.
				called := false
				if err := c.BatchResults(context.Background(), st, nil, func(BatchResult) error { called = true; return nil }); err != nil || called {
					t.Fatalf("BatchResults of a failed batch = %v (called %v), want nothing", err, called)
				}
				if n := len(rp.requests()); n != 1 {
					t.Fatalf("%d requests, want only the retrieve", n)
				}
			}
		})
	}
}

// TestBatchResultFixtures downloads each recorded results body.
func TestBatchResultFixtures(t *testing.T) {
	t.Parallel()
	type want struct {
		id       string
		text     string // a success
		class    fixpoint.ErrorClass
		code     string
		msgPart  string
		status   int
		usage    fixpoint.Usage
		reqID    string
		provider string
	}
	tests := []struct {
		name     string
		provider string
		entry    bEntry
		ids      []string // the ids sent
		want     []want
	}{
		{name: "openai one line, no logprobs", provider: ProviderOpenAI,
			entry: bEntry{name: "openai_batch_output_jsonl_spec", customIDs: []any{"c-1"}}, ids: []string{"c-1"},
			want: []want{{id: "c-1", text: "2 + 2 equals 4.", usage: fixpoint.Usage{InputTokens: 24, OutputTokens: 15, CachedInputTokens: 0}, reqID: "req_c187b3", status: 200}}},
		// Both lines carry the same batch_req id: results key on custom_id.
		{name: "openai expired lines and a stranger", provider: ProviderOpenAI,
			entry: bEntry{name: "openai_batch_error_file_expired", customIDs: []any{"c-1", "not-sent"}}, ids: []string{"c-1", "c-2"},
			want: []want{{id: "c-1", class: fixpoint.ClassExpired, code: "batch_expired", msgPart: "before the completion window expired"},
				{id: "not-sent", class: fixpoint.ClassBadResponse, code: "unknown_custom_id", msgPart: `"not-sent"`}}},
		{name: "openai http 400 line", provider: ProviderOpenAI,
			entry: bEntry{name: "openai_batch_error_file_http_400"}, ids: []string{"request-5"},
			want: []want{{id: "request-5", class: fixpoint.ClassBadRequest, code: "context_length_exceeded", status: 400, reqID: "0538a1cc8f8f8500bbe07250e6aa2b26", msgPart: "1000024 tokens"}}},
		{name: "anthropic succeeded out of order", provider: ProviderAnthropic,
			entry: bEntry{name: "anthropic_batch_results_succeeded"}, ids: []string{"my-first-request", "my-second-request"},
			want: []want{{id: "my-second-request", text: "Hello again! It's nice to see you. How can I assist you today? Is there anything specific you'd like to chat about or any questions you have?", usage: fixpoint.Usage{InputTokens: 11, OutputTokens: 36, CachedInputTokens: 0}, status: 200},
				{id: "my-first-request", text: "Hello! How can I assist you today? Feel free to ask me any questions or let me know if there's anything you'd like to chat about.", usage: fixpoint.Usage{InputTokens: 10, OutputTokens: 34, CachedInputTokens: 0}, status: 200}}},
		// The fixture's own ids; the fourth is not among those sent.
		{name: "anthropic all types", provider: ProviderAnthropic,
			entry: bEntry{name: "anthropic_batch_results_all_types"}, ids: []string{"my-first-request", "my-second-request", "my-third-request", "my-fifth-request"},
			want: []want{{id: "my-second-request", text: "Hello again!", usage: fixpoint.Usage{InputTokens: 11, OutputTokens: 36, CachedInputTokens: 0}, status: 200},
				{id: "my-first-request", text: "Hello! How", usage: fixpoint.Usage{InputTokens: 10, OutputTokens: 34, CachedInputTokens: 0}, status: 200},
				{id: "my-third-request", class: fixpoint.ClassBadRequest, code: "invalid_request_error", reqID: "req_011CSHoEeqs5C35K2UUqR7Fy", msgPart: "roles must alternate"},
				{id: "my-fourth-request", class: fixpoint.ClassBadResponse, code: "unknown_custom_id", msgPart: "did not send"},
				{id: "my-fifth-request", class: fixpoint.ClassExpired, code: "expired", msgPart: "expired"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kind := "openai.files.content"
			st := BatchStatus{ID: "b-1", Ended: true, OutputFileID: "file-out"}
			if tt.provider == ProviderAnthropic {
				kind = "anthropic.batches.results"
			}
			rp := newBatchReplay(t, map[string][]bEntry{kind: {tt.entry}})
			c := batchTestClient(t, tt.provider, rp.srv.URL)
			var items []BatchItem
			for _, id := range tt.ids {
				items = append(items, BatchItem{CustomID: id})
			}
			got := collect(t, c, st, items)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d results, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				r := got[i]
				if r.CustomID != w.id {
					t.Fatalf("result %d is %q, want %q", i, r.CustomID, w.id)
				}
				if w.class == "" {
					if r.Response == nil || !strings.HasPrefix(r.Response.Text, w.text) || r.Response.Usage != w.usage || r.Response.Status != w.status ||
						r.Response.RequestID != w.reqID || r.Response.FinishReason != fixpoint.FinishStop {
						t.Fatalf("result %q = %+v (err %v), want text %q usage %+v", w.id, r.Response, r.Err, w.text, w.usage)
					}
					continue
				}
				wantErr(t, r, w.id, w.class, w.status, w.code, w.reqID, w.msgPart)
			}
		})
	}
}

func TestBatchNotFound(t *testing.T) {
	t.Parallel()
	nf := bEntry{name: "anthropic_batch_404_not_found"}
	rp := newBatchReplay(t, map[string][]bEntry{
		"anthropic.batches.retrieve": {nf}, "anthropic.batches.results": {nf}, "anthropic.batches.cancel": {nf},
	})
	c := batchTestClient(t, ProviderAnthropic, rp.srv.URL)
	ctx := context.Background()
	_, rerr := c.RetrieveBatch(ctx, "msgbatch_unknown")
	_, cerr := c.CancelBatch(ctx, "msgbatch_unknown")
	derr := c.BatchResults(ctx, BatchStatus{ID: "msgbatch_unknown", Ended: true}, nil, func(BatchResult) error {
		t.Error("a 404 delivered a result")
		return nil
	})
	for what, err := range map[string]error{"retrieve": rerr, "cancel": cerr, "results": derr} {
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || !errors.Is(err, ErrBatchNotFound) || !errors.Is(err, fixpoint.ErrProvider) {
			t.Fatalf("%s: err = %v, want a *Error wrapping ErrBatchNotFound", what, err)
		}
		if e.Class != fixpoint.ClassBadRequest || e.Status != 404 || e.Code != "not_found_error" || e.RequestID != "req_011CSHoEeqs5C35K2UUqR7Fy" ||
			!strings.Contains(e.Message, "The requested resource could not be found.") {
			t.Fatalf("%s: %+v", what, e)
		}
	}
	if n := len(rp.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (a 404 is not retried)", n)
	}
}

func TestBatchProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// replay.py has no list route: like an OpenAI-compatible server
	// without batch endpoints, it answers 404.
	for _, provider := range []string{ProviderOpenAI, ProviderAnthropic} {
		rp := newBatchReplay(t, nil)
		c := batchTestClient(t, provider, rp.srv.URL)
		err := c.ProbeBatch(ctx)
		var e *fixpoint.ProviderError
		if !errors.Is(err, ErrBatchUnsupported) || !errors.As(err, &e) || e.Status != 404 {
			t.Fatalf("%s: ProbeBatch on a server without the endpoints = %v, want ErrBatchUnsupported", provider, err)
		}
		wantList := "/v1/batches"
		if provider == ProviderAnthropic {
			wantList = "/v1/messages/batches"
		}
		if r := rp.requests(); len(r) != 1 || r[0].method != "GET" || r[0].path != wantList || r[0].query.Get("limit") != "1" {
			t.Fatalf("%s: probe requests %+v, want one GET %s?limit=1", provider, r, wantList)
		}
	}
	// 405 says the same; a 401 says nothing about the endpoints.
	for status, unsupported := range map[int]bool{405: true, 401: false} {
		rec := newRecorder(t, replyJSON(status, `{"error":{"message":"no","type":"x"}}`))
		err := batchTestClient(t, ProviderOpenAI, rec.srv.URL).ProbeBatch(ctx)
		if err == nil || errors.Is(err, ErrBatchUnsupported) != unsupported {
			t.Fatalf("ProbeBatch on %d = %v, want unsupported=%v", status, err, unsupported)
		}
	}
	// A server with the list endpoint has the batch API.
	list := `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}`
	rp := newBatchReplay(t, map[string][]bEntry{"openai.batches.list": {{body: list}}})
	if err := batchTestClient(t, ProviderOpenAI, rp.srv.URL).ProbeBatch(ctx); err != nil {
		t.Fatalf("ProbeBatch with the endpoints = %v", err)
	}
	// Ollama has none and is not asked.
	rec := newRecorder(t, replyJSON(200, "{}"))
	oc := testClient(t, Config{Provider: ProviderOllama, BaseURL: rec.srv.URL})
	if oc.SupportsBatch() || !errors.Is(oc.ProbeBatch(ctx), ErrBatchUnsupported) || len(rec.requests()) != 0 {
		t.Fatalf("ollama: SupportsBatch %v, probe %v, %d requests", oc.SupportsBatch(), oc.ProbeBatch(ctx), len(rec.requests()))
	}
	if n, b := oc.BatchLimits(); n != 0 || b != 0 {
		t.Fatalf("ollama BatchLimits = %d, %d", n, b)
	}
}

func TestBatchList(t *testing.T) {
	t.Parallel()
	fx := loadBatchFixtures(t)
	obj := func(name, id string) string {
		var m map[string]any
		json.Unmarshal(fx[name].wireBytes(t), &m)
		m["id"] = id
		b, _ := json.Marshal(m)
		return string(b)
	}
	// OpenAI: two pages (after=last_id); metadata finds the unrecorded batch.
	rp := newBatchReplay(t, map[string][]bEntry{"openai.batches.list": {
		{body: `{"object":"list","data":[` + obj("openai_batch_retrieve_in_progress", "batch_3") + `,` + obj("openai_batch_retrieve_completed_live", "batch_2") +
			`],"first_id":"batch_3","last_id":"batch_2","has_more":true}`},
		{body: `{"object":"list","data":[` + obj("openai_batch_retrieve_completed", "batch_1") + `],"first_id":"batch_1","last_id":"batch_1","has_more":true}`},
	}})
	c := batchTestClient(t, ProviderOpenAI, rp.srv.URL)
	got, err := c.ListBatches(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != "batch_3" || got[0].State != BatchInProgress || got[1].ID != "batch_2" || got[1].State != BatchCompleted ||
		got[2].ID != "batch_1" || got[2].Metadata["customer_id"] != "user_123456789" {
		t.Fatalf("ListBatches = %+v", got)
	}
	reqs := rp.requests()
	if len(reqs) != 2 || reqs[0].query.Get("limit") != "3" || reqs[0].query.Get("after") != "" || reqs[1].query.Get("limit") != "1" || reqs[1].query.Get("after") != "batch_2" {
		t.Fatalf("list requests %+v", reqs)
	}

	// Anthropic pages with after_id and stops when has_more is false.
	rp = newBatchReplay(t, map[string][]bEntry{"anthropic.batches.list": {
		{body: `{"data":[` + obj("anthropic_batch_retrieve_ended", "msgbatch_2") + `],"has_more":true,"first_id":"msgbatch_2","last_id":"msgbatch_2"}`},
		{body: `{"data":[` + obj("anthropic_batch_create_in_progress", "msgbatch_1") + `],"has_more":false,"first_id":"msgbatch_1","last_id":"msgbatch_1"}`},
	}})
	c = batchTestClient(t, ProviderAnthropic, rp.srv.URL)
	got, err = c.ListBatches(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "msgbatch_2" || !got[0].Ended || got[1].ID != "msgbatch_1" || got[1].State != BatchInProgress {
		t.Fatalf("ListBatches = %+v", got)
	}
	reqs = rp.requests()
	if len(reqs) != 2 || reqs[0].query.Get("limit") != "20" || reqs[1].query.Get("after_id") != "msgbatch_2" || reqs[1].path != "/v1/messages/batches" {
		t.Fatalf("list requests %+v", reqs)
	}
}

// TestBatchFixturesUsed keeps testdata/wire/batch and the tests in step.
func TestBatchFixturesUsed(t *testing.T) {
	t.Parallel()
	used := map[string]bool{
		"openai_batch_file_upload": true, "openai_batch_create_validating": true, "openai_batch_create_validating_guide": true,
		"openai_batch_retrieve_in_progress": true, "openai_batch_retrieve_completed": true, "openai_batch_retrieve_completed_live": true,
		"openai_batch_retrieve_failed_token_limit": true, "openai_batch_cancel_cancelling": true, "openai_batch_output_jsonl": true,
		"openai_batch_output_jsonl_spec": true, "openai_batch_error_file_expired": true, "openai_batch_error_file_http_400": true,
		"anthropic_batch_create_in_progress": true, "anthropic_batch_retrieve_ended": true, "anthropic_batch_cancel_canceling": true,
		"anthropic_batch_results_succeeded": true, "anthropic_batch_results_all_types": true, "anthropic_batch_404_not_found": true,
	}
	for name := range loadBatchFixtures(t) {
		if !used[name] {
			t.Errorf("fixture %s is used by no test", name)
		}
		delete(used, name)
	}
	for name := range used {
		t.Errorf("fixture %s missing from testdata/wire/batch", name)
	}
}

// TestBatchResultsDecodeLikeRealtime wraps every published 2xx reply in a
// batch result line: BatchResults must decode it exactly as Complete does.
func TestBatchResultsDecodeLikeRealtime(t *testing.T) {
	t.Parallel()
	toolName := map[string]string{"openai_tool_call": "get_current_weather", "openai_tool_call_strict": "GetWeatherArgs",
		"openai_tool_calls_parallel": "get_stock_price", "anthropic_tool_use": "get_weather"}
	n := 0
	for name, fx := range loadFixtures(t) {
		if fx.Status != 200 || (fx.Provider != ProviderOpenAI && fx.Provider != ProviderAnthropic) {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, Mode: fixpoint.ModePrompt}
			switch fx.RequestHint.Mode {
			case "json_schema":
				req.Mode, req.Schema = fixpoint.ModeJSONSchema, batchTestSchema
			case "tool":
				req.Mode, req.Schema, req.SchemaName = fixpoint.ModeTool, batchTestSchema, toolName[name]
			}
			srv := serveFixture(t, fx, fx.wireBytes(t))
			rt := batchTestClient(t, fx.Provider, srv.URL)
			want, err := rt.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			var reply bytes.Buffer
			if err := json.Compact(&reply, fx.wireBytes(t)); err != nil {
				t.Fatal(err)
			}
			line := `{"id":"batch_req_1","custom_id":"c-1","response":{"status_code":200,"request_id":"req_b","body":` + reply.String() + `},"error":null}`
			kind, st := "openai.files.content", BatchStatus{ID: "b", Ended: true, ErrorFileID: "file-err"}
			if fx.Provider == ProviderAnthropic {
				line = `{"custom_id":"c-1","result":{"type":"succeeded","message":` + reply.String() + `}}`
				kind = "anthropic.batches.results"
			}
			rp := newBatchReplay(t, map[string][]bEntry{kind: {{body: line}}})
			got := collect(t, batchTestClient(t, fx.Provider, rp.srv.URL), st, []BatchItem{{CustomID: "c-1", Request: req}})
			if len(got) != 1 || got[0].Response == nil {
				t.Fatalf("got %+v", got)
			}
			g := got[0].Response
			if g.Text != want.Text || g.Refusal != want.Refusal || g.FinishReason != want.FinishReason || g.Usage != want.Usage ||
				g.Model != want.Model || !reflect.DeepEqual(g.DroppedKeywords, want.DroppedKeywords) {
				t.Fatalf("batch decode differs from realtime\n got: %+v\nwant: %+v", g, want)
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d chat fixtures replayed", n)
	}
}
