package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// CardStatus is the headline of an attempt card.
func CardStatus(a *fixpoint.Attempt) string {
	switch {
	case a.Valid:
		return "VALID"
	case a.Class == fixpoint.OutcomeTruncated:
		return "TRUNCATED"
	case a.Class == fixpoint.OutcomeRefusal:
		return "REFUSED"
	case a.Class == fixpoint.OutcomeProvider:
		return "PROVIDER ERROR"
	case a.Class == string(fixpoint.ClassSyntax):
		return "PARSE ERROR"
	}
	return "INVALID"
}

// WriteCards prints each attempt of res as a card, then a one-line verdict,
// as `worker try` and `report job` show them.
func WriteCards(w io.Writer, res *fixpoint.Result) {
	for i := range res.Attempts {
		writeCard(w, &res.Attempts[i])
	}
	fmt.Fprintln(w, Verdict(res))
}

func writeCard(w io.Writer, a *fixpoint.Attempt) {
	status := CardStatus(a)
	fmt.Fprintf(w, "── attempt %d ── %s ── %s, %d in / %d out tokens", a.No, status, a.Latency.Round(time.Millisecond), a.TokensIn, a.TokensOut)
	if a.TokensCached > 0 {
		fmt.Fprintf(w, " (%d cached)", a.TokensCached)
	}
	if len(a.Retries) > 0 {
		fmt.Fprintf(w, ", %d transport retries", len(a.Retries))
	}
	fmt.Fprintln(w)
	if a.Class == fixpoint.OutcomeProvider {
		fmt.Fprintf(w, "  provider error: %s\n", a.ProviderError)
		return
	}
	if a.Source != "" {
		fmt.Fprintf(w, "  found in: %s", a.Source)
		if len(a.Repairs) > 0 {
			kinds := make([]string, len(a.Repairs))
			for i, r := range a.Repairs {
				kinds[i] = fmt.Sprintf("%s@%d", r.Kind, r.Offset)
			}
			fmt.Fprintf(w, "; local repairs: %s", strings.Join(kinds, ", "))
		}
		fmt.Fprintln(w)
	}
	if len(a.Value) > 0 {
		fmt.Fprintf(w, "  value: %s\n", clip(string(a.Value), 400))
	} else if a.Raw != "" {
		fmt.Fprintf(w, "  reply: %s\n", clip(strings.ReplaceAll(a.Raw, "\n", "\\n"), 400))
	}
	for _, e := range a.Errors {
		fmt.Fprintf(w, "  ✗ [%s/%s] %s\n", e.Class, e.Keyword, e.Message)
	}
	if a.Feedback != "" {
		fmt.Fprintln(w, "  feedback sent next:")
		for _, line := range strings.Split(a.Feedback, "\n") {
			fmt.Fprintf(w, "  │ %s\n", line)
		}
	}
}

// Verdict is the one-line outcome of a job.
func Verdict(res *fixpoint.Result) string {
	tokens := res.TokensIn + res.TokensOut
	switch res.Status {
	case fixpoint.StatusValid:
		how := "first attempt"
		if !res.FirstAttemptValid {
			how = fmt.Sprintf("attempt %d", len(res.Attempts))
		}
		if res.RepairedLocally {
			how += ", repaired locally"
		}
		return fmt.Sprintf("VALID on %s: %s, %s, $%.6f, %s", how, Plural(res.Calls, "call"), Plural(tokens, "token"), res.CostUSD, res.Wall.Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s after %s (%s): %s; %s, $%.6f", strings.ToUpper(string(res.Status)), Plural(len(res.Attempts), "attempt"), res.Class, res.Error, Plural(tokens, "token"), res.CostUSD)
	}
}

// AttemptFromStore turns a ledger row back into a fixpoint.Attempt for printing.
func AttemptFromStore(s *store.Attempt) fixpoint.Attempt {
	a := fixpoint.Attempt{No: s.No, Request: s.Request, RequestHash: s.RequestHash, Raw: s.Raw, Class: s.Class, Valid: s.Valid,
		RepairedLocally: s.RepairedLocally, Latency: time.Duration(s.LatencyMS) * time.Millisecond,
		TokensIn: int(s.TokensIn), TokensOut: int(s.TokensOut), TokensCached: int(s.TokensCached),
		ProviderStatus: s.ProviderStatus, ProviderError: s.ProviderError, Model: s.Model, RequestID: s.RequestID, StartedAt: s.StartedAt,
		FinishReason: fixpoint.FinishReason(s.FinishReason), Feedback: s.Feedback, PatchOutcome: fixpoint.PatchOutcome(s.PatchOutcome),
		CostUSD: s.CostUSD, Coerced: s.Coerced}
	a.Source = fixpoint.Source(s.Source)
	_ = json.Unmarshal(s.Repairs, &a.Repairs)
	_ = json.Unmarshal(s.Errors, &a.Errors)
	a.Step, a.Chunk = fixpoint.StepKind(s.Step), s.Chunk
	_ = json.Unmarshal(s.ToolCalls, &a.ToolCalls)
	_ = json.Unmarshal(s.Conflicts, &a.Conflicts)
	var classes []fixpoint.ErrorClass
	_ = json.Unmarshal(s.RetryClasses, &classes)
	for _, c := range classes {
		a.Retries = append(a.Retries, fixpoint.Retry{Class: c})
	}
	if a.Valid {
		// The ledger keeps the job's value on the job row, not per attempt.
		a.Value = nil
	}
	return a
}

// clip is s cut to at most n bytes, at a character's start, an ellipsis
// marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// pctOf is a share as a percentage with one decimal, "-" for none (a
// rate of no jobs).
func pctOf(r *float64) string {
	if r == nil {
		return "-"
	}
	return Pct(*r)
}

// Pct writes a share as a percentage with one decimal that never rounds
// to 0.0 or 100.0 when it is not exactly that: 7 invalid jobs of 20,000
// read "VALID% 100.0" and "0.0% not valid".
func Pct(share float64) string {
	s := fmt.Sprintf("%.1f", 100*share)
	switch {
	case s == "100.0" && share < 1:
		return ">99.9"
	case (s == "0.0" || s == "-0.0") && share > 0:
		return "<0.1"
	}
	return s
}

// summaryLegend defines each rate column of WriteSummary's table, one line
// each, as the batch_summary view computes them.
var summaryLegend = [][2]string{
	{"VALID%", "valid jobs as a share of finished jobs (all but queued)"},
	{"1ST-TRY%", "jobs valid on their first answered attempt (a batch request that never ran is no try; a requeued job's first was in its first run that made a call) as a share of finished jobs"},
	{"REPAIRED%", "valid jobs that needed another answered attempt, another run or a local repair, as a share of valid jobs"},
	{"ATTEMPTS", "mean attempts, every run's, of the valid, invalid and failed jobs (a provider-batch request that expired unrun counts: it was sent)"},
	{"TOKENS/VALID", "input and output tokens of every job's latest run, over the valid jobs"},
	{"COST/VALID", "cost of every job's latest run (over-budget jobs' included), over the valid jobs; calls kept apart and replaced runs are in the cost line below"},
	{"-", "no job to divide by (none valid, or none finished), or no wall time (jobs cancelled unrun)"},
}

// SummaryHeader is the header of WriteSummary's table, tab-separated.
const SummaryHeader = "BATCH\tJOBS\tVALID\tINVALID\tFAILED\tREJECTED\tDEAD\tQUEUED\tCANCELLED\tOVER BUDGET\tRUNS" +
	"\tVALID%\t1ST-TRY%\tREPAIRED%\tATTEMPTS\tTOKENS/VALID\tCOST/VALID\tP50 ms\tP95 ms"

// unpricedMark follows the COST/VALID of a batch with attempts on a model
// that had no price: its $0 is not free, it is unknown.
const unpricedMark = "*"

// WriteSummary prints batch summaries as a table, then a legend defining
// its rate columns. unpriced holds the batches with attempts (of their
// latest runs) on a model with no price: their COST/VALID is marked, as it
// counts those attempts $0.
func WriteSummary(w io.Writer, rows []store.BatchSummary, unpriced map[string]bool) {
	// The same columns for every batch, so that a script reading one
	// reads them all (the action columns came and went with cancels,
	// caps and requeues).
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, SummaryHeader)
	marked := false
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d", r.Batch, r.Jobs, r.Valid, r.Invalid, r.Failed, r.Rejected, r.Dead, r.Queued)
		fmt.Fprintf(tw, "\t%d\t%d\t%d", r.Cancelled, r.OverBudget, r.Runs)
		// A figure of no jobs is none, not 0: a batch that spent and
		// made nothing valid does not read as free.
		finished := func(v string) string {
			if r.Finished == 0 {
				return "-"
			}
			return v
		}
		valid := func(v string) string {
			if r.Valid == 0 {
				return "-"
			}
			return v
		}
		attempted := r.Valid + r.Invalid + r.Failed
		attempts := "-"
		if attempted > 0 {
			attempts = fmt.Sprintf("%.2f", r.MeanAttempts)
		}
		p50, p95 := "-", "-"
		if r.HasWall {
			p50, p95 = fmt.Sprintf("%.0f", r.P50WallMS), fmt.Sprintf("%.0f", r.P95WallMS)
		}
		cost := fmt.Sprintf("$%.6f", r.CostPerValidJob)
		if unpriced[r.Batch] {
			cost += unpricedMark
			marked = marked || r.Valid > 0
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			finished(Pct(r.ValidRate)), finished(Pct(r.FirstAttemptValidRate)), valid(Pct(r.RepairRate)), attempts,
			valid(fmt.Sprintf("%.0f", r.TokensPerValidJob)), valid(cost), p50, p95)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range summaryLegend {
		fmt.Fprintf(tw, "%s\t%s\n", l[0], l[1])
	}
	if marked {
		fmt.Fprintf(tw, "%s\t%s\n", unpricedMark, "the cost counts attempts on a model with no price $0: it is unknown, not free (see \"cost unknown\" below)")
	}
	tw.Flush()
}

// WriteFailures prints failure classes by attempt, repair effectiveness and
// the top error paths.
func WriteFailures(w io.Writer, classes []store.ClassCount, steps []store.RepairStep, paths []store.PathCount) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Failure classes by attempt")
	fmt.Fprintln(tw, "MODEL\tATTEMPT\tCLASS\tATTEMPTS\tSHARE%")
	for _, c := range classes {
		class := c.Class
		if class == "" {
			class = "(valid)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", c.Model, c.AttemptNo, class, c.Attempts, Pct(c.Share))
	}
	tw.Flush()
	if len(steps) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "Repair effectiveness: of the jobs that failed attempt n with a class and were asked again, how many were valid at n+1")
		fmt.Fprintln(tw, "ATTEMPT\tCLASS\tFAILED\tRETRIED\tVALID NEXT\tRATE%")
		for _, s := range steps {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\n", s.AttemptNo, s.Class, s.Failed, s.Retried, s.ValidNext, pctOf(s.Rate))
		}
		tw.Flush()
	}
	if len(paths) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "Top error paths")
		fmt.Fprintln(tw, "PATH\tKEYWORD\tCLASS\tERRORS\tJOBS")
		for _, p := range paths {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", pointerOrRoot(p.Path), p.Keyword, p.Class, p.Errors, p.Jobs)
		}
		tw.Flush()
	}
}

// ReportLedger is what WriteFailureReport reads. *store.Store satisfies it.
type ReportLedger interface {
	FailureClasses(ctx context.Context, batch string) ([]store.ClassCount, error)
	RepairEffectiveness(ctx context.Context, batch string) ([]store.RepairStep, error)
	TopErrorPaths(ctx context.Context, batch string, limit int) ([]store.PathCount, error)
	EndReasons(ctx context.Context, batch string, limit int) ([]store.EndReason, error)
	RuleFailures(ctx context.Context, batch string, limit int) ([]store.RuleFailure, error)
	Grounding(ctx context.Context, batch string, limit int) ([]store.FieldGrounding, error)
}

var _ ReportLedger = (*store.Store)(nil)

// WriteFailureReport prints a batch's failure classes by attempt, repair
// effectiveness, its top error paths, rule failures and fields by
// grounding (top of each), and the jobs that ended without a result by
// reason, as `report failures` and the demo show them.
func WriteFailureReport(ctx context.Context, w io.Writer, l ReportLedger, batch string, top int) error {
	classes, err := l.FailureClasses(ctx, batch)
	if err != nil {
		return err
	}
	steps, err := l.RepairEffectiveness(ctx, batch)
	if err != nil {
		return err
	}
	paths, err := l.TopErrorPaths(ctx, batch, top)
	if err != nil {
		return err
	}
	WriteFailures(w, classes, steps, paths)
	rf, err := l.RuleFailures(ctx, batch, 0)
	if err != nil {
		return err
	}
	WriteRuleFailures(w, rf, top)
	grounding, err := l.Grounding(ctx, batch, 0)
	if err != nil {
		return err
	}
	WriteGrounding(w, grounding, top)
	reasons, err := l.EndReasons(ctx, batch, top)
	if err != nil {
		return err
	}
	if len(classes) == 0 && len(reasons) == 0 {
		// Headers alone read like a report cut short.
		fmt.Fprintf(w, "\nno failed attempt and no job ended without a result in batch %s (yet)\n", batch)
	}
	if len(reasons) > 0 {
		fmt.Fprintln(w, "\njobs that ended without a result (dead, rejected, failed, cancelled, over budget), by reason:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STATUS\tJOBS\tREASON")
		shown := int64(0)
		for _, r := range reasons {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Status, r.Jobs, oneLine(r.Error))
			shown += r.Jobs
		}
		tw.Flush()
		if last := reasons[len(reasons)-1]; last.Reasons > int64(len(reasons)) {
			fmt.Fprintf(w, "and %s (%s; SELECT status, error FROM jobs WHERE batch = '%s' AND status <> 'valid' lists them)\n",
				Plural(last.Reasons-int64(len(reasons)), "more reason"), Plural(last.AllJobs-shown, "job"), batch)
		}
	}
	return nil
}

// oneLine is s with its line breaks as spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Are is the verb of n things: "is" for one, "are" for any other count.
func Are[N ~int | ~int64](n N) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// Plural is n and word, with an s unless n is 1: "1 row", "3 rows".
func Plural[N ~int | ~int64](n N, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
