package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// tryChunkTokensMin is the smallest --chunk-tokens try takes, as enqueue:
// a chunk of a sentence or two costs its call's prompt and schema many
// times over.
const tryChunkTokensMin = 50

// tryDocFlags are worker try's flags for the document strategies.
type tryDocFlags struct {
	file string
	lim  fixpoint.Limits // ChunkTokens, ChunkOverlap, ListPasses, Strict, MaxValidationAttempts, MergeModel
}

func (d *tryDocFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.file, "document-file", "", "UTF-8 text or Markdown file: the job's document, sent beside the prompt (needed by parallel, sequential and agent)")
	fs.IntVar(&d.lim.ChunkTokens, "chunk-tokens", 0, fmt.Sprintf("document strategies: chunk size in estimated tokens, %d or more (0 = %d)", tryChunkTokensMin, fixpoint.ChunkTokensDefault))
	fs.IntVar(&d.lim.ChunkOverlap, "chunk-overlap", 0, fmt.Sprintf("document strategies: tokens each chunk repeats of the previous one, less than --chunk-tokens (default %d with the default size)", fixpoint.ChunkOverlapDefault))
	fs.IntVar(&d.lim.ListPasses, "list-passes", fixpoint.ListPassesDefault, "strategies parallel and sequential: more calls a chunk may get over its rest, from the last item read, while its value's list looks cut (0: none)")
	fs.BoolVar(&d.lim.Strict, "strict", false, "document strategies: check each chunk's value against the full schema, required properties and all")
	fs.IntVar(&d.lim.MaxValidationAttempts, "max-validation-attempts", 0, fmt.Sprintf("strategy agent: how often finish may be refused for an invalid value, 1 to %d (0 = %d)", fixpoint.MaxAttemptsMax, fixpoint.ValidationAttemptsDefault))
	fs.StringVar(&d.lim.MergeModel, "merge-model", "", "strategy parallel: a model of the same provider that merges the chunks' values in one call (default: merged by rule, no call)")
}

// check checks the document flags against strategy: a document strategy
// needs --document-file, the chunk flags need a document strategy, and
// each is in its range.
func (d *tryDocFlags) check(fs *flag.FlagSet, strategy fixpoint.Strategy) error {
	if given(fs, "merge-model") && strategy != fixpoint.StrategyParallel {
		return usagef("--merge-model is for --strategy parallel, which merges the values of a document's chunks, not --strategy %s", strategy)
	}
	if given(fs, "merge-model") && strings.TrimSpace(d.lim.MergeModel) == "" {
		return usagef("--merge-model is empty: name a model, or leave the flag out to merge by rule")
	}
	if !strategy.Document() {
		for _, name := range []string{"chunk-tokens", "chunk-overlap", "list-passes", "strict", "max-validation-attempts"} {
			if given(fs, name) {
				return usagef("--%s is for the document strategies (parallel, sequential, agent), not --strategy %s", name, strategy)
			}
		}
		return nil
	}
	if strategy == fixpoint.StrategyAgent && given(fs, "list-passes") {
		return usagef("--list-passes is for strategies parallel and sequential: the agent reads the chunks it chooses through tools")
	}
	if d.lim.ListPasses < 0 {
		return usagef("--list-passes %d: want 0 (none) or more", d.lim.ListPasses)
	}
	if d.file == "" {
		return usagef("--strategy %s runs over a document: give --document-file F", strategy)
	}
	lim := &d.lim
	if lim.ChunkTokens < 0 || lim.ChunkTokens > 0 && lim.ChunkTokens < tryChunkTokensMin {
		return usagef("--chunk-tokens %d: want %d or more (0 = %d)", lim.ChunkTokens, tryChunkTokensMin, fixpoint.ChunkTokensDefault)
	}
	if lim.ChunkOverlap < 0 {
		return usagef("--chunk-overlap %d: want 0 or more", lim.ChunkOverlap)
	}
	if given(fs, "chunk-overlap") && lim.ChunkTokens == 0 {
		lim.ChunkTokens = fixpoint.ChunkTokensDefault // so that an overlap of 0 stays 0
	}
	if lim.ChunkTokens > 0 && lim.ChunkOverlap >= lim.ChunkTokens {
		return usagef("--chunk-overlap %d must be less than --chunk-tokens %d", lim.ChunkOverlap, lim.ChunkTokens)
	}
	if v := lim.MaxValidationAttempts; v < 0 || v > fixpoint.MaxAttemptsMax {
		return usagef("--max-validation-attempts %d: want 1 to %d (0 = %d)", v, fixpoint.MaxAttemptsMax, fixpoint.ValidationAttemptsDefault)
	}
	return nil
}

// read reads --document-file into spec, with the document flags' limits.
func (d *tryDocFlags) read(spec *pipeline.TrySpec) error {
	spec.Limits.ChunkTokens, spec.Limits.ChunkOverlap = d.lim.ChunkTokens, d.lim.ChunkOverlap
	spec.Limits.Strict, spec.Limits.MaxValidationAttempts = d.lim.Strict, d.lim.MaxValidationAttempts
	spec.Limits.MergeModel = d.lim.MergeModel
	if spec.Limits.Strategy == fixpoint.StrategyParallel || spec.Limits.Strategy == fixpoint.StrategySequential {
		spec.Limits.ListPasses = d.lim.ListPasses
	}
	if d.file == "" {
		return nil
	}
	text, err := cli.ReadTextFile(d.file)
	if err != nil {
		return usagef("read --document-file: %v", err)
	}
	spec.Document = string(text)
	return nil
}

// tryDocJSON is `worker try --json` under a document strategy: the value
// and one entry per step, each call's and the merge's.
type tryDocJSON struct {
	JobID    string             `json:"job_id"`
	Status   fixpoint.Status    `json:"status"`
	Value    json.RawMessage    `json:"value"`
	Class    string             `json:"class,omitempty"`
	Error    string             `json:"error,omitempty"`
	Attempts []pipeline.TryStep `json:"attempts"`
	Totals   tryDocTotals       `json:"totals"`
}

type tryDocTotals struct {
	Calls     int     `json:"calls"`
	TokensIn  int     `json:"tokens_in"`
	TokensOut int     `json:"tokens_out"`
	CostUSD   float64 `json:"cost_usd"`
	WallMS    int64   `json:"wall_ms"`
}

func writeDocJSON(w io.Writer, res *fixpoint.Result) {
	out, _ := json.MarshalIndent(tryDocJSON{JobID: res.JobID, Status: res.Status, Value: res.Value, Class: res.Class, Error: res.Error,
		Attempts: pipeline.TrySteps(res), Totals: tryDocTotals{Calls: res.Calls, TokensIn: res.TokensIn, TokensOut: res.TokensOut,
			CostUSD: res.CostUSD, WallMS: res.Wall.Milliseconds()}}, "", "  ")
	fmt.Fprintf(w, "%s\n", out)
}

// writeDocCards prints a card per step of a document job, then its final
// value and totals.
func writeDocCards(w io.Writer, res *fixpoint.Result) {
	for i, s := range pipeline.TrySteps(res) {
		a := &res.Attempts[i]
		fmt.Fprintf(w, "── %d %s ── %s", s.No, stepTitle(s), cli.CardStatus(a))
		if s.Call {
			fmt.Fprintf(w, " ── %s, %d in / %d out tokens", a.Latency.Round(time.Millisecond), s.TokensIn, s.TokensOut)
		} else {
			fmt.Fprint(w, " ── no call")
		}
		fmt.Fprintln(w)
		if s.ProviderError != "" {
			fmt.Fprintf(w, "  provider error: %s\n", s.ProviderError)
		}
		for _, c := range s.ToolCalls {
			fmt.Fprintf(w, "  → %s(%s)\n", c.Name, c.Arguments)
		}
		for _, c := range s.Conflicts {
			by := ""
			if c.By != "" {
				by = " (by " + c.By + ")"
			}
			fmt.Fprintf(w, "  conflict at %s: %s chosen%s of %s\n", pointerOrRoot(c.Path), c.Chosen, by, joinRaw(c.Values))
		}
		if len(s.Value) > 0 && len(s.ToolCalls) == 0 {
			fmt.Fprintf(w, "  value: %s\n", clipText(string(s.Value), 400))
		}
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  ✗ [%s/%s] %s\n", e.Class, e.Keyword, e.Message)
		}
	}
	if len(res.Value) > 0 {
		fmt.Fprintf(w, "value: %s\n", res.Value)
	}
	fmt.Fprintln(w, docVerdict(res))
}

// docVerdict is the one-line outcome of a document job: its steps and
// calls, which "first attempt" or "attempt n" would misstate (the chunk
// calls are no attempts of one conversation).
func docVerdict(res *fixpoint.Result) string {
	totals := fmt.Sprintf("%s, %s, %s, $%.6f, %s", cli.Plural(len(res.Attempts), "step"), cli.Plural(res.Calls, "call"),
		cli.Plural(res.TokensIn+res.TokensOut, "token"), res.CostUSD, res.Wall.Round(time.Millisecond))
	if res.Status == fixpoint.StatusValid {
		return "VALID: " + totals
	}
	return fmt.Sprintf("%s (%s): %s; %s", strings.ToUpper(string(res.Status)), res.Class, res.Error, totals)
}

// stepTitle names a step: "chunk 2 [4012, 8190)", "chunk 2 pass 1
// [6120, 8190)", "merge", "repair", "agent turn".
func stepTitle(s pipeline.TryStep) string {
	switch s.Step {
	case fixpoint.StepChunk:
		if c := s.Chunk; c != nil && c.Pass > 0 {
			return fmt.Sprintf("chunk %d pass %d [%d, %d)", c.N, c.Pass, c.Start, c.End)
		}
		if s.Chunk != nil {
			return fmt.Sprintf("chunk %d [%d, %d)", s.Chunk.N, s.Chunk.Start, s.Chunk.End)
		}
		return "chunk"
	case fixpoint.StepAgent:
		return "agent turn"
	case "":
		return "attempt"
	}
	return string(s.Step)
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

func joinRaw(vs []json.RawMessage) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
