package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Figure 10: evidence. One messy batch of the demo's tickets run with
// --evidence off and with --evidence require, on the same seed: how many
// valid values hold a value the simulator invented (a customer, an order,
// an amount the ticket does not state), and what refusing them costs in
// valid rate and calls. The simulator says which value it invents at each
// place of a task (sim.Server.Inventions), so the count is of its own
// inventions, not of what the evidence stage grades.

// evidenceRun is one run of figure 10.
type evidenceRun struct {
	mode fixpoint.EvidenceMode
	sum  store.BatchSummary
	fig  store.RepairFigures
	// holding counts the valid values that hold an invention, leaves the
	// invented leaves they hold; refused the attempts of class evidence.
	holding, leaves, refused int64
	elapsed                  time.Duration
	err                      error
}

func (r *evidenceRun) callsPerValid() float64 {
	if r.sum.Valid == 0 {
		return 0
	}
	return float64(r.fig.Calls) / float64(r.sum.Valid)
}

// figureEvidence runs figure 10: --evidence off, then require.
func (e *benchEnv) figureEvidence(ctx context.Context, c benchConfig) []evidenceRun {
	var out []evidenceRun
	for _, mode := range []fixpoint.EvidenceMode{fixpoint.EvidenceOff, fixpoint.EvidenceRequire} {
		e.logf("10/10 evidence %s: %d tickets, messy preset", mode, c.evidenceJobs)
		r := evidenceRun{mode: mode}
		r.err = e.evidenceRun(ctx, c, &r)
		if r.err == nil {
			e.logf("  valid %s, %.2f calls a valid job, %d valid values hold an invented value", pct(r.sum.ValidRate), r.callsPerValid(), r.holding)
		}
		out = append(out, r)
	}
	return out
}

func (e *benchEnv) evidenceRun(ctx context.Context, c benchConfig, r *evidenceRun) error {
	res, err := e.simRun(ctx, c, simBatch{kind: "evidence-" + string(r.mode), preset: "messy", jobs: c.evidenceJobs,
		dataset: tickets.Dataset(c.evidenceJobs, 1),
		enqueue: enqueue.Config{Schema: []byte(tickets.Schema), Template: tickets.Template, Provider: llm.ProviderOpenAI, Model: repairsModel,
			Mode: fixpoint.ModePrompt, Evidence: r.mode}})
	r.sum, r.fig, r.elapsed = res.sum, res.fig, res.elapsed
	if err != nil {
		return err
	}
	classes, err := e.st.FailureClasses(ctx, res.batch)
	if err != nil {
		return err
	}
	for _, cc := range classes {
		if cc.Class == string(fixpoint.ClassEvidence) {
			r.refused += cc.Attempts
		}
	}
	var valid []string
	if err := e.st.Export(ctx, res.batch, func(row store.ExportRow) error {
		if row.Status == fixpoint.StatusValid {
			valid = append(valid, row.ID)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, id := range valid {
		job, _, err := e.st.Job(ctx, id)
		if err != nil {
			return err
		}
		n, err := inventedLeaves(res.srv, job.Prompt, job.Value)
		if err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		r.leaves += int64(n)
		if n > 0 {
			r.holding++
		}
	}
	return nil
}

// inventedLeaves counts the leaves of value (a job's final value) that
// hold the value the simulator invents there for the job's prompt. The
// simulator keys the job's task by its prompt (Config.KeyByPrompt).
func inventedLeaves(srv *sim.Server, prompt string, value json.RawMessage) (int, error) {
	inv, err := srv.Inventions(sim.TaskKey("", prompt), []byte(tickets.Schema), prompt)
	if err != nil {
		return 0, err
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return 0, err
	}
	n := 0
	for p, x := range inv {
		// The tickets' extractive leaves are top-level properties.
		if got, ok := v[p[1:]]; ok && sameJSON(got, x) {
			n++
		}
	}
	return n, nil
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// evidenceRows is the figures table's row of figure 10.
func evidenceRows(runs []evidenceRun, c benchConfig) []benchRow {
	if len(runs) != 2 {
		return nil
	}
	off, req := runs[0], runs[1]
	row := benchRow{no: "10", name: fmt.Sprintf("invented values accepted as grounded, --evidence require (%s messy tickets)", num(float64(c.evidenceJobs))), target: "0"}
	if off.err != nil || req.err != nil {
		row.measured, row.verdict = "error", "FAIL"
		return []benchRow{row}
	}
	row.measured = fmt.Sprintf("%d of %d valid values (--evidence off: %d of %d); valid rate %s vs %s; calls a valid job %.2f vs %.2f",
		req.holding, req.sum.Valid, off.holding, off.sum.Valid, pct(req.sum.ValidRate), pct(off.sum.ValidRate), req.callsPerValid(), off.callsPerValid())
	row.verdict = verdict(req.holding == 0)
	return []benchRow{row}
}

func writeEvidenceRuns(w io.Writer, runs []evidenceRun) {
	fmt.Fprintln(w, "| run | jobs | valid rate | calls a valid job | valid values holding an invented value | invented leaves in them | attempts refused as ungrounded | took |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		if r.err != nil {
			fmt.Fprintf(w, "| --evidence %s | error: %s | | | | | | |\n", r.mode, oneLine(r.err))
			continue
		}
		fmt.Fprintf(w, "| --evidence %s | %d | %s | %.2f | %d | %d | %d | %s |\n", r.mode, r.sum.Jobs, pct(r.sum.ValidRate), r.callsPerValid(),
			r.holding, r.leaves, r.refused, r.elapsed.Round(time.Millisecond))
	}
}
