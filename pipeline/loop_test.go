package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// fakeCompleter answers from a script, one entry per call, and records the
// requests it saw.
type fakeCompleter struct {
	mu      sync.Mutex
	replies []fakeReply
	reqs    []fixpoint.Request
}

type fakeReply struct {
	text   string
	finish fixpoint.FinishReason
	err    error
	in     int
	out    int
}

var _ Completer = (*fakeCompleter)(nil)

func (f *fakeCompleter) Complete(_ context.Context, req fixpoint.Request) (*fixpoint.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if len(f.reqs) > len(f.replies) {
		return nil, &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "script exhausted"}
	}
	r := f.replies[len(f.reqs)-1]
	if r.err != nil {
		return nil, r.err
	}
	finish := r.finish
	if finish == "" {
		finish = fixpoint.FinishStop
	}
	in, out := r.in, r.out
	if in == 0 {
		in = 100
	}
	if out == 0 {
		out = len(r.text)/4 + 1
	}
	return &fixpoint.Response{Text: r.text, FinishReason: finish, Status: 200, Model: req.Model,
		Usage: fixpoint.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: 10}}, nil
}

const ticketSchema = `{
  "type": "object",
  "properties": {
    "category": {"enum": ["billing", "bug", "account"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "summary": {"type": "string", "minLength": 3}
  },
  "required": ["category", "priority", "summary"],
  "additionalProperties": false
}`

func testJob(t testing.TB, lim fixpoint.Limits) *repair.Job {
	t.Helper()
	s, err := validate.Compile([]byte(ticketSchema))
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return &repair.Job{ID: "job-1", Prompt: "Classify: my card was charged twice", Schema: s, SchemaRaw: []byte(ticketSchema),
		Model: "gpt-4o-mini", Mode: fixpoint.ModePrompt, Limits: lim}
}

const (
	validReply   = `{"category": "billing", "priority": 2, "summary": "double charge"}`
	enumReply    = `{"category": "payments", "priority": 2, "summary": "double charge"}`
	typeReply    = `{"category": "billing", "priority": "high", "summary": "double charge"}`
	fencedRepair = "Here you go:\n```json\n{'category': 'billing', 'priority': 2, 'summary': 'double charge',}\n```"
)

func TestLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		limits       fixpoint.Limits
		replies      []fakeReply
		wantStatus   fixpoint.Status
		wantAttempts int
		wantClasses  []string
		wantErr      error
		check        func(t *testing.T, f *fakeCompleter, res *fixpoint.Result)
	}{
		{
			name: "valid first time", replies: []fakeReply{{text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 1, wantClasses: []string{""},
			check: func(t *testing.T, _ *fakeCompleter, res *fixpoint.Result) {
				if !res.FirstAttemptValid || res.RepairedLocally {
					t.Errorf("first_attempt_valid=%v repaired_locally=%v, want true false", res.FirstAttemptValid, res.RepairedLocally)
				}
				if string(res.Value) != `{"category":"billing","priority":2,"summary":"double charge"}` {
					t.Errorf("value = %s", res.Value)
				}
			},
		},
		{
			name: "local repair saves a call", replies: []fakeReply{{text: fencedRepair}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 1, wantClasses: []string{""},
			check: func(t *testing.T, _ *fakeCompleter, res *fixpoint.Result) {
				if !res.RepairedLocally || len(res.Attempts[0].Repairs) == 0 {
					t.Errorf("repaired_locally=%v repairs=%v, want a local repair", res.RepairedLocally, res.Attempts[0].Repairs)
				}
				if res.Attempts[0].Source != "fence" {
					t.Errorf("source = %q, want fence", res.Attempts[0].Source)
				}
			},
		},
		{
			name: "conversation feedback names the pointer", replies: []fakeReply{{text: enumReply}, {text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 2, wantClasses: []string{"semantic", ""},
			check: func(t *testing.T, f *fakeCompleter, res *fixpoint.Result) {
				second := f.reqs[1].Messages
				if len(second) != 3 || second[1].Role != fixpoint.RoleAssistant || second[1].Content != enumReply {
					t.Fatalf("second request messages = %+v, want user, assistant(failed reply), user(feedback)", second)
				}
				if !strings.Contains(second[2].Content, "/category") || !strings.Contains(second[2].Content, "1. ") {
					t.Errorf("feedback %q does not name /category in a numbered list", second[2].Content)
				}
				if res.Attempts[0].Feedback != second[2].Content {
					t.Errorf("attempt feedback not recorded as sent")
				}
			},
		},
		{
			name: "repair strategy sends one fresh turn", limits: fixpoint.Limits{Strategy: fixpoint.StrategyRepair, Feedback: fixpoint.FeedbackXML},
			replies:    []fakeReply{{text: typeReply}, {text: enumReply}, {text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 3, wantClasses: []string{"shape", "semantic", ""},
			check: func(t *testing.T, f *fakeCompleter, _ *fixpoint.Result) {
				for i := 1; i < 3; i++ {
					msgs := f.reqs[i].Messages
					if len(msgs) != 1 || msgs[0].Role != fixpoint.RoleUser {
						t.Fatalf("request %d has %d messages, want 1 user turn", i, len(msgs))
					}
					c := msgs[0].Content
					if !strings.Contains(c, fixpoint.PreviousReplyOpen+"\n") || !strings.Contains(c, "<validation-errors>") || !strings.Contains(c, "Classify: my card") {
						t.Errorf("request %d lacks task, previous reply or xml errors:\n%s", i, c)
					}
				}
				if strings.Contains(f.reqs[2].Messages[0].Content, typeReply) {
					t.Errorf("round 3 still carries the reply of round 1")
				}
			},
		},
		{
			name: "gives up after max attempts", limits: fixpoint.Limits{MaxAttempts: 2},
			replies:    []fakeReply{{text: enumReply}, {text: typeReply}, {text: validReply}},
			wantStatus: fixpoint.StatusInvalid, wantAttempts: 2, wantClasses: []string{"semantic", "shape"},
			check: func(t *testing.T, f *fakeCompleter, res *fixpoint.Result) {
				if len(f.reqs) != 2 {
					t.Errorf("calls = %d, want 2", len(f.reqs))
				}
				if res.Class != "shape" || res.Value != nil {
					t.Errorf("class=%q value=%s, want shape and no value", res.Class, res.Value)
				}
			},
		},
		{
			name: "truncated is never accepted", limits: fixpoint.Limits{TruncationMaxTokens: 4096},
			replies:    []fakeReply{{text: validReply, finish: fixpoint.FinishLength}, {text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 2, wantClasses: []string{"truncated", ""},
			check: func(t *testing.T, f *fakeCompleter, _ *fixpoint.Result) {
				if f.reqs[0].MaxTokens != fixpoint.MaxTokensDefault || f.reqs[1].MaxTokens != 4096 {
					t.Errorf("max tokens = %d then %d, want %d then 4096", f.reqs[0].MaxTokens, f.reqs[1].MaxTokens, fixpoint.MaxTokensDefault)
				}
			},
		},
		{
			name:       "refusal is its own class",
			replies:    []fakeReply{{text: "I can't help with that.", finish: fixpoint.FinishRefusal}, {text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 2, wantClasses: []string{"refusal", ""},
		},
		{
			name:       "no JSON is syntax",
			replies:    []fakeReply{{text: "Sure! The category is billing."}, {text: validReply}},
			wantStatus: fixpoint.StatusValid, wantAttempts: 2, wantClasses: []string{"syntax", ""},
		},
		{
			name:       "permanent provider error stops",
			replies:    []fakeReply{{err: &fixpoint.ProviderError{Class: fixpoint.ClassAuth, Status: 403, Message: "no access to this model"}}},
			wantStatus: fixpoint.StatusFailed, wantAttempts: 1, wantClasses: []string{"provider"},
		},
		{
			name:       "a refused key is transient for the job",
			replies:    []fakeReply{{err: &fixpoint.ProviderError{Class: fixpoint.ClassAuth, Status: 401, Message: "bad key"}}},
			wantStatus: fixpoint.StatusFailed, wantAttempts: 1, wantClasses: []string{"provider"}, wantErr: fixpoint.ErrProviderAuth,
		},
		{
			name:       "transient provider error hands the job back",
			replies:    []fakeReply{{text: enumReply}, {err: &fixpoint.ProviderError{Class: fixpoint.ClassOverloaded, Status: 529}}},
			wantStatus: fixpoint.StatusFailed, wantAttempts: 2, wantClasses: []string{"semantic", "provider"}, wantErr: fixpoint.ErrTransient,
		},
		{
			name:       "quota exhausted is transient for the job",
			replies:    []fakeReply{{err: &fixpoint.ProviderError{Class: fixpoint.ClassQuotaExhausted, Status: 429, Code: "insufficient_quota"}}},
			wantStatus: fixpoint.StatusFailed, wantAttempts: 1, wantClasses: []string{"provider"}, wantErr: fixpoint.ErrQuotaExhausted,
		},
		{
			name: "token budget stops before crossing", limits: fixpoint.Limits{TokenBudget: 1500},
			replies:    []fakeReply{{text: enumReply, in: 300, out: 200}, {text: validReply}},
			wantStatus: fixpoint.StatusFailed, wantAttempts: 1, wantClasses: []string{"semantic"},
			check: func(t *testing.T, f *fakeCompleter, res *fixpoint.Result) {
				if len(f.reqs) != 1 || res.Class != fixpoint.OutcomeBudget {
					t.Errorf("calls=%d class=%q, want 1 call and class budget", len(f.reqs), res.Class)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCompleter{replies: tt.replies}
			res, err := NewLoop(f, LoopConfig{}).Run(context.Background(), testJob(t, tt.limits))
			if tt.wantErr == nil && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
			}
			if res.Status != tt.wantStatus {
				t.Errorf("status = %s, want %s (error %q)", res.Status, tt.wantStatus, res.Error)
			}
			if len(res.Attempts) != tt.wantAttempts {
				t.Fatalf("attempts = %d, want %d", len(res.Attempts), tt.wantAttempts)
			}
			var in, out, cached int
			for i, a := range res.Attempts {
				if a.No != i+1 {
					t.Errorf("attempt %d numbered %d", i+1, a.No)
				}
				if i < len(tt.wantClasses) && a.Class != tt.wantClasses[i] {
					t.Errorf("attempt %d class = %q, want %q", i+1, a.Class, tt.wantClasses[i])
				}
				if a.RequestHash == "" || a.Request == nil {
					t.Errorf("attempt %d lacks its request record", i+1)
				}
				in, out, cached = in+a.TokensIn, out+a.TokensOut, cached+a.TokensCached
			}
			if res.TokensIn != in || res.TokensOut != out || res.TokensCached != cached {
				t.Errorf("job tokens %d/%d/%d != sum of attempts %d/%d/%d", res.TokensIn, res.TokensOut, res.TokensCached, in, out, cached)
			}
			if res.Status == fixpoint.StatusValid && (res.Error != "" || res.Class != "") {
				t.Errorf("valid job carries error %q, class %q", res.Error, res.Class)
			}
			if tt.check != nil {
				tt.check(t, f, res)
			}
		})
	}
}

func TestLoopCost(t *testing.T) {
	t.Parallel()
	f := &fakeCompleter{replies: []fakeReply{{text: validReply, in: 4000, out: 1000}}}
	prices := repair.Prices{"gpt-4o-mini": {InputPerMTok: 1, OutputPerMTok: 2, CachedInputPerMTok: 0.5}}
	res, err := NewLoop(f, LoopConfig{Prices: prices}).Run(context.Background(), testJob(t, fixpoint.Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	// 3,990 uncached at $1/M, 10 cached at $0.5/M, 1,000 out at $2/M.
	want := (3_990*1.0 + 10*0.5 + 1_000*2.0) / 1e6
	if diff := res.CostUSD - want; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("cost = %v, want %v", res.CostUSD, want)
	}
}

func TestSystemPromptDescribesSchema(t *testing.T) {
	t.Parallel()
	job := testJob(t, fixpoint.Limits{})
	sp := repair.SystemPrompt(job)
	for _, want := range []string{"exactly one JSON value", "`category` (required): one of \"billing\", \"bug\", \"account\"",
		"`priority` (required): an integer, at least 1, at most 5", fixpoint.SchemaMarkerOpen + "\n", "\n" + fixpoint.SchemaMarkerClose} {
		if !strings.Contains(sp, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sp)
		}
	}
	job.Mode = fixpoint.ModeTool
	if strings.Contains(repair.SystemPrompt(job), fixpoint.SchemaMarkerOpen) {
		t.Errorf("tool mode prompt carries the schema block")
	}
}

// TestLoopResume: a provider that fails after the transport retries hands
// the job back with its paid attempts; Resume goes on from the last reply,
// numbering on, without counting the failed call as a repair attempt.
func TestLoopResume(t *testing.T) {
	t.Parallel()
	down := &fixpoint.ProviderError{Class: fixpoint.ClassOverloaded, Status: 529}
	t.Run("converges after the outage", func(t *testing.T) {
		t.Parallel()
		f := &fakeCompleter{replies: []fakeReply{{text: enumReply}, {err: down}, {text: validReply}}}
		loop := NewLoop(f, LoopConfig{})
		job := testJob(t, fixpoint.Limits{MaxAttempts: 2})
		res, err := loop.Run(context.Background(), job)
		if !errors.Is(err, fixpoint.ErrTransient) || len(res.Attempts) != 2 {
			t.Fatalf("Run = %d attempts, %v; want 2 and ErrTransient", len(res.Attempts), err)
		}
		res, err = loop.Resume(context.Background(), job, res, LoopHooks{})
		if err != nil || res.Status != fixpoint.StatusValid {
			t.Fatalf("Resume = %s, %v; want valid", res.Status, err)
		}
		var classes []string
		for i, a := range res.Attempts {
			if a.No != i+1 {
				t.Errorf("attempt %d numbered %d", i+1, a.No)
			}
			classes = append(classes, a.Class)
		}
		if strings.Join(classes, ",") != "semantic,provider," {
			t.Errorf("classes %v, want semantic, provider, valid", classes)
		}
		// The resumed call carries the correction of attempt 1.
		third := f.reqs[2].Messages
		if len(third) != 3 || third[1].Content != enumReply || !strings.Contains(third[2].Content, "/category") {
			t.Errorf("resumed request = %+v, want the conversation with the correction", third)
		}
		if res.TokensIn != res.Attempts[0].TokensIn+res.Attempts[2].TokensIn || res.Calls != 3 {
			t.Errorf("tokens in %d, calls %d: want the sum of both replies, 3 calls", res.TokensIn, res.Calls)
		}
	})
	t.Run("the failed call is not a repair attempt", func(t *testing.T) {
		t.Parallel()
		f := &fakeCompleter{replies: []fakeReply{{text: enumReply}, {err: down}, {text: typeReply}, {text: validReply}}}
		loop := NewLoop(f, LoopConfig{})
		job := testJob(t, fixpoint.Limits{MaxAttempts: 2})
		res, _ := loop.Run(context.Background(), job)
		res, err := loop.Resume(context.Background(), job, res, LoopHooks{})
		if err != nil || res.Status != fixpoint.StatusInvalid || len(f.reqs) != 3 {
			t.Fatalf("status %s after %d calls (%v); want invalid after 2 replies and 3 calls", res.Status, len(f.reqs), err)
		}
	})
}

// TestLoopPromptCache: jobs sharing a Loop get the system prompt of their
// own schema and mode, cached or not.
func TestLoopPromptCache(t *testing.T) {
	t.Parallel()
	other := `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`
	loop := NewLoop(&fakeCompleter{}, LoopConfig{})
	a := testJob(t, fixpoint.Limits{})
	b := testJob(t, fixpoint.Limits{})
	b.SchemaRaw = []byte(other)
	c := testJob(t, fixpoint.Limits{})
	c.Mode = fixpoint.ModeTool
	for round := 0; round < 2; round++ {
		pa, pb, pc := loop.systemPrompt(a).text, loop.systemPrompt(b).text, loop.systemPrompt(c).text
		if pa != repair.SystemPrompt(a) || pb != repair.SystemPrompt(b) || pc != repair.SystemPrompt(c) {
			t.Fatalf("round %d: a cached prompt differs from a fresh one", round)
		}
		if pa == pb || pa == pc || !strings.Contains(pb, "`ok` (required)") {
			t.Fatalf("round %d: prompts of different schemas or modes are the same", round)
		}
	}
}

// TestLoopRecordsRequest: each attempt keeps the hash of the whole request
// as sent ([system, messages...] as JSON), and in full mode the messages
// after the system prompt plus the prompt itself, one Prompt shared by the
// attempts that sent it; in hash mode only the hash.
func TestLoopRecordsRequest(t *testing.T) {
	t.Parallel()
	for _, mode := range []repair.RequestRecord{repair.RecordFull, repair.RecordHash} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			f := &fakeCompleter{replies: []fakeReply{{text: enumReply}, {text: typeReply}, {text: validReply}}}
			loop := NewLoop(f, LoopConfig{Record: mode})
			res, err := loop.Run(context.Background(), testJob(t, fixpoint.Limits{Strategy: fixpoint.StrategyConversation}))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Attempts) != 3 || len(f.reqs) != 3 {
				t.Fatalf("%d attempts and %d calls, want 3 and 3", len(res.Attempts), len(f.reqs))
			}
			for i, a := range res.Attempts {
				req := f.reqs[i]
				whole, err := json.Marshal(append([]fixpoint.Message{{Role: "system", Content: req.System}}, req.Messages...))
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(whole)
				if a.RequestHash != hex.EncodeToString(sum[:]) {
					t.Errorf("attempt %d: request hash is not the SHA-256 of the request as sent", a.No)
				}
				if mode == repair.RecordHash {
					if a.Request != nil || a.System != nil {
						t.Errorf("attempt %d keeps %s and %v with only the hash asked for", a.No, a.Request, a.System)
					}
					continue
				}
				rest, _ := json.Marshal(req.Messages)
				if string(a.Request) != string(rest) {
					t.Errorf("attempt %d request = %s, want the messages after the system prompt %s", a.No, a.Request, rest)
				}
				if a.System == nil || a.System.Text() != req.System || a.System != res.Attempts[0].System {
					t.Errorf("attempt %d system prompt is not the one sent, shared by every attempt", a.No)
				}
			}
			if n := len(f.reqs[2].Messages); n != 5 {
				t.Errorf("third request has %d messages, want 5 (the conversation grew)", n)
			}
		})
	}
}
