package sim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// A test starts the simulator on a loopback port and points a client at it.
// The schema rides in the system prompt between the contract markers.
func ExampleStart() {
	cfg, err := sim.Preset("clean")
	if err != nil {
		panic(err)
	}
	_, url, closeFn, err := sim.Start(cfg)
	if err != nil {
		panic(err)
	}
	defer closeFn()

	system := "Answer with JSON.\n" + fixpoint.SchemaMarkerOpen + "\n" +
		`{"type":"object","required":["status"],"properties":{"status":{"const":"ok"}}}` +
		"\n" + fixpoint.SchemaMarkerClose
	body, _ := json.Marshal(map[string]any{
		"model": "gpt-4o",
		"user":  "job-1",
		"messages": []any{
			map[string]any{"role": "system", "content": system},
			map[string]any{"role": "user", "content": "How is it going?"},
		},
	})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, out.Choices[0].Message.Content, out.Choices[0].FinishReason)
	// Output: 200 {"status":"ok"} stop
}

// Scripts force what particular calls get: here the first two calls fail
// with the provider's 503 and the third one is answered.
func ExampleScriptFunc() {
	s := sim.New(sim.Config{Script: func(n int, _ *http.Request) *sim.ScriptedReply {
		if n <= 2 {
			return &sim.ScriptedReply{Status: http.StatusServiceUnavailable}
		}
		return nil
	}})
	for range 3 {
		body := `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body)))
		var out struct{ Type string }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		fmt.Println(rec.Code, out.Type)
	}
	fmt.Println("calls:", s.Stats().Requests)
	// Output:
	// 503 error
	// 503 error
	// 200 message
	// calls: 3
}

// PresetNames feeds --help.
func ExamplePresetNames() {
	for _, p := range sim.PresetNames() {
		fmt.Println(p.Name)
	}
	// Output:
	// clean
	// typical
	// messy
	// rate-limited
	// chaos
}
