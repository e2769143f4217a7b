package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// Completer is what the loop needs from a provider client: one call, with
// transport retries already done. *llm.Client satisfies it.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// LoopConfig configures a Loop. The zero value is usable.
type LoopConfig struct {
	// Prices estimates cost; defaults to DefaultPrices.
	Prices Prices
	// Record defaults to RecordFull.
	Record RequestRecord
	// NowFunc is the clock; defaults to time.Now.
	NowFunc func() time.Time
}

// Loop is the synchronous driver of the repair step: it sends each request
// the step asks for, feeds the reply back, and repeats until the job is
// final (or the provider keeps failing). It keeps the system prompts of
// the jobs it runs, shared by the jobs of a batch.
type Loop struct {
	client Completer
	cfg    LoopConfig
	step   repair.Config

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

// system is a system prompt as the step takes it, with its text.
type system struct {
	text   string
	prompt *repair.Prompt
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
		text := systemPrompt(job)
		p := &system{text: text, prompt: repair.NewPrompt(text)}
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
	l := &Loop{client: client, cfg: cfg}
	l.step = repair.Config{Prices: cfg.Prices, Record: cfg.Record, NowFunc: cfg.NowFunc,
		SystemFunc: func(job *Job) *repair.Prompt { return l.systemPrompt(job).prompt }}
	return l
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
	step, err := repair.Start(job, prev, l.step)
	if err != nil {
		return step.Result(), err
	}
	for act := step.Next(); !act.Done(); {
		if act.Err != nil {
			return step.Result(), act.Err
		}
		var release func(*llm.Response, error)
		if job.GateFunc != nil {
			rel, err := job.GateFunc(ctx, act.Request)
			if errors.Is(err, ErrOverBudget) {
				step.Stop(StatusOverBudget, OutcomeBudget, err.Error())
				break
			}
			if errors.Is(err, ErrCancelled) {
				step.Stop(StatusCancelled, "", err.Error())
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
			if job.SentFunc != nil {
				job.SentFunc(step.Outstanding(at))
			}
		})
		resp, err := l.client.Complete(callCtx, *act.Request)
		if !sent.IsZero() {
			started = sent
		}
		if release != nil {
			release(resp, err)
		}
		if le := (*llm.Error)(nil); err != nil && ctx.Err() != nil && errors.As(err, &le) && le.NotSent {
			// Stopped while it waited for its lane: the provider never
			// saw it, so it is no call of the job (a shutdown recorded
			// such waits as interrupted calls). The job runs again.
			return step.Result(), fmt.Errorf("%w: %w", ErrTransient, err)
		}
		var a *repair.Attempt
		a, act = step.Feed(resp, err, started)
		if job.AttemptFunc != nil && a != nil {
			job.AttemptFunc(a)
		}
	}
	return step.Result(), nil
}
