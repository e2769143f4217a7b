package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// batchFixture loads testdata/fixtures/batch/name.json: its status,
// headers and body, decoded (a JSON document) or split into lines (JSONL).
func batchFixture(t *testing.T, name string) (fixture, any, []map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", "batch", name+".json"))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	var text string
	if json.Unmarshal(f.Body, &text) == nil { // a string body: wire text or JSONL
		if strings.Contains(f.Headers["content-type"], "jsonl") || strings.Contains(f.Headers["content-type"], "octet-stream") {
			return f, nil, lines(t, []byte(text))
		}
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("fixture %s body: %v", name, err)
		}
		return f, v, nil
	}
	var v any
	if err := json.Unmarshal(f.Body, &v); err != nil {
		t.Fatalf("fixture %s body: %v", name, err)
	}
	return f, v, nil
}

// sameShape fails when got lacks a key of the fixture's body or holds one
// with another JSON type (nulls match anything: optional values).
func sameShape(t *testing.T, name string, want, got any) {
	t.Helper()
	if diff := shapeDiff("", want, got); len(diff) > 0 {
		t.Errorf("%s: the simulator's body differs from the published one:\n  %s", name, strings.Join(diff, "\n  "))
	}
}

// decode is JSON bytes as a generic value.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// TestOpenAIBatchWireShapes compares every OpenAI batch body the simulator
// sends with the published examples: the file object, the batch object in
// each status, and the lines of the output and error files.
func TestOpenAIBatchWireShapes(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s := New(Config{Seed: 21, Now: clock.Now, Batch: BatchConfig{CompletionDelay: 10 * time.Second, ExpiredShare: 0.25}})
	base := serveSim(t, s)
	bodies := []map[string]any{orderRequest("a"), orderRequest("b"), orderRequest("c"), {"model": "gpt-4o", "messages": []any{}}}
	meta := map[string]string{"customer_id": "user_123456789", "batch_description": "Nightly eval job"}
	file := upload(t, base, "in.jsonl", jsonl(bodies))
	_, want, _ := batchFixture(t, "openai_batch_file_upload")
	sameShape(t, "file upload", want, file)
	if file["object"] != "file" || file["purpose"] != "batch" || !strings.HasPrefix(file["id"].(string), "file-") || file["bytes"] != float64(len(jsonl(bodies))) {
		t.Errorf("file object %v", file)
	}
	var got map[string]any
	callJSON(t, "GET", base+"/v1/files/"+file["id"].(string), nil, &got)
	sameShape(t, "file retrieve", want, got)

	var created map[string]any
	callJSON(t, "POST", base+"/v1/batches", map[string]any{"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
		"completion_window": "24h", "metadata": meta}, &created)
	for _, name := range []string{"openai_batch_create_validating", "openai_batch_create_validating_guide"} {
		_, want, _ := batchFixture(t, name)
		sameShape(t, name, want, created)
	}
	if created["object"] != "batch" || created["status"] != "validating" || !strings.HasPrefix(created["id"].(string), "batch_") {
		t.Errorf("created %v", created)
	}
	id := created["id"].(string)

	clock.Advance(5 * time.Second)
	callJSON(t, "GET", base+"/v1/batches/"+id, nil, &got)
	_, want, _ = batchFixture(t, "openai_batch_retrieve_in_progress")
	sameShape(t, "in progress", want, got)
	if got["status"] != "in_progress" {
		t.Errorf("status %v, want in_progress", got["status"])
	}

	clock.Advance(5 * time.Second)
	callJSON(t, "GET", base+"/v1/batches/"+id, nil, &got)
	for _, name := range []string{"openai_batch_retrieve_completed", "openai_batch_retrieve_completed_live"} {
		_, want, _ := batchFixture(t, name)
		sameShape(t, name, want, got)
	}
	if got["status"] != "expired" || got["output_file_id"] == nil || got["error_file_id"] == nil {
		t.Fatalf("ended batch %v", got)
	}

	out := lines(t, download(t, base+"/v1/files/"+got["output_file_id"].(string)+"/content", "application/octet-stream"))
	for _, name := range []string{"openai_batch_output_jsonl", "openai_batch_output_jsonl_spec"} {
		_, _, wantLines := batchFixture(t, name)
		for _, l := range out {
			sameShape(t, name, wantLines[0], l)
		}
	}
	errs := lines(t, download(t, base+"/v1/files/"+got["error_file_id"].(string)+"/content", "application/octet-stream"))
	_, _, expired := batchFixture(t, "openai_batch_error_file_expired")
	_, _, http400 := batchFixture(t, "openai_batch_error_file_http_400")
	kinds := map[string]int{}
	for _, l := range errs {
		switch {
		case l["response"] == nil:
			sameShape(t, "expired line", expired[0], l)
			kinds["expired"]++
		default:
			sameShape(t, "error line", http400[0], l)
			if code := l["response"].(map[string]any)["status_code"]; code != 400.0 {
				t.Errorf("error line status %v, want 400", code)
			}
			kinds["400"]++
		}
	}
	if kinds["expired"] != 1 || kinds["400"] != 1 {
		t.Errorf("error file %v, want one expired line and one 400", kinds)
	}

	// Cancel, and a batch whose file fails validation.
	file = upload(t, base, "in.jsonl", jsonl(bodies[:2]))
	callJSON(t, "POST", base+"/v1/batches", map[string]any{"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": meta}, &created)
	callJSON(t, "POST", base+"/v1/batches/"+created["id"].(string)+"/cancel", nil, &got)
	_, want, _ = batchFixture(t, "openai_batch_cancel_cancelling")
	sameShape(t, "cancel", want, got)
	file = upload(t, base, "bad.jsonl", []byte("not json\n"))
	callJSON(t, "POST", base+"/v1/batches", map[string]any{"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": meta}, &created)
	callJSON(t, "GET", base+"/v1/batches/"+created["id"].(string), nil, &got)
	_, want, _ = batchFixture(t, "openai_batch_retrieve_failed_token_limit")
	sameShape(t, "failed", want, got)
}

// TestAnthropicBatchWireShapes compares the Message Batch object in each
// status, the results lines of each type and the 404 with the published
// examples.
func TestAnthropicBatchWireShapes(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s := New(Config{Seed: 22, Now: clock.Now, Batch: BatchConfig{CompletionDelay: 10 * time.Second, ExpiredShare: 0.2, ErroredShare: 0.2}})
	base := serveSim(t, s)
	var params []map[string]any
	for i := range 5 {
		params = append(params, anthropicOrder(fmt.Sprint(i)))
	}
	params = append(params, map[string]any{"model": "sim-sonnet", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	created := anthropicBatch(t, base, params)
	_, want, _ := batchFixture(t, "anthropic_batch_create_in_progress")
	sameShape(t, "create", want, created)
	if created["type"] != "message_batch" || !strings.HasPrefix(created["id"].(string), "msgbatch_") {
		t.Errorf("created %v", created)
	}
	clock.Advance(10 * time.Second)
	var got map[string]any
	callJSON(t, "GET", base+"/v1/messages/batches/"+created["id"].(string), nil, &got)
	_, want, _ = batchFixture(t, "anthropic_batch_retrieve_ended")
	sameShape(t, "ended", want, got)

	res := lines(t, download(t, got["results_url"].(string), "application/x-jsonl"))
	_, _, all := batchFixture(t, "anthropic_batch_results_all_types")
	_, _, succeeded := batchFixture(t, "anthropic_batch_results_succeeded")
	byType := map[string]map[string]any{}
	for _, l := range all {
		byType[l["result"].(map[string]any)["type"].(string)] = l
	}
	seen := map[string]int{}
	for _, l := range res {
		typ := l["result"].(map[string]any)["type"].(string)
		seen[typ]++
		sameShape(t, "result "+typ, byType[typ], l)
		if typ == "succeeded" {
			sameShape(t, "succeeded result", succeeded[0], l)
		}
		if typ != "succeeded" && typ != "errored" && len(l["result"].(map[string]any)) != 1 {
			t.Errorf("%s result carries more than its type: %v", typ, l)
		}
	}
	if seen["succeeded"] != 3 || seen["errored"] != 2 || seen["expired"] != 1 {
		t.Errorf("result types %v", seen)
	}

	created = anthropicBatch(t, base, params[:2])
	callJSON(t, "POST", base+"/v1/messages/batches/"+created["id"].(string)+"/cancel", nil, &got)
	_, want, _ = batchFixture(t, "anthropic_batch_cancel_canceling")
	sameShape(t, "cancel", want, got)

	f, want, _ := batchFixture(t, "anthropic_batch_404_not_found")
	code, h, body := httpCall(t, "GET", base+"/v1/messages/batches/msgbatch_nope", nil)
	if code != f.Status || h.Get("Request-Id") == "" {
		t.Errorf("404: status %d, request-id %q", code, h.Get("Request-Id"))
	}
	sameShape(t, "404", want, decode(t, body))
}
