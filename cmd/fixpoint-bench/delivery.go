package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// Figure 7: the cost of a valid row by delivery. One messy batch run three
// ways on the same seed: realtime without prompt caching, realtime with it,
// and batch delivery (provider batches at half the price, repairs in waves)
// with it. The model is Anthropic's Claude Sonnet 4.5 at its list prices
// (the price table): Anthropic caches only a prompt marked cacheable, so
// "without caching" is a real choice there (OpenAI caches long prompts
// whatever the request says). Every job carries the same system prompt of
// about 1,500 tokens (rules plus the schema): the prefix the cache serves.
const (
	deliveryModel = "claude-sonnet-4-5"
	// deliveryTargetBatch bounds batch delivery with caching over realtime
	// without, and deliveryTargetCache caching alone.
	deliveryTargetBatch = 0.50
	deliveryTargetCache = 0.80
	// deliveryValidSlack is how far (in points) batch delivery's valid
	// rate may fall below realtime's.
	deliveryValidSlack = 0.01
	// deliveryBatchDelay is how long the simulator's provider batches take
	// (real ones take minutes to hours; the figure is about cost).
	deliveryBatchDelay = 2 * time.Second
)

// deliverySystem is the figure's system prompt: about 1,500 tokens (6,000
// bytes) of the instructions a real extraction job carries.
var deliverySystem = func() string {
	rules := []string{
		"You extract structured fields from customer support tickets for a nightly reporting pipeline.",
		"Answer with one JSON object only: no prose before or after it, no code fences, no comments.",
		"Use exactly the property names of the schema; never rename, abbreviate or translate a key.",
		"Every enum value must be one of the listed values, spelled and cased exactly as listed.",
		"When the ticket does not say, choose the most conservative allowed value rather than inventing one.",
		"Numbers are plain JSON numbers without units, thousands separators or quotes.",
		"Keep free-text fields short: one sentence, in the language of the ticket, without line breaks.",
		"Do not include personal data that the schema does not ask for: no emails, phone numbers or addresses.",
	}
	var b strings.Builder
	for i := 0; b.Len() < 6000; i++ {
		fmt.Fprintf(&b, "Rule %d. %s\n", i+1, rules[i%len(rules)])
	}
	return b.String()
}()

// deliveryRun is one way of running the figure's batch.
type deliveryRun struct {
	name     string
	delivery string
	cache    bool
	sum      store.BatchSummary
	attempts int64 // attempt rows: provider requests, realtime or in a batch
	cached   float64
	elapsed  time.Duration
	err      error
}

func (r *deliveryRun) costPerValid() float64 { return r.sum.CostPerValidJob }

// figureDelivery runs the three ways in turn.
func (e *benchEnv) figureDelivery(ctx context.Context, c benchConfig) []deliveryRun {
	runs := []deliveryRun{
		{name: "realtime, no prompt cache", delivery: queue.DeliveryRealtime},
		{name: "realtime, prompt cache", delivery: queue.DeliveryRealtime, cache: true},
		{name: "batch delivery, prompt cache", delivery: queue.DeliveryBatch, cache: true},
	}
	for i := range runs {
		r := &runs[i]
		e.logf("7/7 delivery: %s, %d messy jobs", r.name, c.deliveryJobs)
		r.err = e.delivery(ctx, c, r)
		if r.err == nil {
			e.logf("  valid %s, $%.6f a valid row, took %s", pct(r.sum.ValidRate), r.costPerValid(), r.elapsed.Round(time.Millisecond))
		}
	}
	return runs
}

func (e *benchEnv) delivery(ctx context.Context, c benchConfig, r *deliveryRun) error {
	res, err := e.simRun(ctx, c, simBatch{
		kind: "delivery-" + strings.ReplaceAll(strings.ReplaceAll(r.name, ", ", "-"), " ", "-"), preset: "messy",
		jobs: c.deliveryJobs, dataset: tickets.Dataset(c.deliveryJobs, 1), batchDelay: deliveryBatchDelay,
		enqueue: enqueue.Config{Schema: []byte(tickets.Schema), Template: tickets.Template, System: deliverySystem,
			Provider: llm.ProviderAnthropic, Model: deliveryModel, Mode: fixpoint.ModePrompt, Delivery: r.delivery, PromptCache: r.cache},
		wave: wave.Config{Collect: 500 * time.Millisecond, PollMin: 200 * time.Millisecond, PollMax: time.Second,
			Idle: 100 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	r.elapsed, r.sum, r.attempts = res.elapsed, res.sum, res.fig.Calls
	if r.sum.TokensIn > 0 {
		r.cached = float64(r.sum.TokensCached) / float64(r.sum.TokensIn)
	}
	if res.stats.Batch.Created == 0 && r.delivery == queue.DeliveryBatch {
		return fmt.Errorf("batch delivery made no provider batch")
	}
	return nil
}

// deliveryRows turns the runs into the figures table's rows, with the
// ratios to the first run.
func deliveryRows(runs []deliveryRun) []benchRow {
	base := runs[0]
	ratio := func(r deliveryRun) (float64, bool) {
		if base.err != nil || r.err != nil || base.costPerValid() == 0 {
			return 0, false
		}
		return r.costPerValid() / base.costPerValid(), true
	}
	var rows []benchRow
	if rc, ok := ratio(runs[1]); ok {
		rows = append(rows, benchRow{no: "7a", name: "cost a valid row, realtime with prompt cache / without (messy, 1,500-token system prompt)",
			measured: fmt.Sprintf("%.2fx", rc), target: fmt.Sprintf("<= %.2fx", deliveryTargetCache), verdict: verdict(rc <= deliveryTargetCache)})
	} else {
		rows = append(rows, benchRow{no: "7a", name: "cost a valid row, realtime with prompt cache / without", measured: "error", target: "", verdict: "FAIL"})
	}
	if rb, ok := ratio(runs[2]); ok {
		drop := base.sum.ValidRate - runs[2].sum.ValidRate
		ok := rb <= deliveryTargetBatch && drop <= deliveryValidSlack
		rows = append(rows, benchRow{no: "7b", name: "cost a valid row, batch delivery with prompt cache / realtime without",
			measured: fmt.Sprintf("%.2fx, valid rate %s vs %s", rb, pct(runs[2].sum.ValidRate), pct(base.sum.ValidRate)),
			target:   fmt.Sprintf("<= %.2fx, valid rate >= %s", deliveryTargetBatch, pct(base.sum.ValidRate-deliveryValidSlack)), verdict: verdict(ok)})
	} else {
		rows = append(rows, benchRow{no: "7b", name: "cost a valid row, batch delivery with prompt cache / realtime without", measured: "error", target: "", verdict: "FAIL"})
	}
	return rows
}

func writeDelivery(w io.Writer, runs []deliveryRun) {
	fmt.Fprintln(w, "| delivery | jobs | valid rate | mean attempts | calls | prompt tokens cached | cost a valid row | ratio | took |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %s | | | | | | | |\n", r.name, oneLine(r.err))
			continue
		}
		ratio := "-"
		if runs[0].err == nil && runs[0].costPerValid() > 0 {
			ratio = fmt.Sprintf("%.2fx", r.costPerValid()/runs[0].costPerValid())
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.2f | %s | %s | $%.6f | %s | %s |\n", r.name, r.sum.Jobs, pct(r.sum.ValidRate), r.sum.MeanAttempts,
			num(float64(r.attempts)), pct(r.cached), r.costPerValid(), ratio, r.elapsed.Round(time.Millisecond))
	}
}
