package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/poll"
)

// testClock is an injected clock that tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: fixedNow()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// serveSim starts s on a loopback port.
func serveSim(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL
}

// call sends a request with a JSON body (nil: none) and returns the status,
// the headers and the body.
func httpCall(t *testing.T, method, url string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, readAll(t, resp.Body)
}

// callJSON calls and decodes a 200 answer into v.
func callJSON(t *testing.T, method, url string, body, v any) {
	t.Helper()
	code, _, b := httpCall(t, method, url, body)
	if code != 200 {
		t.Fatalf("%s %s: status %d: %s", method, url, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: decode %s: %v", method, url, b, err)
	}
}

// upload posts a purpose=batch file and returns the file object.
func upload(t *testing.T, base, filename string, content []byte) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", filename)
	_, _ = fw.Write(content)
	_ = mw.Close()
	resp, err := http.Post(base+"/v1/files", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := readAll(t, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("upload: status %d: %s", resp.StatusCode, b)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// jsonl renders OpenAI batch input lines for the bodies, custom ids
// c-0, c-1, ...
func jsonl(bodies []map[string]any) []byte {
	var buf bytes.Buffer
	for i, b := range bodies {
		line, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("c-%d", i), "method": "POST", "url": "/v1/chat/completions", "body": b})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// lines splits JSONL into decoded objects.
func lines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("JSONL line %s: %v", sc.Bytes(), err)
		}
		out = append(out, m)
	}
	return out
}

// openAIBatch uploads bodies and creates a batch of them; it returns the
// create answer.
func openAIBatch(t *testing.T, base string, bodies []map[string]any, meta map[string]string) map[string]any {
	t.Helper()
	f := upload(t, base, "in.jsonl", jsonl(bodies))
	req := map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
	if meta != nil {
		req["metadata"] = meta
	}
	var b map[string]any
	callJSON(t, "POST", base+"/v1/batches", req, &b)
	return b
}

// anthropicBatch creates a batch of params, custom ids r-0, r-1, ...
func anthropicBatch(t *testing.T, base string, params []map[string]any) map[string]any {
	t.Helper()
	reqs := make([]any, len(params))
	for i, p := range params {
		reqs[i] = map[string]any{"custom_id": fmt.Sprintf("r-%d", i), "params": p}
	}
	var b map[string]any
	callJSON(t, "POST", base+"/v1/messages/batches", map[string]any{"requests": reqs}, &b)
	return b
}

// pollOpenAI polls a batch until it is final (real time, up to 10 s), as
// a client does.
func pollOpenAI(t *testing.T, base, id string) map[string]any {
	t.Helper()
	var b map[string]any
	poll.Until(t, 10*time.Second, "batch "+id+" to be final", func() bool {
		b = nil
		callJSON(t, "GET", base+"/v1/batches/"+id, nil, &b)
		switch b["status"] {
		case "completed", "failed", "expired", "cancelled":
			return true
		}
		return false
	})
	return b
}

// pollAnthropic polls a message batch until it ended (real time, up to
// 10 s), as a client does.
func pollAnthropic(t *testing.T, base, id string) map[string]any {
	t.Helper()
	var b map[string]any
	poll.Until(t, 10*time.Second, "message batch "+id+" to end", func() bool {
		b = nil
		callJSON(t, "GET", base+"/v1/messages/batches/"+id, nil, &b)
		return b["processing_status"] == "ended"
	})
	return b
}

// download GETs a file or results and checks its content type.
func download(t *testing.T, url, ctype string) []byte {
	t.Helper()
	code, h, b := httpCall(t, "GET", url, nil)
	if code != 200 {
		t.Fatalf("GET %s: status %d: %s", url, code, b)
	}
	if got := h.Get("Content-Type"); got != ctype {
		t.Errorf("GET %s: Content-Type %q, want %q", url, got, ctype)
	}
	return b
}

// anthropicOrder is an Anthropic prompt-mode request for task key user.
func anthropicOrder(user string) map[string]any {
	return map[string]any{
		"model": "sim-sonnet", "max_tokens": 2000, "metadata": map[string]any{"user_id": user},
		"system":   "Extract the order.\n" + fixpoint.SchemaMarkerOpen + "\n" + orderSchema + "\n" + fixpoint.SchemaMarkerClose + "\n",
		"messages": []any{map[string]any{"role": "user", "content": "Order for " + user + ": two lamps, paid by card."}},
	}
}

// withoutKeys returns a decoded copy of JSON b without the given top-level
// keys (a timestamp differs between a batch line and its single call).
func withoutKeys(t *testing.T, b []byte, keys ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

// TestOpenAIBatchFlow: upload, create, poll until completed and download,
// through real HTTP on the real clock. Each line's reply is the reply the
// same request gets as a single call, the lines come out in a seeded order
// that is not the input's, and the batch and the counters say what
// happened.
func TestOpenAIBatchFlow(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Seed = 11
	cfg.Batch.CompletionDelay = 30 * time.Millisecond
	s := New(cfg)
	base := serveSim(t, s)
	var bodies []map[string]any
	for i := range 16 {
		bodies = append(bodies, orderRequest(fmt.Sprintf("job-%d", i)))
	}
	created := openAIBatch(t, base, bodies, map[string]string{"run": "nightly"})
	if created["status"] != "validating" || !strings.HasPrefix(created["id"].(string), "batch_") {
		t.Fatalf("create: %v", created)
	}
	b := pollOpenAI(t, base, created["id"].(string))
	rc := b["request_counts"].(map[string]any)
	if b["status"] != "completed" || rc["total"] != 16.0 || rc["completed"] != 16.0 || rc["failed"] != 0.0 {
		t.Fatalf("final batch: %v", b)
	}
	if b["error_file_id"] != nil || !strings.HasPrefix(b["output_file_id"].(string), "file-") {
		t.Fatalf("files: output %v error %v", b["output_file_id"], b["error_file_id"])
	}
	if m := b["metadata"].(map[string]any); m["run"] != "nightly" {
		t.Fatalf("metadata %v", m)
	}
	out := lines(t, download(t, base+"/v1/files/"+b["output_file_id"].(string)+"/content", "application/octet-stream"))
	if len(out) != 16 {
		t.Fatalf("%d output lines, want 16", len(out))
	}
	var order []string
	for _, l := range out {
		id := l["custom_id"].(string)
		order = append(order, id)
		resp := l["response"].(map[string]any)
		if resp["status_code"] != 200.0 || l["error"] != nil || !strings.HasPrefix(l["id"].(string), "batch_req_") {
			t.Fatalf("line %v", l)
		}
		var i int
		fmt.Sscanf(id, "c-%d", &i)
		line, _ := json.Marshal(resp["body"])
		single := do(t, s, "/v1/chat/completions", bodies[i])
		if got, want := withoutKeys(t, line, "created"), withoutKeys(t, single.Body.Bytes(), "created"); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: batch line reply differs from the single call:\n%s\n%s", id, line, single.Body.Bytes())
		}
	}
	if sorted := slices.Sorted(slices.Values(order)); slices.Equal(order, inputOrder("c-", 16)) || len(sorted) != 16 {
		t.Fatalf("output lines in input order %v, want a shuffled order", order)
	}
	st := s.Stats().Batch
	if st.FilesUploaded != 1 || st.Created != 1 || st.Succeeded != 16 || st.Errored+st.Expired+st.Cancelled != 0 {
		t.Fatalf("stats %+v", st)
	}
	u := b["usage"].(map[string]any)
	if u["input_tokens"].(float64) <= 0 || u["output_tokens"].(float64) <= 0 {
		t.Fatalf("usage %v", u)
	}
}

// inputOrder is prefix0, prefix1, ...
func inputOrder(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// TestAnthropicBatchFlow: create, poll until ended, follow results_url.
// Each result is the single call's reply (service_tier batch), in a
// seeded order that is not the input's.
func TestAnthropicBatchFlow(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Seed = 12
	cfg.Batch.CompletionDelay = 30 * time.Millisecond
	s := New(cfg)
	base := serveSim(t, s)
	var params []map[string]any
	for i := range 16 {
		params = append(params, anthropicOrder(fmt.Sprintf("job-%d", i)))
	}
	created := anthropicBatch(t, base, params)
	id := created["id"].(string)
	if !strings.HasPrefix(id, "msgbatch_01") || created["processing_status"] != "in_progress" || created["results_url"] != nil {
		t.Fatalf("create: %v", created)
	}
	b := pollAnthropic(t, base, id)
	rc := b["request_counts"].(map[string]any)
	if rc["succeeded"] != 16.0 || rc["processing"] != 0.0 || b["ended_at"] == nil {
		t.Fatalf("ended batch: %v", b)
	}
	url := b["results_url"].(string)
	if url != base+"/v1/messages/batches/"+id+"/results" {
		t.Fatalf("results_url %s", url)
	}
	res := lines(t, download(t, url, "application/x-jsonl"))
	var order []string
	for _, l := range res {
		cid := l["custom_id"].(string)
		order = append(order, cid)
		r := l["result"].(map[string]any)
		if r["type"] != "succeeded" {
			t.Fatalf("result %v", l)
		}
		var i int
		fmt.Sscanf(cid, "r-%d", &i)
		msg, _ := json.Marshal(r["message"])
		single := do(t, s, "/v1/messages", params[i])
		want := withoutKeys(t, single.Body.Bytes())
		want["usage"].(map[string]any)["service_tier"] = "batch"
		if got := withoutKeys(t, msg); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: batch result differs from the single call:\n%s\n%s", cid, msg, single.Body.Bytes())
		}
	}
	if len(order) != 16 || slices.Equal(order, inputOrder("r-", 16)) {
		t.Fatalf("results in order %v, want all 16 shuffled", order)
	}
	if st := s.Stats().Batch; st.Created != 1 || st.Succeeded != 16 || st.FilesUploaded != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchSameRequestSameReplyAnyPosition: the same requests in two
// batches, in opposite input orders (so they finish in other orders too),
// get the same replies; and two servers with the same seed write the same
// results in the same order.
func TestBatchSameRequestSameReplyAnyPosition(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Seed, cfg.Batch.CompletionDelay = 13, -1
	var params []map[string]any
	for i := range 12 {
		params = append(params, anthropicOrder(fmt.Sprintf("job-%d", i)))
	}
	reversed := slices.Clone(params)
	slices.Reverse(reversed)
	results := func(base string, ps []map[string]any) (map[string]string, []string) {
		id := anthropicBatch(t, base, ps)["id"].(string)
		b := pollAnthropic(t, base, id)
		byUser := map[string]string{}
		var order []string
		for _, l := range lines(t, download(t, b["results_url"].(string), "application/x-jsonl")) {
			var i int
			fmt.Sscanf(l["custom_id"].(string), "r-%d", &i)
			user := ps[i]["metadata"].(map[string]any)["user_id"].(string)
			msg, _ := json.Marshal(l["result"].(map[string]any)["message"])
			byUser[user] = string(msg)
			order = append(order, l["custom_id"].(string))
		}
		return byUser, order
	}
	base1 := serveSim(t, New(cfg))
	a, orderA := results(base1, params)
	b, _ := results(base1, reversed)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replies depend on the position in the batch:\n%v\n%v", a, b)
	}
	c, orderC := results(serveSim(t, New(cfg)), params)
	if !reflect.DeepEqual(a, c) || !slices.Equal(orderA, orderC) {
		t.Fatalf("same seed, other results or order: %v vs %v", orderA, orderC)
	}
}

// TestBatchExpiredAndErroredShares: round(share × n) requests end each
// way, the same ones for the same seed, in each provider's shape: OpenAI's
// batch ends expired with the errors in the error file, Anthropic's ends
// with the counts and the error envelope nested.
func TestBatchExpiredAndErroredShares(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 14, Now: fixedNow, Batch: BatchConfig{CompletionDelay: -1, ExpiredShare: 0.2, ErroredShare: 0.1}}
	var bodies, params []map[string]any
	for i := range 20 {
		bodies = append(bodies, orderRequest(fmt.Sprintf("job-%d", i)))
		params = append(params, anthropicOrder(fmt.Sprintf("job-%d", i)))
	}
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		s := New(cfg)
		base := serveSim(t, s)
		b := pollOpenAI(t, base, openAIBatch(t, base, bodies, nil)["id"].(string))
		rc := b["request_counts"].(map[string]any)
		if b["status"] != "expired" || b["expired_at"] == nil || rc["completed"] != 14.0 || rc["failed"] != 6.0 {
			t.Fatalf("batch %v", b)
		}
		if n := len(lines(t, download(t, base+"/v1/files/"+b["output_file_id"].(string)+"/content", "application/octet-stream"))); n != 14 {
			t.Fatalf("%d output lines, want 14", n)
		}
		kinds := map[string]int{}
		for _, l := range lines(t, download(t, base+"/v1/files/"+b["error_file_id"].(string)+"/content", "application/octet-stream")) {
			switch {
			case l["response"] == nil:
				if e := l["error"].(map[string]any); e["code"] != "batch_expired" {
					t.Fatalf("expired line %v", l)
				}
				kinds["expired"]++
			default:
				r := l["response"].(map[string]any)
				e := r["body"].(map[string]any)["error"].(map[string]any)
				if r["status_code"] != 500.0 || e["type"] != "server_error" || l["error"] != nil {
					t.Fatalf("errored line %v", l)
				}
				kinds["errored"]++
			}
		}
		if kinds["expired"] != 4 || kinds["errored"] != 2 {
			t.Fatalf("error file: %v, want 4 expired and 2 errored", kinds)
		}
		if st := s.Stats().Batch; st.Succeeded != 14 || st.Expired != 4 || st.Errored != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		s := New(cfg)
		base := serveSim(t, s)
		b := pollAnthropic(t, base, anthropicBatch(t, base, params)["id"].(string))
		want := map[string]any{"processing": 0.0, "succeeded": 14.0, "errored": 2.0, "canceled": 0.0, "expired": 4.0}
		if !reflect.DeepEqual(b["request_counts"], want) {
			t.Fatalf("counts %v, want %v", b["request_counts"], want)
		}
		kinds := map[string][]string{}
		for _, l := range lines(t, download(t, b["results_url"].(string), "application/x-jsonl")) {
			r := l["result"].(map[string]any)
			typ := r["type"].(string)
			kinds[typ] = append(kinds[typ], l["custom_id"].(string))
			if typ == "errored" {
				e := r["error"].(map[string]any)
				if e["type"] != "error" || e["error"].(map[string]any)["type"] != "api_error" || e["request_id"] == nil {
					t.Fatalf("errored result %v", r)
				}
			}
		}
		if len(kinds["expired"]) != 4 || len(kinds["errored"]) != 2 || len(kinds["succeeded"]) != 14 {
			t.Fatalf("results %v", kinds)
		}
		// The same seed picks the same requests.
		s2 := New(cfg)
		base2 := serveSim(t, s2)
		again := map[string][]string{}
		b2 := pollAnthropic(t, base2, anthropicBatch(t, base2, params)["id"].(string))
		for _, l := range lines(t, download(t, b2["results_url"].(string), "application/x-jsonl")) {
			typ := l["result"].(map[string]any)["type"].(string)
			again[typ] = append(again[typ], l["custom_id"].(string))
		}
		if !reflect.DeepEqual(kinds, again) {
			t.Fatalf("same seed, other draws:\n%v\n%v", kinds, again)
		}
	})
}

// TestBatchDeadline: a batch still running at its deadline ends expired;
// the requests finished by then keep their results and the rest expire.
// Before the deadline OpenAI's counts show the requests finished so far.
func TestBatchDeadline(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	cfg := Config{Seed: 15, Now: clock.Now, Batch: BatchConfig{CompletionDelay: 10 * time.Second, Deadline: 4 * time.Second}}
	s := New(cfg)
	base := serveSim(t, s)
	var bodies, params []map[string]any
	for i := range 10 {
		bodies = append(bodies, orderRequest(fmt.Sprintf("job-%d", i)))
		params = append(params, anthropicOrder(fmt.Sprintf("job-%d", i)))
	}
	oa := openAIBatch(t, base, bodies, nil)["id"].(string)
	an := anthropicBatch(t, base, params)["id"].(string)
	clock.Advance(3 * time.Second) // the requests finish one a second
	var b map[string]any
	callJSON(t, "GET", base+"/v1/batches/"+oa, nil, &b)
	if rc := b["request_counts"].(map[string]any); b["status"] != "in_progress" || rc["completed"] != 3.0 {
		t.Fatalf("at 3 s: %v", b)
	}
	callJSON(t, "GET", base+"/v1/messages/batches/"+an, nil, &b)
	if rc := b["request_counts"].(map[string]any); b["processing_status"] != "in_progress" || rc["processing"] != 10.0 {
		t.Fatalf("at 3 s: %v", b)
	}
	clock.Advance(3 * time.Second) // past the deadline, at 4 s
	callJSON(t, "GET", base+"/v1/batches/"+oa, nil, &b)
	rc := b["request_counts"].(map[string]any)
	if b["status"] != "expired" || b["expired_at"] != float64(fixedNow().Add(4*time.Second).Unix()) || rc["completed"] != 4.0 || rc["failed"] != 6.0 {
		t.Fatalf("after the deadline: %v", b)
	}
	callJSON(t, "GET", base+"/v1/messages/batches/"+an, nil, &b)
	want := map[string]any{"processing": 0.0, "succeeded": 4.0, "errored": 0.0, "canceled": 0.0, "expired": 6.0}
	if b["processing_status"] != "ended" || !reflect.DeepEqual(b["request_counts"], want) || b["ended_at"] != "2026-03-01T12:00:04.000000Z" {
		t.Fatalf("after the deadline: %v", b)
	}
	if st := s.Stats().Batch; st.Succeeded != 8 || st.Expired != 12 || st.Ended != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchCancel: a cancel answers cancelling (canceling), the batch ends
// Config.Batch.CancelDelay later, the requests finished before the cancel
// keep their results and the others end cancelled; an ended batch cannot
// be cancelled.
func TestBatchCancel(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	s := New(Config{Seed: 16, Now: clock.Now, Batch: BatchConfig{CompletionDelay: 10 * time.Second, CancelDelay: 2 * time.Second}})
	base := serveSim(t, s)
	var bodies, params []map[string]any
	for i := range 10 {
		bodies = append(bodies, orderRequest(fmt.Sprintf("job-%d", i)))
		params = append(params, anthropicOrder(fmt.Sprintf("job-%d", i)))
	}
	oa := openAIBatch(t, base, bodies, nil)["id"].(string)
	an := anthropicBatch(t, base, params)["id"].(string)
	clock.Advance(3 * time.Second)
	var b map[string]any
	callJSON(t, "POST", base+"/v1/batches/"+oa+"/cancel", nil, &b)
	if b["status"] != "cancelling" || b["cancelling_at"] == nil || b["cancelled_at"] != nil {
		t.Fatalf("cancel: %v", b)
	}
	callJSON(t, "POST", base+"/v1/messages/batches/"+an+"/cancel", nil, &b)
	if b["processing_status"] != "canceling" || b["cancel_initiated_at"] == nil {
		t.Fatalf("cancel: %v", b)
	}
	clock.Advance(time.Second)
	callJSON(t, "GET", base+"/v1/batches/"+oa, nil, &b)
	if b["status"] != "cancelling" {
		t.Fatalf("1 s after cancel: %v", b["status"])
	}
	clock.Advance(time.Second)
	callJSON(t, "GET", base+"/v1/batches/"+oa, nil, &b)
	if rc := b["request_counts"].(map[string]any); b["status"] != "cancelled" || b["cancelled_at"] == nil || rc["completed"] != 3.0 || rc["failed"] != 7.0 {
		t.Fatalf("2 s after cancel: %v", b)
	}
	cancelled := 0
	for _, l := range lines(t, download(t, base+"/v1/files/"+b["error_file_id"].(string)+"/content", "application/octet-stream")) {
		if l["response"] == nil && l["error"].(map[string]any)["code"] == "batch_cancelled" {
			cancelled++
		}
	}
	if cancelled != 7 {
		t.Fatalf("%d batch_cancelled lines, want 7", cancelled)
	}
	callJSON(t, "GET", base+"/v1/messages/batches/"+an, nil, &b)
	want := map[string]any{"processing": 0.0, "succeeded": 3.0, "errored": 0.0, "canceled": 7.0, "expired": 0.0}
	if b["processing_status"] != "ended" || !reflect.DeepEqual(b["request_counts"], want) {
		t.Fatalf("after cancel: %v", b)
	}
	canceled := 0
	for _, l := range lines(t, download(t, b["results_url"].(string), "application/x-jsonl")) {
		if l["result"].(map[string]any)["type"] == "canceled" {
			canceled++
		}
	}
	if canceled != 7 {
		t.Fatalf("%d canceled results, want 7", canceled)
	}
	if code, _, body := httpCall(t, "POST", base+"/v1/batches/"+oa+"/cancel", nil); code != 400 {
		t.Fatalf("cancel of a cancelled batch: %d %s", code, body)
	}
	if code, _, body := httpCall(t, "POST", base+"/v1/messages/batches/"+an+"/cancel", nil); code != 400 {
		t.Fatalf("cancel of an ended batch: %d %s", code, body)
	}
	if st := s.Stats().Batch; st.Cancelled != 14 || st.Succeeded != 6 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAnthropicBadCustomID: a custom_id outside ^[a-zA-Z0-9_-]{1,64}$ is a
// 400 invalid_request_error and makes no batch.
func TestAnthropicBadCustomID(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	base := serveSim(t, s)
	params := anthropicOrder("job")
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"", false}, {"has space", false}, {"dot.ted", false}, {"ünï", false}, {strings.Repeat("a", 65), false},
		{strings.Repeat("a", 64), true}, {"a-b_C9", true},
	} {
		code, _, body := httpCall(t, "POST", base+"/v1/messages/batches",
			map[string]any{"requests": []any{map[string]any{"custom_id": tc.id, "params": params}}})
		if tc.ok {
			if code != 200 {
				t.Errorf("custom_id %q: status %d %s, want 200", tc.id, code, body)
			}
			continue
		}
		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if code != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "custom_id") {
			t.Errorf("custom_id %q: status %d %s, want 400 invalid_request_error", tc.id, code, body)
		}
	}
	if n := s.Stats().Batch.Created; n != 2 {
		t.Fatalf("%d batches created, want the 2 good ones", n)
	}
	code, _, body := httpCall(t, "POST", base+"/v1/messages/batches", map[string]any{"requests": []any{
		map[string]any{"custom_id": "a", "params": params}, map[string]any{"custom_id": "a", "params": params}}})
	if code != 400 {
		t.Fatalf("duplicate custom_id: %d %s", code, body)
	}
}

// TestOpenAIBadInputLine: a file with bad lines makes a batch that fails
// at validation, each bad line in errors.data with its code and number,
// and runs nothing.
func TestOpenAIBadInputLine(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	base := serveSim(t, s)
	good := jsonl([]map[string]any{orderRequest("a")})
	file := string(good) + "{not json\n\n" +
		`{"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o"}}` + "\n" +
		strings.TrimSpace(string(good)) + "\n" +
		`{"custom_id":"x","method":"POST","url":"/v1/embeddings","body":{"model":"gpt-4o"}}` + "\n" +
		`{"custom_id":"y","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[]}}` + "\n"
	f := upload(t, base, "bad.jsonl", []byte(file))
	var created map[string]any
	callJSON(t, "POST", base+"/v1/batches", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}, &created)
	if created["status"] != "validating" {
		t.Fatalf("create: %v", created)
	}
	var b map[string]any
	callJSON(t, "GET", base+"/v1/batches/"+created["id"].(string), nil, &b)
	if b["status"] != "failed" || b["failed_at"] == nil || b["output_file_id"] != nil || b["in_progress_at"] != nil {
		t.Fatalf("batch %v", b)
	}
	var got []string
	for _, e := range b["errors"].(map[string]any)["data"].([]any) {
		m := e.(map[string]any)
		got = append(got, fmt.Sprintf("%v@%v", m["code"], m["line"]))
		if m["message"] == "" {
			t.Errorf("error without a message: %v", m)
		}
	}
	want := []string{"invalid_json_line@2", "missing_required_parameter@4", "duplicate_custom_id@5", "url_mismatch@6", "model_mismatch@7"}
	if !slices.Equal(got, want) {
		t.Fatalf("errors %v, want %v", got, want)
	}
	if st := s.Stats().Batch; st.Failed != 1 || st.Succeeded+st.Errored != 0 {
		t.Fatalf("stats %+v", st)
	}
	// An empty file fails the same way; a wrong extension is refused at upload.
	f = upload(t, base, "empty.jsonl", []byte("\n"))
	callJSON(t, "POST", base+"/v1/batches", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}, &created)
	callJSON(t, "GET", base+"/v1/batches/"+created["id"].(string), nil, &b)
	if e := b["errors"].(map[string]any)["data"].([]any)[0].(map[string]any); e["code"] != "empty_file" {
		t.Fatalf("empty file: %v", b)
	}
}

// TestOpenAIBatchCreateRefusals: create calls OpenAI refuses at once.
func TestOpenAIBatchCreateRefusals(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	base := serveSim(t, s)
	f := upload(t, base, "in.jsonl", jsonl([]map[string]any{orderRequest("a")}))
	for _, tc := range []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"no file", map[string]any{"endpoint": "/v1/chat/completions", "completion_window": "24h"}, "input_file_id"},
		{"unknown file", map[string]any{"input_file_id": "file-nope", "endpoint": "/v1/chat/completions", "completion_window": "24h"}, "input_file_id"},
		{"endpoint", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"}, "endpoint"},
		{"window", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "1h"}, "completion_window"},
		{"metadata", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": map[string]any{"n": 1}}, "metadata"},
	} {
		code, _, body := httpCall(t, "POST", base+"/v1/batches", tc.body)
		var e struct{ Error struct{ Type, Param string } }
		_ = json.Unmarshal(body, &e)
		if code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s, want 400 on %s", tc.name, code, body, tc.param)
		}
	}
	if code, _, body := httpCall(t, "GET", base+"/v1/batches/batch_nope", nil); code != 404 {
		t.Errorf("unknown batch: %d %s", code, body)
	}
	if code, _, body := httpCall(t, "GET", base+"/v1/messages/batches/msgbatch_nope", nil); code != 404 || !strings.Contains(string(body), "not_found_error") {
		t.Errorf("unknown Anthropic batch: %d %s", code, body)
	}
	if code, _, body := httpCall(t, "DELETE", base+"/v1/batches", nil); code != 405 {
		t.Errorf("DELETE /v1/batches: %d %s", code, body)
	}
	if n := s.Stats().Batch.Created; n != 0 {
		t.Fatalf("%d batches created, want none", n)
	}
}

// TestBatchList: both lists are newest first, OpenAI's with each batch's
// metadata, and page with limit and the cursors.
func TestBatchList(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow, Batch: BatchConfig{CompletionDelay: -1}})
	base := serveSim(t, s)
	var oa, an []string
	for i := range 3 {
		oa = append(oa, openAIBatch(t, base, []map[string]any{orderRequest("a")}, map[string]string{"n": fmt.Sprint(i)})["id"].(string))
		an = append(an, anthropicBatch(t, base, []map[string]any{anthropicOrder("a")})["id"].(string))
	}
	type listJSON struct {
		Object  string           `json:"object"`
		Data    []map[string]any `json:"data"`
		FirstID string           `json:"first_id"`
		LastID  string           `json:"last_id"`
		HasMore bool             `json:"has_more"`
	}
	get := func(path string) listJSON {
		var l listJSON
		callJSON(t, "GET", base+path, nil, &l)
		return l
	}
	list := get("/v1/batches")
	if list.Object != "list" || len(list.Data) != 3 || list.HasMore || list.FirstID != oa[2] || list.LastID != oa[0] {
		t.Fatalf("list %+v", list)
	}
	for i, b := range list.Data {
		if b["id"] != oa[2-i] || b["metadata"].(map[string]any)["n"] != fmt.Sprint(2-i) || b["status"] != "completed" {
			t.Fatalf("item %d: %v", i, b)
		}
	}
	list = get("/v1/batches?limit=2")
	if len(list.Data) != 2 || !list.HasMore || list.LastID != oa[1] {
		t.Fatalf("page 1: %+v", list)
	}
	list = get("/v1/batches?limit=2&after=" + list.LastID)
	if len(list.Data) != 1 || list.HasMore || list.Data[0]["id"] != oa[0] {
		t.Fatalf("page 2: %+v", list)
	}
	list = get("/v1/messages/batches?limit=2")
	if len(list.Data) != 2 || !list.HasMore || list.FirstID != an[2] || list.LastID != an[1] || list.Data[0]["type"] != "message_batch" {
		t.Fatalf("Anthropic page 1: %+v", list)
	}
	list = get("/v1/messages/batches?after_id=" + an[1])
	if len(list.Data) != 1 || list.Data[0]["id"] != an[0] {
		t.Fatalf("Anthropic after_id: %+v", list)
	}
	list = get("/v1/messages/batches?before_id=" + an[0] + "&limit=1")
	if len(list.Data) != 1 || list.Data[0]["id"] != an[1] || !list.HasMore {
		t.Fatalf("Anthropic before_id: %+v", list)
	}
	if code, _, _ := httpCall(t, "GET", base+"/v1/batches?limit=0", nil); code != 400 {
		t.Fatalf("limit=0: %d", code)
	}
}

// TestBatchIgnoresTransportFaults: the chaos preset's transport faults
// and a tight request budget apply to realtime calls, not to the batch
// endpoints nor to a batch's requests; Script does apply.
func TestBatchIgnoresTransportFaults(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 17, Now: fixedNow, RPM: 1, Transport: Transport{Status500: 0.5, Status503: 0.5},
		Batch: BatchConfig{CompletionDelay: -1}}
	s := New(cfg)
	base := serveSim(t, s)
	var bodies []map[string]any
	for i := range 10 {
		bodies = append(bodies, orderRequest(fmt.Sprintf("job-%d", i)))
	}
	b := pollOpenAI(t, base, openAIBatch(t, base, bodies, nil)["id"].(string))
	if rc := b["request_counts"].(map[string]any); rc["completed"] != 10.0 {
		t.Fatalf("batch under chaos: %v", b)
	}
	if code, _, _ := httpCall(t, "POST", base+"/v1/chat/completions", bodies[0]); code == 200 {
		t.Fatal("a realtime call got through the faults")
	}
	scripted := New(Config{Now: fixedNow, Script: func(n int, r *http.Request) *ScriptedReply {
		if strings.HasSuffix(r.URL.Path, "/batches") && r.Method == http.MethodPost {
			return &ScriptedReply{Status: 500}
		}
		return nil
	}})
	if code, _, _ := httpCall(t, "POST", serveSim(t, scripted)+"/v1/messages/batches", map[string]any{}); code != 500 {
		t.Fatalf("scripted create: %d, want 500", code)
	}
}

// TestBatchLineAnsweredAsSingleCall: a request its single call would
// refuse ends errored with that refusal, in each provider's nesting.
func TestBatchLineAnsweredAsSingleCall(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow, Batch: BatchConfig{CompletionDelay: -1}})
	base := serveSim(t, s)
	bad := map[string]any{"model": "gpt-4o", "messages": []any{}}
	b := pollOpenAI(t, base, openAIBatch(t, base, []map[string]any{orderRequest("a"), bad}, nil)["id"].(string))
	errs := lines(t, download(t, base+"/v1/files/"+b["error_file_id"].(string)+"/content", "application/octet-stream"))
	single := do(t, s, "/v1/chat/completions", bad)
	if len(errs) != 1 || errs[0]["custom_id"] != "c-1" {
		t.Fatalf("error file %v", errs)
	}
	r := errs[0]["response"].(map[string]any)
	got, _ := json.Marshal(r["body"])
	if r["status_code"] != float64(single.Code) || !reflect.DeepEqual(withoutKeys(t, got), withoutKeys(t, single.Body.Bytes())) {
		t.Fatalf("errored line %v, single call %d %s", r, single.Code, single.Body)
	}
	badAnt := map[string]any{"model": "sim-sonnet", "messages": []any{map[string]any{"role": "user", "content": "hi"}}} // no max_tokens
	ab := pollAnthropic(t, base, anthropicBatch(t, base, []map[string]any{badAnt})["id"].(string))
	res := lines(t, download(t, ab["results_url"].(string), "application/x-jsonl"))
	e := res[0]["result"].(map[string]any)["error"].(map[string]any)
	if res[0]["result"].(map[string]any)["type"] != "errored" || e["error"].(map[string]any)["type"] != "invalid_request_error" ||
		!strings.Contains(e["error"].(map[string]any)["message"].(string), "max_tokens") {
		t.Fatalf("errored result %v", res[0])
	}
}

func TestBatchConfigValidation(t *testing.T) {
	t.Parallel()
	for _, b := range []BatchConfig{
		{ExpiredShare: 0.6, ErroredShare: 0.5},
		{ExpiredShare: -0.1},
		{ErroredShare: 1.5},
		{Deadline: -time.Second},
		{CancelDelay: -time.Second},
		{CacheHitProb: 1.5},
	} {
		if _, err := NewChecked(Config{Batch: b}); err == nil {
			t.Errorf("Batch %+v: no error", b)
		}
	}
	if _, err := NewChecked(Config{Cache: CacheConfig{TTL: -time.Second}}); err == nil {
		t.Error("negative Cache.TTL: no error")
	}
	c := Config{}.WithDefaults()
	if c.Batch.CompletionDelay != BatchCompletionDelayDefault || c.Batch.Deadline != 24*time.Hour || c.Batch.CacheHitProb != 1 || c.Cache.TTL != 5*time.Minute {
		t.Fatalf("defaults %+v %+v", c.Batch, c.Cache)
	}
}

// TestBatchIDSalt: a restarted server with the same seed hands out the
// same batch ids unless salted, and a salted one's ids are its own: the
// restarted simulator must 404 an earlier run's batch, not answer it with
// a new batch's results.
func TestBatchIDSalt(t *testing.T) {
	t.Parallel()
	first := func(salt string) string {
		cfg, _ := Preset("clean")
		cfg.Seed = 3
		cfg.Batch.CompletionDelay = -1
		cfg.Batch.IDSalt = salt
		base := serveSim(t, New(cfg))
		return anthropicBatch(t, base, []map[string]any{anthropicOrder("job-1")})["id"].(string)
	}
	if a, b := first(""), first(""); a != b {
		t.Fatalf("unsalted ids %s and %s differ: the same seed must give the same ids", a, b)
	}
	a, b := first("run-1"), first("run-2")
	if a == b || a == first("") {
		t.Fatalf("salted ids %s, %s (unsalted %s): want each salt its own", a, b, first(""))
	}
	if !strings.HasPrefix(a, "msgbatch_01") || len(a) != len(first("")) {
		t.Fatalf("salted id %q has not the provider's shape", a)
	}
}
