package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// orderRequest is an OpenAI prompt-mode request for task key user.
func orderRequest(user string) map[string]any {
	return map[string]any{
		"model": "gpt-4o",
		"user":  user,
		"messages": []any{
			map[string]any{"role": "system", "content": "Extract the order.\n" + fixpoint.SchemaMarkerOpen + "\n" + orderSchema + "\n" + fixpoint.SchemaMarkerClose + "\n"},
			map[string]any{"role": "user", "content": "Order for " + user + ": two lamps, paid by card."},
		},
	}
}

func TestSameSeedSameReply(t *testing.T) {
	t.Parallel()
	preset, err := Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	reply := func(seed uint64, path string, body map[string]any) string {
		cfg := preset
		cfg.Seed, cfg.Now = seed, fixedNow
		rec := do(t, New(cfg), path, body)
		if rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	anth := map[string]any{"model": "claude", "max_tokens": 2000, "metadata": map[string]any{"user_id": "job-1"},
		"system": fixpoint.SchemaMarkerOpen + "\n" + orderSchema + "\n" + fixpoint.SchemaMarkerClose, "messages": []any{map[string]any{"role": "user", "content": "go"}}}
	for i := range 20 {
		body := orderRequest(fmt.Sprintf("job-%d", i))
		a, b := reply(7, "/v1/chat/completions", body), reply(7, "/v1/chat/completions", body)
		if a != b {
			t.Fatalf("seed 7 job-%d: replies differ:\n%s\n%s", i, a, b)
		}
	}
	if a, b := reply(7, "/v1/messages", anth), reply(7, "/v1/messages", anth); a != b {
		t.Fatalf("anthropic replies differ:\n%s\n%s", a, b)
	}
	differ := 0
	for i := range 20 {
		body := orderRequest(fmt.Sprintf("job-%d", i))
		if reply(7, "/v1/chat/completions", body) != reply(8, "/v1/chat/completions", body) {
			differ++
		}
	}
	if differ < 19 {
		t.Fatalf("seeds 7 and 8 gave different replies for %d of 20 tasks, want nearly all", differ)
	}
}

// within checks a binomial count against n*p with a 4 sigma bound.
func within(t *testing.T, what string, got int64, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(got)-mean) > 4*sd+1 {
		t.Errorf("%s: %d of %d, want %.0f ± %.0f (p=%.4f)", what, got, n, mean, 4*sd, p)
	}
}

func TestFaultRates(t *testing.T) {
	t.Parallel()
	mix := Mix{
		Refusal: 0.03, Empty: 0.02, Truncation: 0.05,
		WrongType: 0.10, MissingRequired: 0.08, ExtraProperty: 0.06, EnumViolation: 0.05, OutOfRange: 0.07,
		Fence: 0.12, Prose: 0.08, TrailingComma: 0.06, SingleQuotes: 0.04, PythonLiterals: 0.05, Comments: 0.03,
	}
	s := New(Config{Seed: 42, Mix: mix, Now: fixedNow})
	const n = 10_000
	for i := range n {
		if rec := do(t, s, "/v1/chat/completions", orderRequest(fmt.Sprintf("task-%d", i))); rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
	}
	st := s.Stats()
	if st.Requests != n || st.Replies != n {
		t.Fatalf("Requests = %d, Replies = %d, want %d", st.Requests, st.Replies, n)
	}
	carrier := 1 - mix.Refusal - mix.Empty // replies with a JSON value
	for _, k := range FaultKinds() {
		p := mix.Prob(k)
		switch k {
		case FaultRefusal, FaultEmpty, FaultTruncation:
		default:
			p *= carrier
		}
		within(t, string(k), st.Faults[k], n, p)
	}
}

func TestTransportFaultRates(t *testing.T) {
	t.Parallel()
	tr := Transport{Status500: 0.05, Status503: 0.04, Status529: 0.03, RateLimited: 0.30, Malformed: 0.02, Huge: 0.01}
	s := New(Config{Seed: 3, Transport: tr, HugeBytes: 4096, Now: fixedNow})
	const n = 10_000
	malformed, huge := 0, 0
	for i := range n {
		rec := do(t, s, "/v1/chat/completions", orderRequest(fmt.Sprintf("task-%d", i)))
		if rec.Code == 200 {
			switch {
			case !json.Valid(rec.Body.Bytes()):
				malformed++
			case rec.Body.Len() > 4096:
				huge++
			}
		}
		if rec.Code == 429 && rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("429 without Retry-After: 1: %v", rec.Header())
		}
	}
	st := s.Stats()
	within(t, "500", st.ByStatus[500], n, tr.Status500)
	within(t, "503", st.ByStatus[503], n, tr.Status503)
	within(t, "529", st.ByStatus[529], n, tr.Status529)
	within(t, "429", st.ByStatus[429], n, tr.RateLimited)
	within(t, "malformed", int64(malformed), n, tr.Malformed)
	within(t, "huge", int64(huge), n, tr.Huge)
	if st.Transport[EventMalformed] != int64(malformed) || st.Transport[EventHuge] != int64(huge) {
		t.Errorf("Stats transport %v disagree with observed malformed %d, huge %d", st.Transport, malformed, huge)
	}
}

// exactFeedback names every validation error with its instance pointer, as
// the pipeline's correction prompt does.
func exactFeedback(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "invalid"
	}
	var b strings.Builder
	b.WriteString("Your JSON does not match the schema. Fix these errors:\n")
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		fmt.Fprintf(&b, "- at %q: %s\n", u.InstanceLocation, u.Error.String())
	}
	return b.String()
}

func TestExactCorrectionsConvergeFasterThanVague(t *testing.T) {
	t.Parallel()
	cfg, err := Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	// Content faults only, so every reply parses and the test measures the
	// correction loop, not the extractor.
	m := cfg.Mix
	cfg.Mix = Mix{WrongType: m.WrongType, MissingRequired: m.MissingRequired, ExtraProperty: m.ExtraProperty,
		EnumViolation: m.EnumViolation, OutOfRange: m.OutOfRange}
	cfg.Seed, cfg.Now = 11, fixedNow
	s := New(cfg)
	sch := compileSchema(t, orderSchema)
	const tasks = 500
	run := func(exact bool) (validFirst, validAfter2 int) {
		for i := range tasks {
			body := orderRequest(fmt.Sprintf("conv-%d", i))
			msgs := body["messages"].([]any)
			for turn := 0; turn <= 2; turn++ {
				body["messages"] = msgs
				rec := do(t, s, "/v1/chat/completions", body)
				text, _ := openAIText(t, rec.Body.Bytes())
				verr := sch.Validate(decodeValue(t, []byte(text)))
				if verr == nil {
					if turn == 0 {
						validFirst++
					}
					validAfter2++
					break
				}
				fb := "Your answer is invalid. Please try again."
				if exact {
					fb = exactFeedback(verr)
				}
				msgs = append(msgs, map[string]any{"role": "assistant", "content": text}, map[string]any{"role": "user", "content": fb})
			}
		}
		return validFirst, validAfter2
	}
	exactFirst, exact := run(true)
	vagueFirst, vague := run(false)
	if exactFirst != vagueFirst {
		t.Fatalf("first attempts differ: %d vs %d (they must not depend on the feedback)", exactFirst, vagueFirst)
	}
	if exactFirst > tasks*7/10 {
		t.Fatalf("%d of %d first attempts valid; the messy preset should fail about half", exactFirst, tasks)
	}
	t.Logf("valid after 2 corrections: exact %d/%d, vague %d/%d (first attempt %d)", exact, tasks, vague, tasks, exactFirst)
	if exact < tasks*9/10 {
		t.Errorf("exact feedback: %d of %d valid after 2 corrections, want >= 90%%", exact, tasks)
	}
	if exact-vague < tasks/5 {
		t.Errorf("exact %d vs vague %d valid after 2 corrections: want exact clearly ahead", exact, vague)
	}
}

func TestConcurrencyDoesNotChangeReplies(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Seed, cfg.Now = 4, fixedNow
	const n = 200
	sequential := make([]string, n)
	s1 := New(cfg)
	for i := range n {
		sequential[i] = do(t, s1, "/v1/chat/completions", orderRequest(fmt.Sprintf("c-%d", i))).Body.String()
	}
	s2 := New(cfg)
	concurrent := make([]string, n)
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- { // reverse order, all at once
		wg.Go(func() {
			concurrent[i] = do(t, s2, "/v1/chat/completions", orderRequest(fmt.Sprintf("c-%d", i))).Body.String()
		})
	}
	wg.Wait()
	for i := range n {
		if sequential[i] != concurrent[i] {
			t.Fatalf("task %d: concurrent reply differs:\n%s\n%s", i, sequential[i], concurrent[i])
		}
	}
}

func TestHashStringsIsFNV1aWithZeroSeparators(t *testing.T) {
	t.Parallel()
	for _, parts := range [][]string{nil, {""}, {"truth", "key", `{"type":"object"}`}, {"a\x00b", "", "é"}} {
		h := fnv.New64a()
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
		if got, want := hashStrings(parts...), h.Sum64(); got != want {
			t.Errorf("hashStrings(%q) = %x, want %x (hash/fnv)", parts, got, want)
		}
	}
}
