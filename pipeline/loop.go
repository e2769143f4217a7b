package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// Completer is what the loop needs from a provider client: one call, with
// transport retries already done. *llm.Client satisfies it.
type Completer interface {
	Complete(ctx context.Context, req fixpoint.Request) (*fixpoint.Response, error)
}

// LoopHooks are a job's calls back into its driver: the worker holds a
// capped batch's budget for each call, stops the jobs of a cancelled batch,
// and keeps each call and each paid reply in its journal. Each may be nil.
type LoopHooks struct {
	// GateFunc is asked, when set, before each provider call: it returns a release func the loop
	// calls once the call is over, with the attempt recorded for it (nil
	// for a call never sent), or an error: one matching
	// fixpoint.ErrOverBudget ends the job over_budget without the call (repair.Step.Stop),
	// one matching fixpoint.ErrCancelled ends it cancelled; another (fixpoint.ErrTransient)
	// stops the loop, to run the job again later. The worker uses it to
	// stop the jobs of a cancelled batch and to hold a capped batch's
	// budget for each call (set to what the attempt cost once it ended).
	GateFunc func(ctx context.Context, req *fixpoint.Request) (release func(*fixpoint.Attempt), err error)
	// AttemptFunc, when set, is called with each attempt Feed records, as soon as it is recorded:
	// the worker keeps each paid reply in its journal until the job's
	// rows are written.
	AttemptFunc func(a *fixpoint.Attempt)
	// SentFunc, when set, is called as each request goes out (after GateFunc), with what
	// repair.Step.Outstanding says of it: the worker keeps each call in its
	// journal until AttemptFunc has its outcome, so a call in flight when
	// the worker is killed still leaves a row. A document job has several
	// calls in flight, called from their own goroutines; the journal pairs
	// each with its outcome by the request's hash, not by attempt No (a
	// Machine numbers attempts in the order they are fed).
	SentFunc func(a *fixpoint.Attempt)
}

// LoopConfig configures a Loop. The zero value is usable.
type LoopConfig struct {
	// Prices estimates cost; defaults to DefaultPrices.
	Prices repair.Prices
	// Record defaults to RecordFull.
	Record repair.RequestRecord
	// NowFunc is the clock; defaults to time.Now.
	NowFunc func() time.Time
	// Tracer, when set, makes a span of each provider call ("chat
	// {model}", GenAI semantic conventions), a child of the span in the
	// call's context. Nil traces nothing.
	Tracer trace.Tracer
}

// Loop is the synchronous driver of the repair step: it sends each request
// the step asks for, feeds the reply back, and repeats until the job is
// final (or the provider keeps failing). It keeps the system prompts of
// the jobs it runs, shared by the jobs of a batch.
type Loop struct {
	client Completer
	cfg    LoopConfig
	step   repair.Config
	tracer trace.Tracer
	target callTarget // the provider and server its call spans name

	// prompts caches system prompts by mode, user system prompt and
	// schema: the jobs of a batch share them, and building one parses the
	// schema twice.
	prompts     sync.Map // key -> *system
	promptCount atomic.Int64
	// promptBuilds makes the jobs that miss the cache together (all of
	// them, when a worker starts on a full queue) share one build, and
	// count once against promptCacheMax.
	promptBuilds singleflight.Group
	// startDocument, when set, replaces repair.StartDocument: tests run
	// the driver on a fake Machine.
	startDocument func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error)
}

// system is a system prompt as the step takes it, with its text.
type system struct {
	text   string
	prompt *fixpoint.Prompt
}

// promptCacheMax bounds the system prompts a Loop keeps.
const promptCacheMax = 1024

func (l *Loop) systemPrompt(job *repair.Job) *system {
	key := string(job.Mode) + "\x00" + job.System + "\x00" + string(job.SchemaRaw)
	if p, ok := l.prompts.Load(key); ok {
		return p.(*system)
	}
	p, _, _ := l.promptBuilds.Do(key, func() (any, error) {
		if p, ok := l.prompts.Load(key); ok {
			return p, nil // stored while this call waited for its turn
		}
		text := repair.SystemPrompt(job)
		p := &system{text: text, prompt: fixpoint.NewPrompt(text)}
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
		cfg.Prices = repair.DefaultPrices()
	}
	if cfg.Record == "" {
		cfg.Record = repair.RecordFull
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	l := &Loop{client: client, cfg: cfg, tracer: tracerOr(cfg.Tracer), target: targetOf("", client)}
	l.step = repair.Config{Prices: cfg.Prices, Record: cfg.Record, NowFunc: cfg.NowFunc,
		SystemFunc: func(job *repair.Job) *fixpoint.Prompt { return l.systemPrompt(job).prompt }}
	return l
}

// Run runs job to a final result. The result is always returned, with every
// attempt made. The error is non-nil only when the job should be run again
// later rather than recorded as final: it then matches ErrTransient (a
// provider still failing after its transport retries, or ctx ended), or
// ErrBadJob when the job itself is malformed.
func (l *Loop) Run(ctx context.Context, job *repair.Job) (*fixpoint.Result, error) {
	return l.Resume(ctx, job, nil, LoopHooks{})
}

// Resume continues a job whose earlier Run or Resume returned ErrTransient
// (a provider still failing after its transport retries): the attempts in
// prev are kept, paid tokens included, and the conversation goes on from the
// last reply. Attempts that got no reply do not count against MaxAttempts.
// With a nil prev it is Run.
//
// A job under a document strategy (parallel, sequential, agent) runs
// through its repair.Machine, several calls at once (resumeDocument);
// each hook is then called for each call, and SentFunc and GateFunc from
// the calls' own goroutines.
func (l *Loop) Resume(ctx context.Context, job *repair.Job, prev *fixpoint.Result, hooks LoopHooks) (*fixpoint.Result, error) {
	if job.Limits.Strategy.Document() {
		return l.resumeDocument(ctx, job, prev, hooks)
	}
	step, err := repair.Start(job, prev, l.step)
	if err != nil {
		return step.Result(), err
	}
	for act := step.Next(); !act.Done(); {
		if act.Err != nil {
			return step.Result(), act.Err
		}
		var release func(*fixpoint.Attempt)
		if hooks.GateFunc != nil {
			rel, err := hooks.GateFunc(ctx, act.Request)
			if errors.Is(err, fixpoint.ErrOverBudget) {
				step.Stop(fixpoint.StatusOverBudget, fixpoint.OutcomeBudget, err.Error())
				break
			}
			if errors.Is(err, fixpoint.ErrCancelled) {
				step.Stop(fixpoint.StatusCancelled, "", err.Error())
				break
			}
			if err != nil {
				return step.Result(), err
			}
			release = rel
		}
		started := l.cfg.NowFunc()
		// When it goes out, after the wait for its lane: a call still
		// waiting was never sent, and one cut off in flight started then
		// (its row said when its job was pulled). The journal writes it
		// down then.
		var sent time.Time
		callCtx := llm.WithSendHook(ctx, func(at time.Time) {
			sent = at
			if hooks.SentFunc != nil {
				hooks.SentFunc(step.Outstanding(at))
			}
		})
		callCtx, span := l.startCall(callCtx, act.Request)
		resp, err := l.client.Complete(callCtx, *act.Request)
		if !sent.IsZero() {
			started = sent
		}
		if le := (*fixpoint.ProviderError)(nil); err != nil && ctx.Err() != nil && errors.As(err, &le) && le.NotSent {
			// Stopped while it waited for its lane: the provider never
			// saw it, so it is no call of the job (a shutdown recorded
			// such waits as interrupted calls). The job runs again.
			if release != nil {
				release(nil)
			}
			endCall(span, resp, err, nil)
			return step.Result(), fmt.Errorf("%w: %w", fixpoint.ErrTransient, err)
		}
		var a *fixpoint.Attempt
		a, act = step.Feed(resp, err, started)
		endCall(span, resp, err, a)
		if release != nil {
			release(a)
		}
		if hooks.AttemptFunc != nil && a != nil {
			hooks.AttemptFunc(a)
		}
	}
	return step.Result(), nil
}
