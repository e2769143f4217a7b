package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// A document job (strategies parallel, sequential, agent) makes many
// calls of several kinds: a chunk call per chunk (and its retries), the
// merge, repairs of the merged value, or the agent's turns. Its page and
// the playground show them as steps: each attempt's card names its step,
// and the cards are grouped by kind, each group summed up in a table, so
// that a job of thirty chunk calls reads as one table and a few cards.

// Bounds of what a step shows of untrusted text: the model's tool
// arguments and the tool results are clipped (their card's request holds
// them whole).
const (
	toolArgsMax   = 160
	toolResultMax = 160
	// conflictValueMax clips each value of a merge conflict.
	conflictValueMax = 120
	// stepCardsOpen is how many cards a group shows unfolded; a group of
	// more folds its cards under its table.
	stepCardsOpen = 3
)

// docStep is the part of a document strategy one attempt was.
type docStep struct {
	// Kind is the step kind (fixpoint.StepKind), Label what the card's
	// title says: "Chunk 3", "Merge", "Repair", "Agent turn 2".
	Kind, Label string
	// Chunk is the chunk a chunk step read, nil for the other kinds.
	Chunk *fixpoint.ChunkRef
	// NoCall: a merge made without a merge model (no tokens, no cost).
	NoCall bool
	// Conflicts are a merge step's conflicts; Tools an agent turn's calls.
	Conflicts []conflictView
	Tools     []toolView
}

// conflictView is one place where the chunks' values disagreed.
type conflictView struct {
	Path   string
	Values []conflictValue
	// By is what decided the choice when the count did not
	// (fixpoint.ConflictByGrounding), "" otherwise.
	By string
}

// conflictValue is one value given at a conflict's place: compact JSON
// (clipped), the chunks that gave it, and whether the merge chose it.
type conflictValue struct {
	Value, Chunks string
	Chosen        bool
}

// toolView is one tool call of an agent turn: its name, its arguments
// (clipped), and how its result went: Result is "ok", "error", or ""
// when no later request answered it (the job's last turn, or only the
// requests' hashes kept); ResultText is the result's text, clipped.
type toolView struct {
	Name, Args         string
	Clipped            bool
	Result, ResultText string
}

// toolResult is what a tool turn of a request said of one call.
type toolResult struct {
	IsError bool
	Content string
}

// stepInput is what an attempt holds of its document step, from the
// ledger (store.Attempt) or from a try (fixpoint.Attempt).
type stepInput struct {
	Kind      fixpoint.StepKind
	Chunk     *fixpoint.ChunkRef
	ToolCalls []fixpoint.ToolCall
	Conflicts []fixpoint.Conflict
	// Request is the attempt's request (its messages as JSON), for the
	// results of the previous turn's tool calls; nil when not kept.
	Request json.RawMessage
	// NoCall: the attempt made no provider call (a deterministic merge).
	NoCall bool
}

// noCall says a step made no provider call: a deterministic merge has
// no request, no reply and no tokens (pipeline.IsCall, which the
// dashboard does not link, says the same).
func noCall(kind string, tokens int64, raw, requestHash string) bool {
	return kind == string(fixpoint.StepMerge) && tokens == 0 && raw == "" && requestHash == ""
}

// docSteps are the steps of a run's attempts, in order; nil when no
// attempt is a document step (a job of another strategy). An agent
// turn's tool results are read from the requests that followed it.
func docSteps(in []stepInput) []*docStep {
	has := false
	for _, s := range in {
		has = has || s.Kind != ""
	}
	if !has {
		return nil
	}
	results := map[string]toolResult{}
	for _, s := range in {
		requestToolResults(s.Request, results)
	}
	steps := make([]*docStep, len(in))
	turn := 0
	passes := chunkPasses{}
	for i, s := range in {
		if s.Kind == "" {
			continue
		}
		st := &docStep{Kind: string(s.Kind), Chunk: s.Chunk, NoCall: s.NoCall}
		switch s.Kind {
		case fixpoint.StepChunk:
			st.Label = "Chunk"
			if s.Chunk != nil {
				st.Label = "Chunk " + strconv.Itoa(s.Chunk.N)
				if k := passes.of(s.Chunk); k > 0 {
					st.Label += ", list pass " + strconv.Itoa(k)
				}
			}
		case fixpoint.StepMerge:
			st.Label = "Merge"
			st.Conflicts = conflictViews(s.Conflicts)
		case fixpoint.StepRepair:
			st.Label = "Repair"
		case fixpoint.StepAgent:
			turn++
			st.Label = "Agent turn " + strconv.Itoa(turn)
			st.Tools = toolViews(s.ToolCalls, results)
		default:
			st.Label = string(s.Kind)
		}
		steps[i] = st
	}
	return steps
}

// chunkPasses tells a chunk's list passes apart from its own attempts:
// the ledger keeps a pass as a chunk attempt whose range starts later in
// the chunk (repair/chunked_passes.go), after the chunk's own. It holds,
// by chunk number, the starts seen, the chunk's own first.
type chunkPasses map[int][]int

// of is the list pass an attempt over ref is of, 1 for the first; 0 for
// the chunk's own attempts.
func (p chunkPasses) of(ref *fixpoint.ChunkRef) int {
	starts := p[ref.N]
	if i := slices.Index(starts, ref.Start); i >= 0 {
		return i
	}
	p[ref.N] = append(starts, ref.Start)
	return len(starts)
}

// requestToolResults adds the tool turns of a request (a JSON array of
// fixpoint.Message) to results, by the id of the call each answers. A
// request that does not read is skipped: its calls show no result.
func requestToolResults(raw json.RawMessage, results map[string]toolResult) {
	if len(raw) == 0 {
		return
	}
	var msgs []fixpoint.Message
	if json.Unmarshal(raw, &msgs) != nil {
		return
	}
	for _, m := range msgs {
		if m.Role == fixpoint.RoleTool && m.ToolCallID != "" {
			results[m.ToolCallID] = toolResult{IsError: m.IsError, Content: m.Content}
		}
	}
}

func toolViews(calls []fixpoint.ToolCall, results map[string]toolResult) []toolView {
	out := make([]toolView, len(calls))
	for i, c := range calls {
		v := toolView{Name: c.Name}
		v.Args, v.Clipped = clip(compactJSON(c.Arguments), toolArgsMax)
		if r, ok := results[c.ID]; ok && c.ID != "" {
			v.Result = "ok"
			if r.IsError {
				v.Result = "error"
			}
			v.ResultText, _ = clip(r.Content, toolResultMax)
		}
		out[i] = v
	}
	return out
}

func conflictViews(cs []fixpoint.Conflict) []conflictView {
	out := make([]conflictView, len(cs))
	for i, c := range cs {
		v := conflictView{Path: c.Path, By: c.By}
		chosen := compactJSON(string(c.Chosen))
		for j, val := range c.Values {
			text := compactJSON(string(val))
			cv := conflictValue{Chosen: text == chosen}
			cv.Value, _ = clip(text, conflictValueMax)
			if j < len(c.Chunks) {
				cv.Chunks = chunkList(c.Chunks[j])
			}
			v.Values = append(v.Values, cv)
		}
		out[i] = v
	}
	return out
}

// chunkList writes chunk numbers as "chunk 2" or "chunks 0, 3, 7".
func chunkList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(ns) == 1 {
		return "chunk " + s[0]
	}
	return "chunks " + strings.Join(s, ", ")
}

// compactJSON is s compacted when it is JSON, else s as it is (a model's
// arguments need not be JSON).
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// clip cuts s to at most n characters (never inside a UTF-8 sequence),
// an ellipsis marking the cut; clipped says it was cut.
func clip(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k] + "…", true
		}
		i++
	}
	return s, false
}

// toolError is the first refused tool call of an agent turn, as its
// table row's error says it: "update_output: the result's text"; "" for
// none (and for no step).
func (st *docStep) toolError() string {
	if st == nil {
		return ""
	}
	for _, t := range st.Tools {
		if t.Result == "error" {
			return t.Name + ": " + t.ResultText
		}
	}
	return ""
}

// stepRow is one attempt in its group's table.
type stepRow struct {
	Anchor string
	No     int
	Step   *docStep
	// Badge is "valid", the attempt's class, or what a step of neither
	// is (stepBadge); Class the attempt's class, Valid as the attempt's.
	Badge, Class                   string
	Valid                          bool
	LatencyMS, TokensIn, TokensOut int64
	CostUSD                        float64
	// Errors counts the attempt's validation errors; FirstError is the
	// first one's message.
	Errors     int
	FirstError string
	// Fields counts the strings, numbers and booleans of a step's value
	// (the ledger's count), nil when unknown.
	Fields *int
}

// stepGroup is a run of attempts of one step kind, in order, and their
// totals: the chunk calls of a parallel job, its merge, its repairs.
type stepGroup struct {
	Kind, Title string
	// First and Last are the first and last card's index in the run's
	// cards: the group's cards are cards[First:Last+1].
	First, Last int
	Rows        []stepRow
	// Calls counts the rows that made a provider call; Valid the valid
	// ones.
	Calls, Valid        int
	TokensIn, TokensOut int64
	CostUSD             float64
	// Classes counts the failure classes of the group's attempts.
	Classes []classCount
}

// classCount is how many attempts of a group failed with one class.
type classCount struct {
	Class string
	N     int
}

// HasFields says some row knows its value's field count.
func (g stepGroup) HasFields() bool {
	for _, r := range g.Rows {
		if r.Fields != nil {
			return true
		}
	}
	return false
}

// Fold says the group's cards are folded under its table.
func (g stepGroup) Fold() bool { return len(g.Rows) > stepCardsOpen }

// Summary says what the group did, in one line.
func (g stepGroup) Summary() string {
	var parts []string
	switch {
	case g.Calls == 0:
		parts = append(parts, "no call")
	default:
		parts = append(parts, fmt.Sprintf("%d call%s", g.Calls, plural(g.Calls)))
	}
	parts = append(parts, fmt.Sprintf("%d valid", g.Valid))
	for _, c := range g.Classes {
		parts = append(parts, fmt.Sprintf("%d %s", c.N, c.Class))
	}
	return strings.Join(parts, " · ")
}

// stepBadge is what the badge of an attempt that is neither valid nor
// failed says: an agent turn that went on (its calls made, no finish
// yet), or another step's value the check did not take.
func stepBadge(st *docStep) string {
	if st != nil && st.Kind == string(fixpoint.StepAgent) {
		return "turn"
	}
	return "invalid"
}

// stepGroups groups rows (one per card, in order; a row of no step is of
// kind "") into runs of one kind.
func stepGroups(rows []stepRow) []stepGroup {
	var groups []stepGroup
	for i, r := range rows {
		kind := ""
		if r.Step != nil {
			kind = r.Step.Kind
		}
		if len(groups) == 0 || groups[len(groups)-1].Kind != kind {
			groups = append(groups, stepGroup{Kind: kind, Title: groupTitle(kind), First: i})
		}
		g := &groups[len(groups)-1]
		g.Last = i
		g.Rows = append(g.Rows, r)
		if r.Step == nil || !r.Step.NoCall {
			g.Calls++
		}
		if r.Valid {
			g.Valid++
		} else if r.Class != "" {
			g.addClass(r.Class)
		}
		g.TokensIn += r.TokensIn
		g.TokensOut += r.TokensOut
		g.CostUSD += r.CostUSD
	}
	return groups
}

func (g *stepGroup) addClass(class string) {
	for i := range g.Classes {
		if g.Classes[i].Class == class {
			g.Classes[i].N++
			return
		}
	}
	g.Classes = append(g.Classes, classCount{Class: class, N: 1})
}

func groupTitle(kind string) string {
	switch fixpoint.StepKind(kind) {
	case fixpoint.StepChunk:
		return "Chunks"
	case fixpoint.StepMerge:
		return "Merge"
	case fixpoint.StepRepair:
		return "Repair"
	case fixpoint.StepAgent:
		return "Agent turns"
	case "":
		return "Calls"
	}
	return kind
}
