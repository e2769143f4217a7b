package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/segmentio/encoding/json"
	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Completer is what the loop needs from a provider client: one call, with
// transport retries already done. *llm.Client satisfies it.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// RequestRecord says how much of each request the ledger keeps.
type RequestRecord string

const (
	// RecordFull keeps the messages as sent (system first).
	RecordFull RequestRecord = "full"
	// RecordHash keeps only a SHA-256 of them.
	RecordHash RequestRecord = "hash"
)

// LoopConfig configures a Loop. The zero value is usable.
type LoopConfig struct {
	// Prices estimates cost; defaults to DefaultPrices.
	Prices Prices
	// Record defaults to RecordFull.
	Record RequestRecord
	// NowFunc is the clock; defaults to time.Now.
	NowFunc func() time.Time
}

// Loop runs the repair loop: generate, extract, validate, and on failure
// send the model its exact errors, up to the job's attempt limit.
type Loop struct {
	client Completer
	cfg    LoopConfig

	// prompts caches system prompts by mode, user system prompt and
	// schema: the jobs of a batch share them, and building one parses the
	// schema twice.
	prompts     sync.Map // key -> *system
	promptCount atomic.Int64
	// promptBuilds makes the jobs that miss the cache together (all of
	// them, when a worker starts on a full queue) share one build, and
	// count once against promptCacheMax.
	promptBuilds singleflight.Group
}

// system is a system prompt with what recording it takes, made once per
// prompt: its ledger form (hashed once) and its message as JSON.
type system struct {
	text   string
	ledger *store.Prompt
	msg    []byte // {"role":"system","content":text}, as json.Marshal writes it
}

func newSystem(text string) *system {
	if text == "" {
		return &system{}
	}
	msg, _ := json.Marshal(llm.Message{Role: "system", Content: text})
	return &system{text: text, ledger: store.NewPrompt(text), msg: msg}
}

// promptCacheMax bounds the system prompts a Loop keeps.
const promptCacheMax = 1024

func (l *Loop) systemPrompt(job *Job) *system {
	key := string(job.Mode) + "\x00" + job.System + "\x00" + string(job.SchemaRaw)
	if p, ok := l.prompts.Load(key); ok {
		return p.(*system)
	}
	p, _, _ := l.promptBuilds.Do(key, func() (any, error) {
		if p, ok := l.prompts.Load(key); ok {
			return p, nil // stored while this call waited for its turn
		}
		p := newSystem(systemPrompt(job))
		if l.promptCount.Add(1) <= promptCacheMax {
			l.prompts.Store(key, p)
		}
		return p, nil
	})
	return p.(*system)
}

// NewLoop returns a loop calling client.
func NewLoop(client Completer, cfg LoopConfig) *Loop {
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	if cfg.Record == "" {
		cfg.Record = RecordFull
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Loop{client: client, cfg: cfg}
}

// Run runs job to a final result. The result is always returned, with every
// attempt made. The error is non-nil only when the job should be run again
// later rather than recorded as final: it then matches ErrTransient (a
// provider still failing after its transport retries, or ctx ended), or
// ErrBadJob when the job itself is malformed.
func (l *Loop) Run(ctx context.Context, job *Job) (*Result, error) {
	return l.Resume(ctx, job, nil)
}

// Resume continues a job whose earlier Run or Resume returned ErrTransient
// (a provider still failing after its transport retries): the attempts in
// prev are kept, paid tokens included, and the conversation goes on from the
// last reply. Attempts that got no reply do not count against MaxAttempts.
// With a nil prev it is Run.
func (l *Loop) Resume(ctx context.Context, job *Job, prev *Result) (*Result, error) {
	start := l.cfg.NowFunc()
	res := &Result{JobID: job.ID, StartedAt: start, Value: nil}
	if prev != nil {
		res = prev
		start = prev.StartedAt
	}
	lim := job.Limits.WithDefaults()
	if err := lim.Validate(); err != nil {
		return res, err
	}
	if job.Schema == nil {
		return res, fmt.Errorf("%w: job %s has no compiled schema", ErrBadJob, job.ID)
	}
	if job.Prompt == "" && len(job.Messages) == 0 {
		return res, fmt.Errorf("%w: job %s has no prompt", ErrBadJob, job.ID)
	}
	mode := job.Mode
	if mode == "" {
		mode = llm.ModePrompt
	}
	jobCopy := *job
	jobCopy.Mode = mode
	maxTokens := job.MaxTokens
	if maxTokens == 0 {
		maxTokens = MaxTokensDefault
	}

	base := job.Messages
	if len(base) == 0 {
		base = []llm.Message{{Role: llm.RoleUser, Content: job.Prompt}}
	}
	system := l.systemPrompt(&jobCopy)
	messages := append([]llm.Message(nil), base...)
	replies := 0
	for i := range res.Attempts {
		a := &res.Attempts[i]
		if a.Class != OutcomeProvider {
			replies++
		}
		if a.Feedback != "" {
			messages = nextMessages(lim.Strategy, base, messages, a)
		}
		if a.Class == OutcomeTruncated && lim.TruncationMaxTokens > maxTokens {
			maxTokens = lim.TruncationMaxTokens
		}
	}
	defer func() { res.Wall = l.cfg.NowFunc().Sub(start) }()

	for n := len(res.Attempts) + 1; replies < lim.MaxAttempts; n++ {
		req := llm.Request{
			Model:       job.Model,
			System:      system.text,
			Messages:    messages,
			Mode:        mode,
			Schema:      job.SchemaRaw,
			Temperature: job.Temperature,
			MaxTokens:   maxTokens,
			User:        job.ID,
		}
		if lim.TokenBudget > 0 {
			spent := res.TokensIn + res.TokensOut
			if spent+estimateTokens(&req) > lim.TokenBudget {
				res.Status = StatusFailed
				res.Class = OutcomeBudget
				res.Error = fmt.Sprintf("token budget %d would be exceeded: %d spent, next attempt needs about %d", lim.TokenBudget, spent, estimateTokens(&req))
				break
			}
		}
		var release func(*llm.Response, error)
		if job.GateFunc != nil {
			rel, err := job.GateFunc(ctx, &req)
			if errors.Is(err, ErrOverBudget) {
				res.Status = StatusOverBudget
				res.Class = OutcomeBudget
				res.Error = err.Error()
				break
			}
			if err != nil {
				l.finish(res, job)
				return res, err
			}
			release = rel
		}
		a := Attempt{No: n, StartedAt: l.cfg.NowFunc()}
		l.recordRequest(&a, system, &req)
		resp, err := l.client.Complete(ctx, req)
		if release != nil {
			release(resp, err)
		}
		if err != nil {
			var perr *llm.Error
			a.Class = OutcomeProvider
			a.ProviderError = err.Error()
			if errors.As(err, &perr) {
				a.ProviderStatus = perr.Status
				a.ProviderClass = perr.Class
				a.Retries = perr.Retries
				a.RequestID = perr.RequestID
				// A reply over the size cap was made and billed: keep its
				// first bytes (the error names its size).
				a.Raw = perr.Head
			}
			a.Latency = l.cfg.NowFunc().Sub(a.StartedAt)
			res.TransportRetries += len(a.Retries)
			// The failed call is an attempt of the job, whatever comes next.
			res.Calls++
			res.Attempts = append(res.Attempts, a)
			res.Status = StatusFailed
			res.Class = OutcomeProvider
			res.Error = err.Error()
			if perr != nil && perr.Class == llm.ClassQuotaExhausted {
				// Permanent for the lane, not for the job: the worker delays
				// the job and pauses pulling instead of burning deliveries.
				l.finish(res, job)
				return res, fmt.Errorf("%w: %w: job %s: %w", ErrTransient, ErrQuotaExhausted, job.ID, err)
			}
			if perr != nil && perr.Permanent() {
				break
			}
			l.finish(res, job)
			return res, fmt.Errorf("%w: call provider for job %s: %w", ErrTransient, job.ID, err)
		}
		res.Calls++
		replies++
		a.Latency = resp.Latency
		a.Raw = resp.Text
		a.FinishReason = resp.FinishReason
		a.TokensIn = resp.Usage.InputTokens
		a.TokensOut = resp.Usage.OutputTokens
		a.TokensCached = resp.Usage.CachedInputTokens
		a.Retries = resp.Retries
		a.ProviderStatus = resp.Status
		a.Model = resp.Model
		a.RequestID = resp.RequestID
		res.TokensIn += a.TokensIn
		res.TokensOut += a.TokensOut
		res.TokensCached += a.TokensCached
		res.TransportRetries += len(a.Retries)

		check := validate.Check(job.Schema, resp.Text)
		a.Source = check.Source
		a.Repairs = check.Repairs
		a.Errors = check.Errors
		if check.Value != nil || check.Source != "" {
			if b, err := json.Marshal(check.Value); err == nil {
				a.Value = b
			}
		}
		switch {
		case resp.FinishReason == llm.FinishRefusal || (resp.Refusal != "" && !check.Valid):
			a.Class = OutcomeRefusal
			if resp.Refusal != "" && a.Raw == "" {
				a.Raw = resp.Refusal
			}
		case resp.FinishReason == llm.FinishLength:
			// A cut-off reply is never accepted, even when closing it
			// would validate.
			a.Class = OutcomeTruncated
		case check.Valid:
			a.Valid = true
			a.RepairedLocally = len(check.Repairs) > 0
		default:
			a.Class = string(check.Class)
		}
		if a.Valid {
			res.Attempts = append(res.Attempts, a)
			res.Status = StatusValid
			res.Value = a.Value
			res.Class = ""
			res.Error = "" // earlier attempts' errors stay on their attempts
			res.FirstAttemptValid = n == 1
			res.RepairedLocally = a.RepairedLocally
			break
		}
		if lim.RetryBudget > 0 && res.TransportRetries > lim.RetryBudget {
			res.Attempts = append(res.Attempts, a)
			res.Status = StatusFailed
			res.Class = OutcomeProvider
			res.Error = fmt.Sprintf("transport retry budget %d exceeded (%d retries)", lim.RetryBudget, res.TransportRetries)
			break
		}
		res.Status = StatusInvalid
		res.Class = a.Class
		res.Error = attemptError(&a)
		if replies == lim.MaxAttempts {
			res.Attempts = append(res.Attempts, a)
			break
		}
		truncNote := true
		if a.Class == OutcomeTruncated && lim.TruncationMaxTokens > maxTokens {
			maxTokens = lim.TruncationMaxTokens
			truncNote = false
		}
		a.Feedback = feedback(lim.Feedback, &a, truncNote)
		res.Attempts = append(res.Attempts, a)
		messages = nextMessages(lim.Strategy, base, messages, &a)
	}
	l.finish(res, job)
	return res, nil
}

func (l *Loop) finish(res *Result, job *Job) {
	res.CostUSD = l.cfg.Prices.Cost(job.Model, res.TokensIn, res.TokensOut, res.TokensCached)
}

// nextMessages builds the conversation for the next round.
func nextMessages(strategy Strategy, base, prev []llm.Message, a *Attempt) []llm.Message {
	raw := a.Raw
	if raw == "" {
		raw = "(empty reply)"
	}
	if strategy == StrategyRepair {
		out := append([]llm.Message(nil), base[:len(base)-1]...)
		last := base[len(base)-1]
		return append(out, llm.Message{Role: llm.RoleUser, Content: repairMessage(last.Content, raw, a.Feedback)})
	}
	out := append([]llm.Message(nil), prev...)
	return append(out,
		llm.Message{Role: llm.RoleAssistant, Content: raw},
		llm.Message{Role: llm.RoleUser, Content: a.Feedback},
	)
}

func attemptError(a *Attempt) string {
	switch a.Class {
	case OutcomeTruncated:
		return "reply truncated at the output token limit"
	case OutcomeRefusal:
		return "model refused"
	}
	if len(a.Errors) > 0 {
		msg := a.Errors[0].Message
		if len(a.Errors) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(a.Errors)-1)
		}
		return msg
	}
	return a.Class
}

// estimateTokens is the same rough measure the lane limiter uses: a quarter
// of the request's bytes, plus the output allowance.
func estimateTokens(req *llm.Request) int {
	n := len(req.System) + len(req.Schema)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return (n+3)/4 + req.MaxTokens
}

// recordRequest keeps what the ledger records of a request: the hash of
// the whole request (the messages as sent, system prompt first, as JSON),
// and unless only the hash is kept, the messages after the system prompt
// and the prompt itself, which the ledger stores once for all the attempts
// that sent it.
func (l *Loop) recordRequest(a *Attempt, sys *system, req *llm.Request) {
	rest := []byte("[]")
	if len(req.Messages) > 0 {
		rest, _ = json.Marshal(req.Messages)
	}
	h := sha256.New()
	if sys.msg == nil {
		h.Write(rest)
	} else {
		// The same bytes as json.Marshal of [system, messages...]: its
		// elements are written one after another, comma separated.
		h.Write([]byte{'['})
		h.Write(sys.msg)
		if len(req.Messages) > 0 {
			h.Write([]byte{','})
			h.Write(rest[1:])
		} else {
			h.Write([]byte{']'})
		}
	}
	a.RequestHash = hex.EncodeToString(h.Sum(nil))
	if l.cfg.Record == RecordFull {
		a.Request, a.System = rest, sys.ledger
	}
}
