package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

const stepsUsage = `Usage: report steps BATCH [--format text|json] [--top N] [flags]

Prints what a batch's document jobs (strategies parallel, sequential and
agent) spent their calls on, step by step, every run's:
  - for each step kind (chunk: a call over one chunk of the document;
    merge: the chunks' values merged, by rule (no call, no tokens) or by
    a call to the batch's merge model;
    repair: a call repairing the merged value; agent: one turn of the
    agent), its attempts, the share valid (for a chunk, its value passed
    the smart validation), its failure classes, tokens and cost;
  - fields per chunk: by chunk number (0 the first), the calls, the share
    valid, the mean count of fields their values held (non-null strings,
    numbers and booleans, each array item's) and the calls whose value
    held none;
  - merge conflicts: how many, in how many merges, and the paths where
    the chunks disagreed most (array indices folded to *);
  - grounding per step kind, when the evidence stage ran: the share of the
    steps' graded strings and numbers found exactly, normalized, fuzzily
    or not at all in the document.
A batch without document jobs says so, and prints nothing else.

  report steps contracts-2026-12-07 --top 5

--top N shows the N most frequent conflict paths (default 10); --format
json writes one JSON object with every path, its fields documented in
docs/report.md.

Exit status: 0 done, 1 an error (an unknown batch), 2 bad usage.`

// stepsCommand is report steps.
type stepsCommand struct{ stdout io.Writer }

func (c *stepsCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("steps", stepsUsage, ledgerEnv, c.stdout)
	format := formatFlag(fs)
	top := fs.Int("top", 10, "the most frequent merge conflict paths the text shows")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if *top < 1 || *top > store.StepsLimitMax {
		return usageError{Err: fmt.Errorf("--top %d: want 1 to %d", *top, store.StepsLimitMax)}
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	return writeSteps(ctx, c.stdout, st, pos[0], *format, *top)
}

// stepsLedger is what report steps reads. *store.Store satisfies it.
type stepsLedger interface {
	batchLedger
	Steps(ctx context.Context, batch string, limit int) (store.StepReport, error)
}

var _ stepsLedger = (*store.Store)(nil)

// writeSteps prints batch's step report in format, at most top conflict
// paths in text.
func writeSteps(ctx context.Context, w io.Writer, l stepsLedger, batch, format string, top int) error {
	if err := needBatch(ctx, l, batch); err != nil {
		return err
	}
	limit := top
	if format == "json" {
		limit = 0 // every path
	}
	r, err := l.Steps(ctx, batch, limit)
	if err != nil {
		return err
	}
	if format == "json" {
		return writeJSON(w, stepsData(batch, r))
	}
	if !documentJobs(r) {
		fmt.Fprintf(w, "batch %s has no document jobs (strategy %s): its calls have no steps. Steps are those of the strategies parallel, sequential and agent; see report failures.\n",
			batch, strategiesText(r.Strategies))
		return nil
	}
	if len(r.Steps) == 0 {
		fmt.Fprintf(w, "batch %s (strategy %s): no step recorded yet.\n", batch, strategiesText(r.Strategies))
		return nil
	}
	fmt.Fprintf(w, "batch %s (strategy %s): calls by step, every run's\n", batch, strategiesText(r.Strategies))
	kinds := stepKinds(r.Steps)
	writeStepTable(w, kinds)
	writeChunkTable(w, r.Chunks)
	writeConflicts(w, kinds, r.Conflicts)
	writeStepGrounding(w, kinds)
	return nil
}

// documentJobs reports whether the batch ran a document strategy, or has
// steps recorded whatever its settings say.
func documentJobs(r store.StepReport) bool {
	return len(r.Steps) > 0 || slices.ContainsFunc(r.Strategies, func(s string) bool { return fixpoint.Strategy(s).Document() })
}

func strategiesText(s []string) string {
	var names []string
	for _, n := range s {
		names = append(names, cmp.Or(n, "unrecorded"))
	}
	if len(names) == 0 {
		return "unrecorded"
	}
	return strings.Join(names, ", then ")
}

// stepKind is one step kind's rows (store.StepCalls by class) added up.
type stepKind struct {
	store.StepCalls
	// Classes counts the failed attempts by class.
	Classes map[string]int64
}

// stepKinds adds up rows by step, in their order.
func stepKinds(rows []store.StepCalls) []*stepKind {
	var out []*stepKind
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Step != r.Step {
			out = append(out, &stepKind{StepCalls: store.StepCalls{Step: r.Step}, Classes: map[string]int64{}})
		}
		k := out[len(out)-1]
		c := &k.StepCalls
		c.Attempts += r.Attempts
		c.Valid += r.Valid
		c.TokensIn, c.TokensOut, c.TokensCached = c.TokensIn+r.TokensIn, c.TokensOut+r.TokensOut, c.TokensCached+r.TokensCached
		c.CostUSD += r.CostUSD
		c.Unpriced += r.Unpriced
		c.ToolCalls += r.ToolCalls
		c.Conflicts, c.Conflicted = c.Conflicts+r.Conflicts, c.Conflicted+r.Conflicted
		c.Graded, c.Leaves = c.Graded+r.Graded, c.Leaves+r.Leaves
		c.Exact, c.Normalized, c.Fuzzy, c.None = c.Exact+r.Exact, c.Normalized+r.Normalized, c.Fuzzy+r.Fuzzy, c.None+r.None
		if r.Class != "" {
			k.Classes[r.Class] += r.Attempts
		}
	}
	return out
}

// classesText is "semantic 3, shape 1": the most frequent first.
func classesText(m map[string]int64) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, m[n]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func share(n, d int64) string {
	if d == 0 {
		return "-"
	}
	return cli.Pct(float64(n) / float64(d))
}

func writeStepTable(w io.Writer, kinds []*stepKind) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tATTEMPTS\tVALID%\tTOKENS IN\tTOKENS OUT\tCOST $\tTOOL CALLS\tFAILURE CLASSES")
	for _, k := range kinds {
		cost := fmt.Sprintf("%.4f", k.CostUSD)
		if k.Unpriced > 0 {
			cost += fmt.Sprintf(" (%d unpriced)", k.Unpriced)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%s\n", k.Step, k.Attempts, share(k.Valid, k.Attempts), k.TokensIn, k.TokensOut,
			cost, k.ToolCalls, classesText(k.Classes))
	}
	tw.Flush()
}

func writeChunkTable(w io.Writer, chunks []store.ChunkFields) {
	if len(chunks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfields per chunk (a chunk value's non-null strings, numbers and booleans)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHUNK\tCALLS\tVALID%\tMEAN FIELDS\tNONE FOUND")
	for _, c := range chunks {
		mean := "-"
		if c.WithValue > 0 {
			mean = fmt.Sprintf("%.1f", c.MeanFields())
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\n", c.Chunk, c.Attempts, share(c.Valid, c.Attempts), mean, c.Empty)
	}
	tw.Flush()
}

func writeConflicts(w io.Writer, kinds []*stepKind, paths []store.ConflictPath) {
	var merges, conflicts, conflicted int64
	for _, k := range kinds {
		if k.Step == string(fixpoint.StepMerge) {
			merges, conflicts, conflicted = k.Attempts, k.Conflicts, k.Conflicted
		}
	}
	if merges == 0 {
		return
	}
	fmt.Fprintf(w, "\nmerge conflicts: %d, in %d of %d merges\n", conflicts, conflicted, merges)
	if len(paths) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tCONFLICTS\tMERGES")
	for _, p := range paths {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", cmp.Or(p.Path, "(root)"), p.Conflicts, p.Merges)
	}
	tw.Flush()
}

func writeStepGrounding(w io.Writer, kinds []*stepKind) {
	if !slices.ContainsFunc(kinds, func(k *stepKind) bool { return k.Leaves > 0 }) {
		return
	}
	fmt.Fprintln(w, "\ngrounding by step (the graded strings and numbers of the steps' values)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tGRADED\tLEAVES\tEXACT%\tNORMALIZED%\tFUZZY%\tNONE%")
	for _, k := range kinds {
		if k.Leaves == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", k.Step, k.Graded, k.Leaves, share(k.Exact, k.Leaves),
			share(k.Normalized, k.Leaves), share(k.Fuzzy, k.Leaves), share(k.None, k.Leaves))
	}
	tw.Flush()
}

// stepsJSON is report steps --format json (docs/report.md).
type stepsJSON struct {
	Batch        string            `json:"batch"`
	Strategies   []string          `json:"strategies"`
	DocumentJobs bool              `json:"document_jobs"`
	Steps        []stepJSON        `json:"steps"`
	Chunks       []chunkJSON       `json:"chunks"`
	Conflicts    stepConflictsJSON `json:"conflicts"`
}

type stepJSON struct {
	Step         string             `json:"step"`
	Attempts     int64              `json:"attempts"`
	Valid        int64              `json:"valid"`
	ValidRate    *float64           `json:"valid_rate"`
	Classes      map[string]int64   `json:"classes"`
	TokensIn     int64              `json:"tokens_in"`
	TokensOut    int64              `json:"tokens_out"`
	TokensCached int64              `json:"tokens_cached"`
	CostUSD      float64            `json:"cost_usd"`
	Unpriced     int64              `json:"unpriced"`
	ToolCalls    int64              `json:"tool_calls"`
	Grounding    *stepGroundingJSON `json:"grounding"`
}

type stepGroundingJSON struct {
	Graded     int64 `json:"graded"`
	Leaves     int64 `json:"leaves"`
	Exact      int64 `json:"exact"`
	Normalized int64 `json:"normalized"`
	Fuzzy      int64 `json:"fuzzy"`
	None       int64 `json:"none"`
}

type chunkJSON struct {
	Chunk      int      `json:"chunk"`
	Attempts   int64    `json:"attempts"`
	Valid      int64    `json:"valid"`
	WithValue  int64    `json:"with_value"`
	Fields     int64    `json:"fields"`
	MeanFields *float64 `json:"mean_fields"`
	Empty      int64    `json:"empty"`
}

type stepConflictsJSON struct {
	Merges     int64              `json:"merges"`
	Conflicts  int64              `json:"conflicts"`
	Conflicted int64              `json:"conflicted"`
	Paths      []conflictPathJSON `json:"paths"`
}

type conflictPathJSON struct {
	Path      string `json:"path"`
	Conflicts int64  `json:"conflicts"`
	Merges    int64  `json:"merges"`
}

func rate(n, d int64) *float64 {
	if d == 0 {
		return nil
	}
	return ptr(float64(n) / float64(d))
}

func stepsData(batch string, r store.StepReport) stepsJSON {
	out := stepsJSON{Batch: batch, Strategies: r.Strategies, DocumentJobs: documentJobs(r), Steps: []stepJSON{}, Chunks: []chunkJSON{},
		Conflicts: stepConflictsJSON{Paths: []conflictPathJSON{}}}
	if out.Strategies == nil {
		out.Strategies = []string{}
	}
	for _, k := range stepKinds(r.Steps) {
		s := stepJSON{Step: k.Step, Attempts: k.Attempts, Valid: k.Valid, ValidRate: rate(k.Valid, k.Attempts), Classes: k.Classes,
			TokensIn: k.TokensIn, TokensOut: k.TokensOut, TokensCached: k.TokensCached, CostUSD: k.CostUSD, Unpriced: k.Unpriced,
			ToolCalls: k.ToolCalls}
		if k.Graded > 0 {
			s.Grounding = &stepGroundingJSON{Graded: k.Graded, Leaves: k.Leaves, Exact: k.Exact, Normalized: k.Normalized, Fuzzy: k.Fuzzy, None: k.None}
		}
		if k.Step == string(fixpoint.StepMerge) {
			out.Conflicts.Merges, out.Conflicts.Conflicts, out.Conflicts.Conflicted = k.Attempts, k.Conflicts, k.Conflicted
		}
		out.Steps = append(out.Steps, s)
	}
	for _, c := range r.Chunks {
		out.Chunks = append(out.Chunks, chunkJSON{Chunk: c.Chunk, Attempts: c.Attempts, Valid: c.Valid, WithValue: c.WithValue,
			Fields: c.Fields, MeanFields: rate(c.Fields, c.WithValue), Empty: c.Empty})
	}
	for _, p := range r.Conflicts {
		out.Conflicts.Paths = append(out.Conflicts.Paths, conflictPathJSON{Path: p.Path, Conflicts: p.Conflicts, Merges: p.Merges})
	}
	return out
}
