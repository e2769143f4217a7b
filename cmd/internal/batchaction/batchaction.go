// Package batchaction is what the commands that act on a batch share
// around package enqueue's actions (Requeue, Cancel, SetCap): reading a
// cap or a status list the operator typed, and saying what an action did.
// enqueue requeue, cancel and cap print these texts; report serve's
// dashboard shows the same ones.
package batchaction

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// MaxCostUSD bounds a cost cap: batches.max_cost_usd is numeric(18,8).
const MaxCostUSD = 1e10

// ParseCost reads a cost cap given as name: a non-negative number of
// dollars, or none ("" too: no cap).
func ParseCost(name, s string) (*float64, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	// NaN compares false with every bound, so it is refused by name; the
	// ledger holds a cap below 10^10 dollars (numeric(18,8)).
	if err != nil || math.IsNaN(v) || v < 0 || v >= MaxCostUSD {
		return nil, fmt.Errorf("%s %q: want a number of dollars from 0 to %.0f, or none", name, s, MaxCostUSD-1)
	}
	return &v, nil
}

// ParseTokens reads a token cap given as name: a non-negative integer, or
// none ("" too: no cap).
func ParseTokens(name, s string) (*int64, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return nil, fmt.Errorf("%s %q: want a non-negative number of tokens, or none", name, s)
	}
	return &v, nil
}

// CapNames name the two caps in ParseCost's and ParseTokens's errors: the
// flags, or a form's fields.
type CapNames struct{ Cost, Tokens string }

// NewCap is cur with the caps given (empty: unchanged; none: removed).
func NewCap(cur store.Cap, cost, tokens string, names CapNames) (store.Cap, error) {
	next := cur
	var err error
	if cost != "" {
		if next.MaxCostUSD, err = ParseCost(names.Cost, cost); err != nil {
			return next, err
		}
	}
	if tokens != "" {
		if next.MaxTotalTokens, err = ParseTokens(names.Tokens, tokens); err != nil {
			return next, err
		}
	}
	return next, nil
}

// ParseStatuses reads a list of final statuses, comma-separated, given as
// name. An empty list is an error (it would mean the default statuses, a
// different request).
func ParseStatuses(name, list string) ([]fixpoint.Status, error) {
	var statuses []fixpoint.Status
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			statuses = append(statuses, fixpoint.Status(s))
		}
	}
	if len(statuses) == 0 {
		return nil, fmt.Errorf("%s %q names no status: want final statuses, comma-separated (default %s)", name, list, JoinStatuses(enqueue.RequeueStatusesDefault))
	}
	for _, s := range statuses {
		if !s.Final() {
			return nil, fmt.Errorf("%s %q: want final statuses: valid, invalid, failed, rejected, dead, cancelled, over_budget", name, s)
		}
	}
	return statuses, nil
}

// JoinStatuses is statuses comma-separated.
func JoinStatuses(statuses []fixpoint.Status) string {
	parts := make([]string, len(statuses))
	for i, st := range statuses {
		parts[i] = string(st)
	}
	return strings.Join(parts, ",")
}

// WriteRequeued says what a requeue did, or would do; its warnings on
// lines of their own starting "warning: ".
func WriteRequeued(w io.Writer, cfg enqueue.RequeueConfig, rep enqueue.RequeueReport) {
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rep.Jobs)) {
		total += rep.Jobs[k]
		parts = append(parts, fmt.Sprintf("%d %s", rep.Jobs[k], k))
	}
	if total == 0 {
		statuses := cfg.Statuses
		if len(statuses) == 0 {
			statuses = enqueue.RequeueStatusesDefault
		}
		fmt.Fprintf(w, "batch %s: no job matched (statuses %s%s); nothing requeued\n", cfg.Batch, JoinStatuses(statuses), classNote(cfg.Class))
		if rep.Published > 0 {
			fmt.Fprintf(w, "published %s an earlier requeue had left unpublished\n", cli.Plural(rep.Published, "job"))
		}
		return
	}
	what := "requeued"
	if cfg.DryRun {
		what = "would requeue"
	}
	s := rep.Settings
	fmt.Fprintf(w, "batch %s: %s %s (%s) as run %d: %s/%s, %s, %s strategy",
		cfg.Batch, what, cli.Plural(total, "job"), strings.Join(parts, ", "), rep.Run, s.Provider, s.Model, cli.Plural(s.Limits.MaxAttempts, "attempt"), s.Limits.Strategy)
	if !cfg.DryRun {
		fmt.Fprintf(w, "; %d published", rep.Published)
	}
	fmt.Fprintln(w)
	for _, warning := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

func classNote(class string) string {
	if class == "" {
		return ""
	}
	return ", class " + class
}

// WriteSpend says a batch's cap and what it spent.
func WriteSpend(w io.Writer, batch string, sp store.Spend) {
	fmt.Fprintf(w, "batch %s: cap %s; spent %s, $%.6f; %s, $%.6f held by calls in flight\n",
		batch, CapText(sp.Cap), cli.Plural(sp.Tokens, "token"), sp.CostUSD, cli.Plural(sp.HeldTokens, "token"), sp.HeldCostUSD)
}

// CapText is a cap as the commands print it: "$25 and 5000 tokens", or
// "none".
func CapText(c store.Cap) string {
	if !c.Capped() {
		return "none"
	}
	var parts []string
	if c.MaxCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%g", *c.MaxCostUSD))
	}
	if c.MaxTotalTokens != nil {
		parts = append(parts, cli.Plural(*c.MaxTotalTokens, "token"))
	}
	return strings.Join(parts, " and ")
}

// UnpricedWarning is the warning a dollar cap on model deserves when
// fixpoint's price table has no price for it ("" when it has one): only
// workers given its price can enforce the cap. flag names the cap's flag.
func UnpricedWarning(model, flag string) string {
	if _, priced := repair.DefaultPrices().Lookup(model); priced {
		return ""
	}
	return fmt.Sprintf("%s has no price in fixpoint's table, so a worker can enforce %s only when its --prices lists it; a worker without one ends the batch's jobs over_budget without calling the model", model, flag)
}

// BatchReader is what CapWarnings reads. *store.Store satisfies it.
type BatchReader interface {
	Batch(ctx context.Context, name string) (*store.Batch, error)
}

// CancelLedger is what WriteCancelled reads. *store.Store satisfies it.
type CancelLedger interface {
	BatchReader
	Progress(ctx context.Context, batch string) (store.Progress, error)
}

var _ CancelLedger = (*store.Store)(nil)

// CapWarnings are the warnings after a batch's cap was set to next and
// it has spent sp: a dollar cap on a model without a price, a cap already
// reached. flag names the dollar cap's flag.
func CapWarnings(ctx context.Context, st BatchReader, batch string, next store.Cap, sp store.Spend, flag string) []string {
	var ws []string
	if next.MaxCostUSD != nil {
		if b, err := st.Batch(ctx, batch); err == nil {
			var s struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(b.Settings, &s) == nil && s.Model != "" {
				if w := UnpricedWarning(s.Model, flag); w != "" {
					ws = append(ws, w)
				}
			}
		}
	}
	if (sp.MaxCostUSD != nil && sp.CostUSD >= *sp.MaxCostUSD) || (sp.MaxTotalTokens != nil && sp.Tokens >= *sp.MaxTotalTokens) {
		ws = append(ws, fmt.Sprintf("batch %s has already spent what the new cap allows: its jobs not final yet end over_budget without another call", batch))
	}
	return ws
}

// WriteCancelled says what a cancel of a batch did: n jobs ended, and,
// when the batch was being recorded (before is the batch as it was before
// the cancel), what became of its rows: the rows a stopped enqueue never
// recorded are given up, and a live one records rows that will run.
func WriteCancelled(ctx context.Context, w io.Writer, st CancelLedger, before *store.Batch, batch string, n int) {
	fmt.Fprintf(w, "batch %s: cancelled %s not yet final\n", batch, cli.Plural(n, "job"))
	if before == nil || before.Recording == nil {
		return
	}
	after, err := st.Batch(ctx, batch)
	if p, perr := st.Progress(ctx, batch); err == nil && perr == nil && (after.Recording == nil || after.Recording.Runs < before.Recording.Runs) {
		fmt.Fprintf(w, "batch %s: the rows its stopped enqueue never recorded are given up: the batch ends with the %s it holds\n", batch, cli.Plural(p.Total, "job"))
	}
	if err == nil && after.Recording != nil && after.Recording.Live {
		fmt.Fprintf(w, "batch %s: an enqueue is still recording rows into it; they will run (a cancel ends the jobs it found)\n", batch)
	}
}
