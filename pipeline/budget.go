package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// capEntry is a batch's spend cap as last read.
type capEntry struct {
	capped  bool // tokens, dollars or both
	dollars bool // a cost cap: the model must have a price
	read    time.Time
}

// capped returns the batch's spend cap as last read.
func (w *Worker) capped(ctx context.Context, batch string) (capEntry, error) {
	if v, ok := w.caps.Load(batch); ok {
		if e := v.(*capEntry); time.Since(e.read) < controlTTL {
			return *e, nil
		}
	}
	c, err := w.ledger.BatchCap(ctx, batch)
	if err != nil {
		return capEntry{}, err
	}
	e := capEntry{capped: c.Capped(), dollars: c.MaxCostUSD != nil, read: time.Now()}
	w.caps.Store(batch, &e)
	return e, nil
}

// callGate is what LoopHooks.GateFunc is.
type callGate func(context.Context, *fixpoint.Request) (release func(*fixpoint.Attempt), err error)

// gate is asked before each provider call of the job: a delivery that no
// longer owns its job ends without the call, and a capped batch's budget
// is held for the call.
func (w *Worker) gate(d *delivery, first capEntry, own *ownership) callGate {
	var budget callGate
	if first.capped {
		budget = w.budgetGate(d, first.dollars, own)
	}
	return func(ctx context.Context, req *fixpoint.Request) (func(*fixpoint.Attempt), error) {
		if err := own.check(ctx); err != nil {
			return nil, err
		}
		if budget == nil {
			return nil, nil
		}
		return budget(ctx, req)
	}
}

// overBudget is the store's over-budget error as an ErrOverBudget: its
// message once ("batch spend cap reached: batch k1: batch spend cap
// reached: ..." before).
type overBudget struct{ err error }

func (e overBudget) Error() string { return e.err.Error() }

func (e overBudget) Unwrap() error { return e.err }

func (overBudget) Is(target error) bool { return target == fixpoint.ErrOverBudget }

// unpricedCapError ends a job of a cost-capped batch whose model the worker
// has no price for; it is an ErrOverBudget, with its own message.
type unpricedCapError struct{ model string }

func (e unpricedCapError) Error() string {
	return fmt.Sprintf("the batch's cost cap cannot be enforced: this worker has no price for model %q (give it one with --prices)", e.model)
}

func (unpricedCapError) Is(target error) bool { return target == fixpoint.ErrOverBudget }

// SpendHoldTTLDefault is WorkerConfig.SpendHoldTTL's default. A worker
// renews its holds every third of it until their calls' rows are written;
// a call finding the budget held only by holds waits longer than it (by
// budgetHeldSlack), so the holds of a worker killed mid-call expire within
// the wait and the call goes ahead instead of handing its job back (each
// hand-back spends one of the job's deliveries).
const (
	SpendHoldTTLDefault = time.Minute
	budgetHeldSlack     = 30 * time.Second
	budgetHeldPause     = 100 * time.Millisecond
)

// budgetGate holds a capped batch's budget for each call of the job: the
// call's estimate (prompt bytes / 4 plus its output allowance, priced) is
// reserved in the ledger before it is sent, set to what the attempt cost
// once it ended, and kept until the delivery's rows are written: the
// transaction that writes a call's row charges the batch's counter and
// drops its hold (store.Hold), so a call's spend is always held or
// counted, and every worker of the cluster together stays under the cap.
// When only the holds of other calls are in the way, the call waits for
// them.
//
// A cost cap is enforced only with a price for the call's model (the
// job's, or a parallel job's merge model): without one every call would
// count $0 against it, so no call is made and the job ends over_budget,
// its reason naming the model (the worker's --prices adds it; enqueue
// requeue runs the jobs again).
func (w *Worker) budgetGate(d *delivery, dollars bool, own *ownership) callGate {
	env, key := d.env, journalKey(d.env.JobID, d.delivered)
	prices := w.prices()
	return func(ctx context.Context, req *fixpoint.Request) (func(*fixpoint.Attempt), error) {
		model := cmp.Or(req.Model, env.Model)
		if _, priced := prices.Lookup(model); dollars && !priced {
			return nil, unpricedCapError{model}
		}
		out := req.MaxTokens
		in := repair.EstimateTokens(req) - out
		// Held at the realtime price whatever the delivery: a flex call
		// may fall back to the default tier (llm.Config.FlexFallbackAfter)
		// and cost that; it is settled at what its attempt cost.
		cost := prices.CostOn(model, fixpoint.PriceBasisRealtime, in, out, 0, 0)
		hold, err := w.reserve(ctx, d, int64(in+out), cost, own)
		if err != nil || hold.ID == 0 {
			return nil, err
		}
		w.holds.add(key, hold.ID)
		return func(a *fixpoint.Attempt) {
			var tokens int64
			var spent float64
			if a != nil {
				tokens, spent = int64(a.TokensIn+a.TokensOut), a.CostUSD
			}
			if tokens == 0 && spent == 0 {
				w.holds.drop(key, hold.ID) // no reply, nothing to hold
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := w.ledger.SettleHold(sctx, hold, tokens, spent); err != nil {
				d.log.WarnContext(ctx, "worker: set the call's hold to what it cost (it holds the estimate until the call is written)",
					slog.String("error", err.Error()))
			}
		}, nil
	}
}

// reserve holds tokens and cost of the batch's budget for one call. When
// only holds are in the way it waits for them, longer than a hold lives
// (so those of a dead worker expire meanwhile), while the delivery owns
// its job; a ledger that cannot be reached is waited out as every ledger
// read of the job is (retryLedger).
func (w *Worker) reserve(ctx context.Context, d *delivery, tokens int64, cost float64, own *ownership) (store.Hold, error) {
	ttl := w.cfg.SpendHoldTTL
	deadline := time.Now().Add(ttl + budgetHeldSlack)
	var hold store.Hold
	err := w.retryLedger(ctx, d.log, func() error {
		for {
			var err error
			hold, err = w.ledger.Reserve(ctx, d.env.Batch, tokens, cost, ttl)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, store.ErrOverBudget):
				return permanent(overBudget{err}) // the store's message says it already
			case !errors.Is(err, store.ErrBudgetHeld):
				return err // the ledger: waited out
			case time.Now().After(deadline):
				return permanent(fmt.Errorf("%w: hold the batch's budget: %w", fixpoint.ErrTransient, err))
			}
			if err := own.check(ctx); err != nil {
				return permanent(err) // cancelled or requeued while it waited for the budget
			}
			if !w.holdFor(ctx, budgetHeldPause) {
				return permanent(fmt.Errorf("%w: stopping while waiting for the batch's budget", fixpoint.ErrTransient))
			}
		}
	})
	if err != nil && !errors.Is(err, fixpoint.ErrOverBudget) && !errors.Is(err, fixpoint.ErrCancelled) && !errors.Is(err, fixpoint.ErrTransient) {
		err = fmt.Errorf("%w: hold the batch's budget: %w", fixpoint.ErrTransient, err) // stopping with the ledger down
	}
	return hold, err
}

// holdBook keeps the worker's holds on capped batches' budgets by
// delivery (journalKey), from before each call is sent until the
// delivery's rows are written (they go with the rows: store.Result.Holds,
// store.Interruption.Holds) or the delivery ends otherwise; and renews
// them all, in one statement, every third of their time to live. A hold
// the worker no longer renews (it stopped, or died) expires.
type holdBook struct {
	mu         sync.Mutex
	byDelivery map[string][]int64
}

func newHoldBook() *holdBook { return &holdBook{byDelivery: map[string][]int64{}} }

func (b *holdBook) add(key string, id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byDelivery[key] = append(b.byDelivery[key], id)
}

// drop forgets a hold settled to nothing (its call got no reply).
func (b *holdBook) drop(key string, id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := slices.DeleteFunc(b.byDelivery[key], func(x int64) bool { return x == id })
	if len(ids) == 0 {
		delete(b.byDelivery, key)
	} else {
		b.byDelivery[key] = ids
	}
}

// of returns the delivery's holds, for the write of its rows.
func (b *holdBook) of(key string) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.byDelivery[key])
}

// end forgets the delivery's holds: its rows are written (which dropped
// them), or kept on disk, or it ended without them (they expire).
func (b *holdBook) end(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byDelivery, key)
}

func (b *holdBook) all() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []int64
	for _, d := range b.byDelivery {
		ids = append(ids, d...)
	}
	return ids
}

// renewHolds renews every hold in the book every third of
// SpendHoldTTL until stop is closed.
func (w *Worker) renewHolds(stop <-chan struct{}) {
	t := time.NewTicker(w.cfg.SpendHoldTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ids := w.holds.all()
			if len(ids) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := w.ledger.RenewHolds(ctx, ids, w.cfg.SpendHoldTTL); err != nil {
				w.log.Warn("worker: renew the holds on capped batches' budgets (they expire on their own)",
					slog.Int("holds", len(ids)), slog.String("error", err.Error()))
			}
			cancel()
		}
	}
}
