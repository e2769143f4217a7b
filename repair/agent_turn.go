package repair

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/merge"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// turnOut is what one turn of the agent came to.
type turnOut struct {
	// messages are the turn's assistant message and the tool results (or
	// the nudge) that answer it.
	messages []fixpoint.Message
	// errors are those of the calls refused, class their class.
	errors []fixpoint.ValidationError
	class  string
	// warnings and evidence are a finish's.
	warnings []fixpoint.ValidationError
	evidence []fixpoint.Grounding
	// feedback is the correction sent: the refused calls' results, or the
	// nudge.
	feedback string
	// end, when set, makes the job final.
	end *agentEnd
}

type agentEnd struct {
	status fixpoint.Status
	class  string
	msg    string
}

// The results a tool gives when it runs.
const (
	resultSet     = "ok: the output is set"
	resultUpdated = "ok: the output is updated"
	resultNotRun  = "not run: the run ended at an earlier call of this turn"
)

// runTurn runs one reply: its tool calls in order, or, with none, a nudge.
// It changes the run's value and counts; it is the same for a reply fed
// now and one replayed from the ledger.
func (m *agent) runTurn(text string, calls []fixpoint.ToolCall, finish fixpoint.FinishReason) turnOut {
	if len(calls) == 0 {
		return m.nudge(text, finish)
	}
	m.nudges = 0 // the limit is on text answers in a row
	calls = withCallIDs(calls, m.turns)
	out := turnOut{messages: []fixpoint.Message{{Role: fixpoint.RoleAssistant, Content: text, ToolCalls: sendableCalls(calls)}}}
	var refusals []string
	for _, c := range calls {
		var content string
		var errs []fixpoint.ValidationError
		switch {
		case out.end != nil:
			content = resultNotRun
		case finish == fixpoint.FinishLength:
			errs = []fixpoint.ValidationError{{Keyword: "truncated", Class: fixpoint.ClassSyntax,
				Message: fmt.Sprintf("call %s (%s) was not run: the reply was cut at the output token limit; make smaller calls (update_output with a part of the value)", c.ID, c.Name)}}
		default:
			content, errs = m.runCall(c, &out)
		}
		if len(errs) > 0 {
			content = toolErrorText(c.Name, errs)
			refusals = append(refusals, content)
			out.errors = append(out.errors, errs...)
		}
		out.messages = append(out.messages, fixpoint.Message{Role: fixpoint.RoleTool, ToolCallID: c.ID, Content: content, IsError: len(errs) > 0})
	}
	if finish == fixpoint.FinishLength {
		out.class = fixpoint.OutcomeTruncated
	} else if len(out.errors) > 0 {
		out.class = string(validate.ClassOf(out.errors))
	}
	out.feedback = strings.Join(refusals, "\n\n")
	return out
}

// nudge answers a reply with no tool call: a user turn asking for one,
// up to fixpoint.NudgesMax times in a row, then the end of the run. A
// long run may answer text now and then; one that answers nothing else
// is stuck.
func (m *agent) nudge(text string, finish fixpoint.FinishReason) turnOut {
	m.nudges++
	shown := text
	if shown == "" {
		shown = "(empty reply)"
	}
	msg := "Answer with tool calls only: read the document with read_chunk or search, build the output with set_output and update_output, and call finish when it is complete (or fail if the task cannot be done)."
	if finish == fixpoint.FinishLength {
		msg = "Your reply was cut at the output token limit. " + msg
	}
	e := fixpoint.ValidationError{Keyword: "tool_call", Class: fixpoint.ClassSyntax,
		Message: "the reply called no tool: the agent answers with tool calls only"}
	out := turnOut{errors: []fixpoint.ValidationError{e}, class: string(fixpoint.ClassSyntax), feedback: msg,
		messages: []fixpoint.Message{{Role: fixpoint.RoleAssistant, Content: shown}, {Role: fixpoint.RoleUser, Content: msg}}}
	if finish == fixpoint.FinishLength {
		out.class = fixpoint.OutcomeTruncated
	}
	if m.nudges > fixpoint.NudgesMax {
		out.end = &agentEnd{status: fixpoint.StatusInvalid, class: out.class,
			msg: fmt.Sprintf("the model answered with text instead of a tool call %d times in a row", m.nudges)}
	}
	return out
}

// withCallIDs gives a call without an id one, stable for the turn, so
// that its result can name it.
func withCallIDs(calls []fixpoint.ToolCall, turn int) []fixpoint.ToolCall {
	out := calls
	for i, c := range calls {
		if c.ID == "" {
			if &out[0] == &calls[0] {
				out = append([]fixpoint.ToolCall(nil), calls...)
			}
			out[i].ID = "fixpoint_call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(i)
		}
	}
	return out
}

// sendableCalls are calls as the conversation sends them back: a call
// whose arguments are no JSON object goes with {} (Anthropic's and
// Ollama's tool calls take objects only); its result quotes what they
// were.
func sendableCalls(calls []fixpoint.ToolCall) []fixpoint.ToolCall {
	out := calls
	for i, c := range calls {
		if c.CheckArguments() != nil {
			if &out[0] == &calls[0] {
				out = append([]fixpoint.ToolCall(nil), calls...)
			}
			out[i].Arguments = "{}"
		}
	}
	return out
}

// toolErrorText is the content of a refused call's result.
func toolErrorText(tool string, errs []fixpoint.ValidationError) string {
	var lead string
	switch tool {
	case fixpoint.ToolSetOutput, fixpoint.ToolUpdateOutput:
		lead = "refused: the output is unchanged. Fix every error below and call " + tool + " again:\n"
	case fixpoint.ToolFinish:
		lead = "refused: the output does not pass the checks yet. Fix every error below (set_output or update_output), then call finish again:\n"
	default:
		lead = "refused:\n"
	}
	return strings.TrimRight(lead+textErrors(errs), "\n")
}

// callError is the error of a call refused for its arguments or its use.
func callError(c fixpoint.ToolCall, format string, args ...any) []fixpoint.ValidationError {
	return []fixpoint.ValidationError{{Keyword: "tool_call", Class: fixpoint.ClassSyntax,
		Message: fmt.Sprintf("call %s (%s): ", c.ID, c.Name) + fmt.Sprintf(format, args...)}}
}

// runCall runs one call: its result's content, or the errors that refuse
// it. A finish that passes, a fail, and the last finish refused end the
// run (out.end).
func (m *agent) runCall(c fixpoint.ToolCall, out *turnOut) (string, []fixpoint.ValidationError) {
	if err := c.CheckArguments(); err != nil && c.Name != fixpoint.ToolFinish {
		return "", []fixpoint.ValidationError{{Keyword: "tool_call", Class: fixpoint.ClassSyntax, Message: err.Error()}}
	}
	switch c.Name {
	case fixpoint.ToolSetOutput:
		return m.setOutput(c.Arguments, false)
	case fixpoint.ToolUpdateOutput:
		return m.setOutput(c.Arguments, true)
	case fixpoint.ToolReadChunk:
		n, ok := chunkArg(c.Arguments)
		if !ok {
			return "", callError(c, "want {\"n\": a chunk number, 0 to %d}", len(m.chunks)-1)
		}
		if n < 0 || n >= len(m.chunks) {
			return "", callError(c, "no chunk %d: the document has chunks 0 to %d", n, len(m.chunks)-1)
		}
		return chunkText(m.chunks, n), nil
	case fixpoint.ToolSearch:
		var args struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Text) == "" {
			return "", callError(c, "want {\"text\": the text to find, not empty}")
		}
		return searchDocument(m.step.job.Document, m.chunks, args.Text), nil
	case fixpoint.ToolFinish:
		return m.finish(out)
	case fixpoint.ToolFail:
		var args struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal([]byte(c.Arguments), &args)
		reason := strings.TrimSpace(args.Reason)
		if reason == "" {
			reason = "(no reason given)"
		}
		out.end = &agentEnd{status: fixpoint.StatusInvalid, class: fixpoint.OutcomeRefusal, msg: "the agent gave up: " + reason}
		return "ok: the run ends", nil
	}
	return "", callError(c, "no tool named %q: the tools are %s", c.Name, strings.Join(agentToolNames, ", "))
}

// chunkArg reads read_chunk's chunk number: an integer, also written as
// 2.0 or "2", as models write numbers.
func chunkArg(args string) (int, bool) {
	var a struct {
		N json.RawMessage `json:"n"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || len(a.N) == 0 {
		return 0, false
	}
	text := strings.Trim(string(a.N), `"`)
	f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1e9 {
		return 0, false
	}
	return int(f), true
}

// setOutput runs set_output (the arguments are the value) or
// update_output (they are merged into it; see mergeUpdate), checking the
// arguments, then the value that would result, against the partial
// schema (the full one under Limits.Strict), with the job's coercions.
// An item of a keyed list without its key is refused too (see
// unkeyedItems).
func (m *agent) setOutput(args string, update bool) (string, []fixpoint.ValidationError) {
	coerce := Coercer(m.step.lim.Coerce)
	// The arguments are checked first, so that the errors point into them.
	check := validate.CheckWith(m.partial, args, validate.CheckOptions{Coerce: coerce})
	if !check.Valid {
		return "", check.Errors
	}
	if errs := unkeyedItems(m.keyed, check.Value); len(errs) > 0 {
		return "", errs
	}
	value := check.Value
	if update && m.hasValue {
		merged, err := mergeUpdate(m.step.job.Schema, m.value, value)
		if err != nil {
			return "", []fixpoint.ValidationError{{Keyword: "merge", Class: fixpoint.ClassShape, Message: "the update cannot be merged into the output: " + err.Error()}}
		}
		// What only the whole can break (a bound on a list's length, a
		// uniqueness) is checked on the merged value.
		if errs := m.partial.Validate(merged); len(errs) > 0 {
			return "", errs
		}
		value = merged
	}
	m.value, m.hasValue = value, true
	msg := resultSet
	if update {
		msg = resultUpdated
	}
	if missing := missingRequired(m.step.job.Schema.Validate(m.value)); missing != "" {
		msg += "; before finish, the schema still requires " + missing
	}
	return msg, nil
}

// missingRequiredMax bounds the places missingRequired names.
const missingRequiredMax = 10

// missingRequired names the places of errs that are missing properties.
func missingRequired(errs []fixpoint.ValidationError) string {
	var ps []string
	for _, e := range errs {
		if e.Keyword == "required" && len(ps) < missingRequiredMax {
			ps = append(ps, pointerOrRoot(e.Path))
		}
	}
	return strings.Join(ps, ", ")
}

// finish checks the value against the full schema and the job's checks
// (rules, evidence over the whole document), as Step checks a reply. It
// passes, or is refused; the last refusal the limits allow ends the run
// invalid with its errors. An error inside an item of a keyed list names
// the item by its key too (keyNote).
func (m *agent) finish(out *turnOut) (string, []fixpoint.ValidationError) {
	var errs []fixpoint.ValidationError
	if !m.hasValue {
		errs = []fixpoint.ValidationError{{Keyword: "required", Class: fixpoint.ClassShape,
			Message: "(root): no output is set: call set_output with the value first"}}
	} else if errs = m.step.job.Schema.Validate(m.value); len(errs) == 0 {
		t := m.step.job.Checks().Check(m.value)
		out.warnings, out.evidence, errs = t.Warnings, t.Evidence, t.Errors
	}
	if len(errs) == 0 {
		out.end = &agentEnd{status: fixpoint.StatusValid}
		return "ok: the output is accepted; the run ends", nil
	}
	if m.hasValue {
		errs = slices.Clone(errs)
		for i := range errs {
			errs[i].Message += keyNote(m.keyed, m.value, errs[i].Path)
		}
	}
	m.refused++
	if lim := m.step.lim.MaxValidationAttempts; m.refused >= lim {
		a := fixpoint.Attempt{Class: string(validate.ClassOf(errs)), Errors: errs}
		out.end = &agentEnd{status: fixpoint.StatusInvalid, class: a.Class,
			msg: fmt.Sprintf("finish refused %d times, the limit: %s", m.refused, attemptError(&a))}
	}
	return "", errs
}

// mergeUpdate merges upd, an update_output's arguments, into cur by
// package merge's rules (cur the earlier chunk), except that where the
// two disagree the update's value wins: objects merge by property, list
// items are appended, an item with the key of one already listed is
// merged into it, and a null or absent property changes nothing.
func mergeUpdate(schema *validate.Schema, cur, upd any) (any, error) {
	merged, conflicts, err := merge.Values(schema, []merge.ChunkValue{{Chunk: 0, Value: cur}, {Chunk: 1, Value: upd}}, merge.Options{})
	if err != nil {
		return nil, err
	}
	for _, c := range conflicts {
		for i, chunks := range c.Chunks {
			if !slices.Contains(chunks, 1) {
				continue
			}
			v := any(c.Values[i])
			if raw, ok := v.(json.RawMessage); ok {
				// A conflict may carry its values as JSON.
				if v, err = decodeValue(raw); err != nil {
					return nil, err
				}
			}
			merged = setPointer(merged, c.Path, v)
		}
	}
	return merged, nil
}

// setPointer sets the value at ptr, a JSON pointer to a place that exists
// in root, and returns root (v itself for the root).
func setPointer(root any, ptr string, v any) any {
	if ptr == "" {
		return v
	}
	toks := strings.Split(ptr[1:], "/")
	cur := root
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				x[tok] = v
				return root
			}
			cur = x[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(x) {
				return root
			}
			if last {
				x[n] = v
				return root
			}
			cur = x[n]
		default:
			return root
		}
	}
	return root
}
