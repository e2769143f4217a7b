package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

const openAIBatchObject = `{"id":"batch_1","object":"batch","status":"in_progress","input_file_id":"file-1","request_counts":{"total":2,"completed":0,"failed":0}}`

// scripted answers the n-th request with replies[n] (the last one after
// that); a nil reply drops the connection after reading the request.
func scripted(replies ...http.HandlerFunc) (http.HandlerFunc, *atomic.Int32) {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		h := replies[min(i, len(replies)-1)]
		if h == nil {
			dropConn(w)
			return
		}
		h(w, r)
	}, &n
}

// dropConn closes the connection without an answer.
func dropConn(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func TestBatchRetries(t *testing.T) {
	t.Parallel()
	ok := replyJSON(200, openAIBatchObject)
	items := batchTestItems(2, "c-1", "c-2")
	type call func(c *Client) error
	upload := func(c *Client) error { _, err := c.UploadBatchFile(context.Background(), items); return err }
	create := func(c *Client) error { _, err := c.CreateBatch(context.Background(), "file-1", nil, nil); return err }
	retrieve := func(c *Client) error { _, err := c.RetrieveBatch(context.Background(), "batch_1"); return err }
	uploadOK := replyJSON(200, `{"id":"file-1","object":"file","purpose":"batch"}`)
	tests := []struct {
		name      string
		call      call
		first     http.HandlerFunc
		then      http.HandlerFunc
		wantCalls int32
		wantClass fixpoint.ErrorClass // "": success
		wantMaybe bool
	}{
		// Idempotent calls retry every transient failure.
		{name: "retrieve after 500", call: retrieve, first: replyJSON(500, `{"error":{"message":"boom","type":"server_error"}}`), then: ok, wantCalls: 2},
		{name: "retrieve after a dropped connection", call: retrieve, first: nil, then: ok, wantCalls: 2},
		{name: "retrieve 400 not retried", call: retrieve, first: replyJSON(400, `{"error":{"message":"bad","type":"invalid_request_error"}}`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassBadRequest},
		// A create is retried only when the server refused it...
		{name: "create after 429", call: create, first: replyJSON(429, `{"error":{"message":"slow down","type":"requests"}}`, "Retry-After", "1"), then: ok, wantCalls: 2},
		{name: "create after 503", call: create, first: replyJSON(503, `{"error":{"message":"busy"}}`), then: ok, wantCalls: 2},
		{name: "upload after 529", call: upload, first: replyJSON(529, `{"error":{"message":"busy"}}`), then: uploadOK, wantCalls: 2},
		{name: "create 400 not retried", call: create, first: replyJSON(400, `{"error":{"message":"bad file","type":"invalid_request_error"}}`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassBadRequest},
		// ...never when it may have acted on it.
		{name: "create after 500", call: create, first: replyJSON(500, `{"error":{"message":"boom","type":"server_error"}}`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassServer, wantMaybe: true},
		{name: "create after 502", call: create, first: replyJSON(502, `bad gateway`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassServer, wantMaybe: true},
		{name: "create after a dropped connection", call: create, first: nil, then: ok, wantCalls: 1, wantClass: fixpoint.ClassNetwork, wantMaybe: true},
		{name: "create with an unreadable 2xx", call: create, first: replyJSON(200, `{"id":`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassBadResponse, wantMaybe: true},
		{name: "create with a 2xx without id", call: create, first: replyJSON(200, `{"object":"batch"}`), then: ok, wantCalls: 1, wantClass: fixpoint.ClassBadResponse, wantMaybe: true},
		{name: "upload after a dropped connection", call: upload, first: nil, then: uploadOK, wantCalls: 1, wantClass: fixpoint.ClassNetwork, wantMaybe: true},
		{name: "upload after 500", call: upload, first: replyJSON(500, `{}`), then: uploadOK, wantCalls: 1, wantClass: fixpoint.ClassServer, wantMaybe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n := scripted(tt.first, tt.then)
			rec := newRecorder(t, h)
			c := batchTestClient(t, ProviderOpenAI, rec.srv.URL)
			err := tt.call(c)
			if got := n.Load(); got != tt.wantCalls {
				t.Fatalf("%d requests, want %d (err %v)", got, tt.wantCalls, err)
			}
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("err = %v, want success after the retry", err)
				}
				return
			}
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != tt.wantClass || errors.Is(err, ErrBatchMaybeCreated) != tt.wantMaybe {
				t.Fatalf("err = %v (%#v), want class %s, maybe-created %v", err, e, tt.wantClass, tt.wantMaybe)
			}
		})
	}
}

func TestBatchAnthropicCreateNotRetriedWhenMaybeCreated(t *testing.T) {
	t.Parallel()
	h, n := scripted(nil, replyJSON(200, `{"id":"msgbatch_1","type":"message_batch","processing_status":"in_progress"}`))
	rec := newRecorder(t, h)
	c := batchTestClient(t, ProviderAnthropic, rec.srv.URL)
	_, err := c.CreateBatch(context.Background(), "", batchTestItems(2, "c-1", "c-2"), nil)
	if !errors.Is(err, ErrBatchMaybeCreated) || n.Load() != 1 {
		t.Fatalf("err = %v after %d requests, want ErrBatchMaybeCreated after 1", err, n.Load())
	}
}

// A create whose request never reached a server is retried: it cannot
// have been created.
func TestBatchCreateRetriedWhenNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := batchTestClient(t, ProviderOpenAI, "http://"+addr)
	_, err = c.CreateBatch(context.Background(), "file-1", nil, nil)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassNetwork || errors.Is(err, ErrBatchMaybeCreated) || len(e.Retries) != 2 {
		t.Fatalf("err = %v (%+v), want network after 2 retries, not maybe-created", err, e)
	}
}

func TestBatchHintOverCap(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(429, `{"error":{"message":"later"}}`, "Retry-After", "600"))
	c := batchTestClient(t, ProviderOpenAI, rec.srv.URL)
	_, err := c.RetrieveBatch(context.Background(), "batch_1")
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || !e.HintOverCap || e.RetryAfter != 10*time.Minute || len(rec.requests()) != 1 {
		t.Fatalf("err = %+v after %d requests, want a hint over the cap handed back at once", e, len(rec.requests()))
	}
}

// TestBatchSecretsRedacted: a key the server echoes, in an error, a batch
// object or a result line, never comes back, nor any 8 bytes of it where
// a line is cut.
func TestBatchSecretsRedacted(t *testing.T) {
	t.Parallel()
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	long := straddle(headBytes)
	lines := strings.Join([]string{
		`{"custom_id":"c-1","response":{"status_code":200,"request_id":` + q("req-"+straddleKey) + `,"body":{"model":` + q(straddleKey) +
			`,"choices":[{"message":{"content":` + q("the key is "+straddleKey) + `},"finish_reason":"stop"}]}},"error":null}`,
		`{"custom_id":"c-2","response":{"status_code":401,"request_id":"r","body":{"error":{"message":` + q("Incorrect API key provided: "+straddleKey) + `,"code":"invalid_api_key"}}},"error":null}`,
		`{"custom_id":"c-3","response":null,"error":{"code":"batch_expired","message":` + q(straddleKey) + `}}`,
		// Over the line cap, with the key across the end of the kept head.
		`{"custom_id":"c-4","response":{"status_code":200,"body":{"pad":` + q(long[:headBytes-40]+straddleKey+strings.Repeat("y", 3000)) + `}}}`,
		`{"custom_id":"` + straddleKey + `","error":{"code":"x","message":"y"}}`,
		`not json ` + straddleKey,
	}, "\n")
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/content"):
			io.WriteString(w, lines)
		case strings.HasSuffix(r.URL.Path, "/batch_bad"):
			replyJSON(401, `{"error":{"message":"Incorrect API key provided: `+straddleKey+`","code":"invalid_api_key"}}`, "X-Request-Id", straddleKey)(w, r)
		default:
			replyJSON(200, `{"id":"batch_1","object":"batch","status":"completed","output_file_id":"file-out","metadata":{"note":"`+straddleKey+`"},"errors":{"data":[{"code":"c","message":"`+straddleKey+`"}]}}`)(w, r)
		}
	})
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL + "/v1", APIKey: straddleKey, MaxBodyBytes: 2048,
		Retry: RetryConfig{Disabled: true}})
	ctx := context.Background()
	var dump strings.Builder
	_, err := c.RetrieveBatch(ctx, "batch_bad")
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassAuth {
		t.Fatalf("err = %v, want auth", err)
	}
	dump.WriteString(dumpResult(nil, err))
	st, err := c.RetrieveBatch(ctx, "batch_1")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&dump, "%+v", st)
	n := 0
	err = c.BatchResults(ctx, st, nil, func(r BatchResult) error {
		n++
		dump.WriteString(r.CustomID)
		dump.WriteString(dumpResult(r.Response, errOrNil(r.Err)))
		return nil
	})
	if err != nil || n != 6 {
		t.Fatalf("BatchResults = %v with %d results, want 6", err, n)
	}
	assertNoKeyPiece(t, "batch calls", dump.String())
}

func errOrNil(e *fixpoint.ProviderError) error {
	if e == nil {
		return nil
	}
	return e
}

// TestBatchResultsStreamed: a results file far over MaxBodyBytes is read
// line by line; only a line over the cap fails, as too_large for its id.
func TestBatchResultsStreamed(t *testing.T) {
	t.Parallel()
	const lines = 400
	var body bytes.Buffer
	var items []BatchItem
	for i := range lines {
		id := fmt.Sprintf("c-%03d", i)
		items = append(items, BatchItem{CustomID: id})
		text := fmt.Sprintf("answer %d %s", i, strings.Repeat("z", 200))
		if i == 150 {
			text = strings.Repeat("big ", 2000) // 8 KB: over the 2 KiB cap
		}
		fmt.Fprintf(&body, `{"custom_id":%q,"result":{"type":"succeeded","message":{"model":"m","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":1}}}}`, id, text, i)
		switch i % 3 {
		case 0:
			body.WriteString("\r\n")
		case 1:
			body.WriteString("\n\n   \n") // blank lines between
		default:
			if i != lines-1 {
				body.WriteString("\n")
			}
		}
	}
	if body.Len() < 40*2048 {
		t.Fatalf("test body too small: %d", body.Len())
	}
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-jsonl")
		w.Write(body.Bytes())
	})
	c := testClient(t, Config{Provider: ProviderAnthropic, BaseURL: rec.srv.URL, MaxBodyBytes: 2048})
	got := collect(t, c, BatchStatus{ID: "msgbatch_1", Ended: true}, items)
	if len(got) != lines {
		t.Fatalf("got %d results, want %d", len(got), lines)
	}
	for i, r := range got {
		id := fmt.Sprintf("c-%03d", i)
		if i == 150 {
			if r.CustomID != id || r.Err == nil || r.Err.Class != fixpoint.ClassTooLarge || r.Err.Size < 8000 || !strings.HasPrefix(r.Err.Head, `{"custom_id":"c-150"`) {
				t.Fatalf("line 150 = %+v, want too_large for c-150", r.Err)
			}
			continue
		}
		if r.CustomID != id || r.Response == nil || !strings.HasPrefix(r.Response.Text, fmt.Sprintf("answer %d ", i)) || r.Response.Usage.InputTokens != i {
			t.Fatalf("result %d = %q %+v %v", i, r.CustomID, r.Response, r.Err)
		}
	}
}

// TestBatchResultsResumeWithoutDuplicates: a download cut mid-file is
// retried, and what fn already had is not passed again.
func TestBatchResultsResumeWithoutDuplicates(t *testing.T) {
	t.Parallel()
	var full bytes.Buffer
	var items []BatchItem
	for i := range 6 {
		id := fmt.Sprintf("c-%d", i)
		items = append(items, BatchItem{CustomID: id})
		fmt.Fprintf(&full, `{"id":"batch_req_%d","custom_id":%q,"response":{"status_code":200,"body":{"model":"m","choices":[{"message":{"content":"v%d"},"finish_reason":"stop"}]}},"error":null}`+"\n", i, id, i)
	}
	half := bytes.Index(full.Bytes(), []byte(`{"id":"batch_req_3"`)) + 20 // inside line 3
	var gets atomic.Int32
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if gets.Add(1) == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(full.Len()))
			w.Write(full.Bytes()[:half])
			w.(http.Flusher).Flush()
			dropConn(w)
			return
		}
		w.Write(full.Bytes())
	})
	c := batchTestClient(t, ProviderOpenAI, rec.srv.URL)
	got := collect(t, c, BatchStatus{ID: "batch_1", Ended: true, OutputFileID: "file-out"}, items)
	if gets.Load() != 2 {
		t.Fatalf("%d downloads, want 2", gets.Load())
	}
	if len(got) != 6 {
		t.Fatalf("got %d results, want each of 6 once: %+v", len(got), got)
	}
	for i, r := range got {
		if r.CustomID != fmt.Sprintf("c-%d", i) || r.Response == nil || r.Response.Text != fmt.Sprintf("v%d", i) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
}

func TestBatchResultsCallbackError(t *testing.T) {
	t.Parallel()
	rp := newBatchReplay(t, map[string][]bEntry{"openai.files.content": {{name: "openai_batch_output_jsonl"}}})
	c := batchTestClient(t, ProviderOpenAI, rp.srv.URL)
	stop := errors.New("ledger down")
	calls := 0
	err := c.BatchResults(context.Background(), BatchStatus{ID: "b", Ended: true, OutputFileID: "f1", ErrorFileID: "f2"}, nil, func(BatchResult) error {
		calls++
		return stop
	})
	var e *fixpoint.ProviderError
	if !errors.Is(err, stop) || errors.As(err, &e) || calls != 1 || len(rp.requests()) != 1 {
		t.Fatalf("err = %v, %d calls, %d requests: want fn's error as is after one call, nothing retried", err, calls, len(rp.requests()))
	}
}

// TestBatchResultsSlowCallback: the time fn takes does not count as the
// server's idle time. Its sleeps are the case under test (a server that
// sends a line every 10 ms, a callback that takes longer than the idle
// timeout), not waits for something.
func TestBatchResultsSlowCallback(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, `{"custom_id":"c-%d","result":{"type":"expired"}}`+"\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	})
	c := testClient(t, Config{Provider: ProviderAnthropic, BaseURL: rec.srv.URL, IdleTimeout: 60 * time.Millisecond, Retry: RetryConfig{Disabled: true}})
	n := 0
	err := c.BatchResults(context.Background(), BatchStatus{ID: "b", Ended: true}, nil, func(BatchResult) error {
		n++
		time.Sleep(150 * time.Millisecond)
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("err = %v after %d results, want 3 and no idle timeout", err, n)
	}
}

func TestBatchResultsRefusedBeforeEnd(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(200, ""))
	c := batchTestClient(t, ProviderOpenAI, rec.srv.URL)
	err := c.BatchResults(context.Background(), BatchStatus{ID: "b", State: BatchFinalizing, Raw: "finalizing", OutputFileID: "f"}, nil,
		func(BatchResult) error { return nil })
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest || len(rec.requests()) != 0 {
		t.Fatalf("err = %v, %d requests; want bad_request and none", err, len(rec.requests()))
	}
}

func TestBatchValidation(t *testing.T) {
	t.Parallel()
	items := func(ids ...string) []BatchItem { return batchTestItems(len(ids), ids...) }
	mixed := items("a", "b")
	mixed[1].Request.Model = "gpt-4o"
	badSchema := items("a")
	badSchema[0].Request.Mode, badSchema[0].Request.Schema = fixpoint.ModeTool, []byte(`{`)
	tooMany := make([]BatchItem, OpenAIBatchMaxRequests+1)
	tests := []struct {
		name     string
		provider string
		items    []BatchItem
		fileID   string
		meta     map[string]string
		upload   bool
		sentinel error
		msg      string
	}{
		{name: "anthropic id with a space", provider: ProviderAnthropic, items: items("ok-1", "job 2"), sentinel: ErrInvalidCustomID, msg: `"job 2"`},
		{name: "anthropic id too long", provider: ProviderAnthropic, items: items(strings.Repeat("a", 65)), sentinel: ErrInvalidCustomID},
		{name: "anthropic id with a dot", provider: ProviderAnthropic, items: items("a.b"), sentinel: ErrInvalidCustomID},
		{name: "anthropic id not ascii", provider: ProviderAnthropic, items: items("é"), sentinel: ErrInvalidCustomID},
		{name: "anthropic empty id", provider: ProviderAnthropic, items: items(""), sentinel: ErrInvalidCustomID},
		{name: "anthropic duplicate ids", provider: ProviderAnthropic, items: items("a", "b", "a"), msg: `custom_id "a" repeats`},
		{name: "anthropic no items", provider: ProviderAnthropic, items: nil, msg: "no items"},
		{name: "anthropic bad request in an item", provider: ProviderAnthropic, items: badSchema, msg: `batch item "a"`},
		{name: "openai empty id", provider: ProviderOpenAI, upload: true, items: items("a", ""), sentinel: ErrInvalidCustomID},
		{name: "openai duplicate ids", provider: ProviderOpenAI, upload: true, items: items("x y", "x y"), msg: "repeats"},
		{name: "openai two models", provider: ProviderOpenAI, upload: true, items: mixed, msg: "one model"},
		{name: "openai too many", provider: ProviderOpenAI, upload: true, items: tooMany, msg: "over the openai limit of 50000"},
		{name: "openai no file id", provider: ProviderOpenAI, fileID: "", msg: "input file id is empty"},
		{name: "openai metadata value too long", provider: ProviderOpenAI, fileID: "f", meta: map[string]string{"k": strings.Repeat("v", 513)}, msg: "metadata"},
		{name: "openai too many metadata pairs", provider: ProviderOpenAI, fileID: "f", meta: func() map[string]string {
			m := map[string]string{}
			for i := range 17 {
				m[fmt.Sprint(i)] = "v"
			}
			return m
		}(), msg: "17 metadata pairs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, replyJSON(200, openAIBatchObject))
			c := batchTestClient(t, tt.provider, rec.srv.URL)
			var err error
			if tt.upload {
				_, err = c.UploadBatchFile(context.Background(), tt.items)
			} else {
				_, err = c.CreateBatch(context.Background(), tt.fileID, tt.items, tt.meta)
			}
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest || !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("err = %v, want bad_request mentioning %q", err, tt.msg)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want it to wrap %v", err, tt.sentinel)
			}
			if n := len(rec.requests()); n != 0 {
				t.Fatalf("%d requests sent for an invalid batch", n)
			}
		})
	}
}

func TestValidateCustomID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"a": true, "job_12-run-3": true, strings.Repeat("Z9", 32): true,
		"": false, strings.Repeat("a", 65): false, "a b": false, "a.b": false, "a/b": false, "ä": false, "a\n": false,
	} {
		err := ValidateCustomID(id)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalidCustomID)) {
			t.Errorf("ValidateCustomID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

func TestBatchLimitsAndSupport(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		provider string
		n        int
		bytes    int64
	}{
		{ProviderOpenAI, 50_000, 200_000_000},
		{ProviderAnthropic, 100_000, 256_000_000 - int64(len(`{"requests":[]}`))},
	} {
		c := testClient(t, Config{Provider: tt.provider})
		if n, b := c.BatchLimits(); n != tt.n || b != tt.bytes || !c.SupportsBatch() {
			t.Errorf("%s: BatchLimits = %d, %d, SupportsBatch %v", tt.provider, n, b, c.SupportsBatch())
		}
	}
}

// TestEncodeBatchItem: the item's bytes are the documented envelope around
// exactly the body Complete sends, for every mode and both max-tokens names.
func TestEncodeBatchItem(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Provider: ProviderOpenAI, APIKey: "k"},
		{Provider: ProviderOpenAI, APIKey: "k", OpenAIMaxTokensParam: "max_completion_tokens"},
		{Provider: ProviderAnthropic, APIKey: "k"},
	} {
		rec := newRecorder(t, replyJSON(200, ""))
		cfg.BaseURL = rec.srv.URL
		c := testClient(t, cfg)
		for _, it := range batchTestItems(4, `id-"quoted"`, "id-1", "id-2", "id-3") {
			got, err := c.EncodeBatchItem(it)
			if err != nil {
				t.Fatalf("%s: %v", cfg.Provider, err)
			}
			body := completeBody(t, c, it.Request)
			want := `{"custom_id":` + fmt.Sprintf("%q", it.CustomID) + `,"method":"POST","url":"/v1/chat/completions","body":` + string(body) + `}`
			if cfg.Provider == ProviderAnthropic {
				want = `{"custom_id":` + fmt.Sprintf("%q", it.CustomID) + `,"params":` + string(body) + `}`
			}
			if string(got) != want {
				t.Fatalf("%s %s:\n got: %s\nwant: %s", cfg.Provider, it.Request.Mode, got, want)
			}
		}
	}
	oc := testClient(t, Config{Provider: ProviderOllama})
	if _, err := oc.EncodeBatchItem(BatchItem{CustomID: "a", Request: fixpoint.Request{Model: "m"}}); !errors.Is(err, ErrBatchUnsupported) {
		t.Fatalf("ollama EncodeBatchItem = %v", err)
	}
}
