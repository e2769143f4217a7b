package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/invoices"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Figures 8 and 9: cheaper repairs. 8 runs one messy batch with coercion off
// and on (safe): calls and cost per valid job. 9 runs an invoice batch (30
// to 60 line items) with the repair strategy and the patch strategy: output
// tokens per repaired job. Both on gpt-4o-mini's list prices.
const (
	repairsModel = "gpt-4o-mini"
	// coerceTargetCalls bounds safe coercion's calls per valid job over
	// none's; its valid rate must be no lower.
	coerceTargetCalls = 0.80
	// patchTargetTokens bounds patch's output tokens per repaired job over
	// repair's, at a valid rate at most patchValidSlack lower.
	patchTargetTokens = 0.40
	patchValidSlack   = 0.01
)

// repairRun is one run of figure 8 or 9.
type repairRun struct {
	name    string
	sum     store.BatchSummary
	fig     store.RepairFigures
	elapsed time.Duration
	err     error
}

func (r *repairRun) callsPerValid() float64 {
	if r.sum.Valid == 0 {
		return 0
	}
	return float64(r.fig.Calls) / float64(r.sum.Valid)
}

// reasksPerValid counts the calls after each job's first, a valid job: what
// a local repair can save (the first call is made whatever happens).
func (r *repairRun) reasksPerValid() float64 {
	if r.sum.Valid == 0 {
		return 0
	}
	return float64(r.fig.Calls-(r.sum.Jobs-r.sum.Rejected)) / float64(r.sum.Valid)
}

func (r *repairRun) tokensPerRepaired() float64 {
	if r.fig.RepairedJobs == 0 {
		return 0
	}
	return float64(r.fig.RepairTokensOut) / float64(r.fig.RepairedJobs)
}

// repairRun runs one batch of figure 8 or 9 on gpt-4o-mini's prices.
func (e *benchEnv) repairRun(ctx context.Context, c benchConfig, kind, preset, schema, template, dataset string, jobs int,
	limits fixpoint.Limits) (r repairRun) {
	res, err := e.simRun(ctx, c, simBatch{kind: kind, preset: preset, jobs: jobs, dataset: dataset,
		enqueue: enqueue.Config{Schema: []byte(schema), Template: template, Provider: llm.ProviderOpenAI, Model: repairsModel,
			Mode: fixpoint.ModePrompt, Limits: limits, MaxTokens: 8192}})
	r.sum, r.fig, r.elapsed, r.err = res.sum, res.fig, res.elapsed, err
	return r
}

// figureCoerce runs figure 8: the tickets (messy by default) with coercion
// none, safe and all (all is shown, not a target).
func (e *benchEnv) figureCoerce(ctx context.Context, c benchConfig) []repairRun {
	var out []repairRun
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		e.logf("8/9 coercion %s: %d tickets, %s preset", mode, c.coerceJobs, c.coercePreset)
		r := e.repairRun(ctx, c, "coerce-"+string(mode), c.coercePreset, tickets.Schema, tickets.Template,
			tickets.Dataset(c.coerceJobs, 1), c.coerceJobs, fixpoint.Limits{Coerce: mode})
		r.name = "--coerce " + string(mode)
		if r.err == nil {
			e.logf("  valid %s, %.2f calls a valid job", pct(r.sum.ValidRate), r.callsPerValid())
		}
		out = append(out, r)
	}
	return out
}

// figurePatch runs figure 9: the invoices with the repair strategy, then patch.
func (e *benchEnv) figurePatch(ctx context.Context, c benchConfig) []repairRun {
	var out []repairRun
	for _, s := range []fixpoint.Strategy{fixpoint.StrategyRepair, fixpoint.StrategyPatch} {
		e.logf("9/9 strategy %s: %d invoices of 30 to 60 lines, %s preset", s, c.patchJobs, c.patchPreset)
		r := e.repairRun(ctx, c, "patch-"+string(s), c.patchPreset, invoices.Schema, invoices.Template,
			invoices.Dataset(c.patchJobs, 1), c.patchJobs, fixpoint.Limits{Strategy: s})
		r.name = "--strategy " + string(s)
		if r.err == nil {
			e.logf("  valid %s, %s output tokens a repaired job", pct(r.sum.ValidRate), num(r.tokensPerRepaired()))
		}
		out = append(out, r)
	}
	return out
}

// repairRows are the figures table's rows of 8 and 9.
func repairRows(coerce, patch []repairRun, c benchConfig) []benchRow {
	var rows []benchRow
	if len(coerce) >= 2 {
		none, safe := coerce[0], coerce[1]
		row := benchRow{no: "8", name: fmt.Sprintf("calls a valid job, --coerce safe / none (%s)", c.coercePreset), target: fmt.Sprintf("<= %.2fx, valid rate no lower", coerceTargetCalls)}
		if none.err != nil || safe.err != nil || none.callsPerValid() == 0 {
			row.measured, row.verdict = "error", "FAIL"
		} else {
			ratio := safe.callsPerValid() / none.callsPerValid()
			reasks := "n/a"
			if none.reasksPerValid() > 0 {
				reasks = fmt.Sprintf("%.2fx", safe.reasksPerValid()/none.reasksPerValid())
			}
			row.measured = fmt.Sprintf("%.2fx (re-asks %s), valid rate %s vs %s", ratio, reasks, pct(safe.sum.ValidRate), pct(none.sum.ValidRate))
			row.verdict = verdict(ratio <= coerceTargetCalls && safe.sum.ValidRate >= none.sum.ValidRate)
		}
		rows = append(rows, row)
	}
	if len(patch) == 2 {
		rep, pat := patch[0], patch[1]
		row := benchRow{no: "9", name: fmt.Sprintf("output tokens a repaired job, --strategy patch / repair (invoices of 30-60 lines, %s)", c.patchPreset),
			target: fmt.Sprintf("<= %.2fx, valid rate >= repair's - 1 point", patchTargetTokens)}
		if rep.err != nil || pat.err != nil || rep.tokensPerRepaired() == 0 {
			row.measured, row.verdict = "error", "FAIL"
		} else {
			ratio := pat.tokensPerRepaired() / rep.tokensPerRepaired()
			row.measured = fmt.Sprintf("%.2fx, valid rate %s vs %s", ratio, pct(pat.sum.ValidRate), pct(rep.sum.ValidRate))
			row.verdict = verdict(ratio <= patchTargetTokens && pat.sum.ValidRate >= rep.sum.ValidRate-patchValidSlack)
		}
		rows = append(rows, row)
	}
	return rows
}

func writeRepairRuns(w io.Writer, runs []repairRun) {
	fmt.Fprintln(w, "| run | jobs | valid rate | calls a valid job | re-asks a valid job | cost a valid job | repaired jobs | output tokens a repaired job | calls saved | patches applied / tried | took |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %s | | | | | | | | | |\n", r.name, oneLine(r.err))
			continue
		}
		tried := int64(0)
		for _, n := range r.fig.Patches {
			tried += n
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.2f | %.2f | $%.6f | %d | %s | %d | %d / %d | %s |\n", r.name, r.sum.Jobs, pct(r.sum.ValidRate),
			r.callsPerValid(), r.reasksPerValid(), r.sum.CostPerValidJob, r.fig.RepairedJobs, num(r.tokensPerRepaired()), r.fig.CallsSaved,
			r.fig.Patches["applied"], tried, r.elapsed.Round(time.Millisecond))
	}
}

// writeCoercionKinds lists the fixes of a run by kind, most frequent first.
func writeCoercionKinds(w io.Writer, r repairRun) {
	if r.err != nil || len(r.fig.Kinds) == 0 {
		return
	}
	var parts []string
	for _, k := range r.fig.Kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.fig.Coercions[k]))
	}
	fmt.Fprintf(w, "\nschema-guided fixes (%s), most frequent first: %s\n", r.name, strings.Join(parts, ", "))
}
