package sim

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// ncall is a tool call of an assistant turn, normalized across wire
// formats (Ollama's have no id).
type ncall struct {
	id, name, args string
}

// nresult is a tool result, normalized across wire formats: OpenAI's
// and Ollama's tool turns, Anthropic's tool_result blocks. OpenAI and
// Ollama have no error flag: a result is an error there when its content
// starts with "Error" (package llm writes "Error: " before an error's).
type nresult struct {
	id, name, content string
	isError           bool
}

// agentReq is what an agent request (one that offers set_output) offers.
type agentReq struct {
	// params are set_output's parameters: the schema of the value when
	// the system prompt holds none between the schema markers.
	params []byte
	// choice is "" (auto), "required", or the tool the model must call.
	choice string
	// toolBytes is the size of the tools' definitions, part of the prompt.
	toolBytes int
}

// resultIsError reports whether a tool result's content says it is an
// error, on a wire format without the flag.
func resultIsError(content string) bool {
	return len(content) >= 5 && strings.EqualFold(content[:5], "error")
}

// agentTool reports whether a tool of this name makes a request an agent
// request.
func agentTool(name string) bool { return name == fixpoint.ToolSetOutput }

// agentText is what the agent says when it has nothing left to call.
const (
	agentDoneText   = "The output is set and finished."
	agentFailedText = "I could not complete the task."
)

// agentTurn is what the agent does on one request.
type agentTurn struct {
	plan  plan
	text  string
	calls []ncall // ids are given when the reply is rendered
	// truncated is set when the reply was cut at max tokens: a text cut
	// short, or a set_output whose arguments are.
	truncated bool
}

// agentModel decides an agent request's reply. The value comes from the
// model that answers prompt-mode requests, asked as if each set_output
// were the reply and the tool results and user turns after it the
// correction: a first turn calls set_output with the first attempt's
// value (its content faults in it) and finish at once, in one reply; a
// turn after results with errors calls them again with the corrected
// value; a turn after a finish that succeeded says it is done. A first
// attempt with a prose fault answers the JSON as text instead of calling
// a tool (unless the request requires a call), a refusal calls fail, a
// truncation cuts set_output's arguments. A request over a document that
// is not in it is answered by the reader (readerModel).
func (s *Server) agentModel(r *chatReq) agentTurn {
	if done, text := agentFinished(r.msgs); done {
		return agentTurn{plan: plan{turn: countRole(r.msgs, "assistant")}, text: text}
	}
	if s.isReader(r) {
		return s.readerModel(r)
	}
	mr := *r
	mr.agent, mr.schema = nil, nil
	if promptSchema(r) == nil {
		mr.schema = r.agent.params
	}
	mr.msgs = agentConversation(r.msgs)
	p := s.model(&mr)
	r.schemaInPrompt = mr.schemaInPrompt
	t := agentTurn{plan: p}
	value := func() string {
		if p.value == nil {
			return "{}"
		}
		return string(encode(p.value, encOpts{}))
	}
	choice := r.agent.choice
	switch {
	case choice == fixpoint.ToolFinish:
		t.calls = []ncall{{name: fixpoint.ToolFinish, args: "{}"}}
	case choice == fixpoint.ToolFail || (choice == "" || choice == "required") && p.outcome == FaultRefusal:
		t.calls = []ncall{{name: fixpoint.ToolFail, args: string(encode(map[string]any{"reason": RefusalText}, encOpts{}))}}
	case choice != "" && choice != "required" && choice != fixpoint.ToolSetOutput:
		t.calls = []ncall{{name: choice, args: "{}"}}
	case p.outcome == FaultTruncation:
		t.calls, t.truncated = []ncall{{name: fixpoint.ToolSetOutput, args: p.text}}, true
	case choice == "" && (p.outcome == FaultEmpty || !p.isJSON || hasFault(p.formats, FaultProse)):
		t.text = p.text
	case choice == fixpoint.ToolSetOutput:
		t.calls = []ncall{{name: fixpoint.ToolSetOutput, args: value()}}
	default:
		t.calls = []ncall{{name: fixpoint.ToolSetOutput, args: value()}, {name: fixpoint.ToolFinish, args: "{}"}}
	}
	return t
}

func hasFault(ks []FaultKind, k FaultKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func countRole(msgs []nmsg, role string) int {
	n := 0
	for _, m := range msgs {
		if m.role == role {
			n++
		}
	}
	return n
}

// agentFinished reports whether the last assistant turn ended the run (a
// finish whose result is no error, or a fail) and what the agent says if
// asked again.
func agentFinished(msgs []nmsg) (bool, string) {
	last := -1
	for i, m := range msgs {
		if m.role == "assistant" {
			last = i
		}
	}
	if last < 0 {
		return false, ""
	}
	for _, c := range msgs[last].calls {
		switch c.name {
		case fixpoint.ToolFail:
			return true, agentFailedText
		case fixpoint.ToolFinish:
			for _, m := range msgs[last+1:] {
				for _, res := range m.results {
					if !res.isError && (res.id != "" && res.id == c.id || res.id == "" && res.name == c.name) {
						return true, agentDoneText
					}
				}
			}
		}
	}
	return false, ""
}

// agentConversation is msgs as the prompt-mode model reads a
// conversation: each assistant turn's reply is the value it last set
// (its own text when it set none), and the tool results and user turns
// after it are the correction.
func agentConversation(msgs []nmsg) []nmsg {
	out := make([]nmsg, 0, len(msgs))
	lastValue := ""
	for _, m := range msgs {
		switch {
		case m.role == "assistant":
			text := m.text
			for _, c := range m.calls {
				if c.name == fixpoint.ToolSetOutput {
					lastValue = c.args
				}
			}
			if len(m.calls) > 0 {
				text = lastValue
			}
			out = append(out, nmsg{role: "assistant", text: text})
		case len(m.results) > 0:
			out = append(out, nmsg{role: "user", text: m.text})
		default:
			out = append(out, m)
		}
	}
	return out
}

// agentCallID is the id of call i of a reply: the provider's prefix, then
// a hash of the reply's id.
func agentCallID(prefix, msgID string, i int) string {
	return prefix + idFrom("call", msgID, strconv.Itoa(i))
}

// agentReply renders an agent turn in the provider's format.
func (c *call) agentReply(req *chatReq, pTok int, cu cacheUse, lr limitResult, huge bool) replyOut {
	s := c.s
	t := s.agentModel(req)
	if t.truncated && c.provider != "openai" {
		// A cut object cannot be sent as Anthropic's input or Ollama's
		// arguments: the call stays out (Anthropic sends it empty).
		t.calls[0].args = "{}"
	}
	text := t.text
	if huge {
		text += hugePad(s.cfg.HugeBytes)
	}
	n := len(text)
	for _, cl := range t.calls {
		n += len(cl.name) + len(cl.args)
	}
	cTok := tokens(n)
	think := time.Duration(0)
	if !c.batch {
		think = s.thinkTime(c.n, cTok)
	}
	msgID := idFrom("msg", t.plan.key, strconv.Itoa(t.plan.turn), text, agentCallsKey(t.calls))
	var v any
	switch c.provider {
	case "anthropic":
		out := antResponse{ID: "msg_01" + msgID, Type: "message", Role: "assistant", Model: req.model,
			Content: []any{}, StopReason: "end_turn",
			Usage: antUsage{InputTokens: pTok - cu.read - cu.write(), CacheReadInputTokens: cu.read,
				CacheCreationInputTokens: cu.write(), OutputTokens: cTok, ServiceTier: "standard"}}
		out.Usage.CacheCreation.Ephemeral5m, out.Usage.CacheCreation.Ephemeral1h = cu.write5m, cu.write1h
		if c.batch {
			out.Usage.ServiceTier = "batch"
		}
		if text != "" {
			out.Content = append(out.Content, antText{"text", text})
		}
		for i, cl := range t.calls {
			out.Content = append(out.Content, antToolUse{"tool_use", agentCallID("toolu_01", msgID, i), cl.name, json.RawMessage(cl.args)})
			out.StopReason = "tool_use"
		}
		if t.truncated {
			out.StopReason = "max_tokens"
		}
		v = out
	case "ollama":
		total := int64(think)
		out := olResponse{Model: req.model, CreatedAt: c.now.UTC().Format(time.RFC3339Nano),
			Message: olMessage{Role: "assistant", Content: text}, DoneReason: "stop", Done: true,
			TotalDuration: total, PromptEvalCount: pTok, PromptEvalDuration: total / 4, EvalCount: cTok, EvalDuration: total - total/4}
		if t.truncated {
			out.DoneReason = "length"
		} else {
			for _, cl := range t.calls {
				var tc olToolCall
				tc.Function.Name, tc.Function.Arguments = cl.name, json.RawMessage(cl.args)
				out.Message.ToolCalls = append(out.Message.ToolCalls, tc)
			}
		}
		v = out
	default:
		out := oaResponse{ID: "chatcmpl-" + msgID, Object: "chat.completion", Created: c.now.Unix(), Model: req.model,
			ServiceTier: "default", SystemFingerprint: "fp_sim" + strconv.FormatUint(s.cfg.Seed%1000, 10)}
		u := oaUsage{PromptTokens: pTok, CompletionTokens: cTok, TotalTokens: pTok + cTok}
		u.PromptTokensDetails.CachedTokens = cu.read
		out.Usage = u
		ch := oaChoice{Message: oaMessage{Role: "assistant", Annotations: []struct{}{}}, FinishReason: "stop"}
		if text != "" || len(t.calls) == 0 {
			ch.Message.Content = &text
		}
		for i, cl := range t.calls {
			tc := oaToolCall{ID: agentCallID("call_", msgID, i), Type: "function"}
			tc.Function.Name, tc.Function.Arguments = cl.name, cl.args
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, tc)
			ch.FinishReason = "tool_calls"
		}
		if t.truncated {
			ch.FinishReason = "length"
		}
		out.Choices = []oaChoice{ch}
		v = out
	}
	body, _ := json.Marshal(v)
	hdr := http.Header{}
	hdr.Set("X-Sim-Faults", faultHeader(t.plan))
	hdr.Set("X-Sim-Turn", strconv.Itoa(t.plan.turn))
	if c.provider == "openai" {
		hdr.Set("Openai-Processing-Ms", "0")
	}
	c.rateHeaders(hdr, lr)
	return replyOut{body: body, hdr: hdr, plan: t.plan, think: think, cTok: cTok}
}

func agentCallsKey(calls []ncall) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString(c.name)
		b.WriteByte(0)
		b.WriteString(c.args)
		b.WriteByte(0)
	}
	return b.String()
}

// checkToolTurns answers what the provider answers a conversation whose
// tool calls and results do not pair up: OpenAI wants every call of an
// assistant turn answered by the tool turns right after it, and each
// tool turn to answer one; Anthropic wants every tool_use answered by a
// tool_result in the next turn, and each tool_result to answer one of
// the turn before. Ollama pairs nothing (its calls have no ids).
func checkToolTurns(provider string, msgs []nmsg) *apiError {
	if provider == "ollama" {
		return nil
	}
	for i, m := range msgs {
		if m.role != "assistant" || len(m.calls) == 0 {
			for _, res := range m.results {
				ok := answersEarlier(msgs, i, res.id)
				if provider == "anthropic" {
					ok = i > 0 && msgs[i-1].role == "assistant" && hasCall(msgs[i-1].calls, res.id)
				}
				if !ok {
					if provider == "anthropic" {
						return badRequest("messages.%d.content: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, res.id)
					}
					return &apiError{status: 400, typ: "invalid_request_error", param: "messages.[" + strconv.Itoa(i) + "].role",
						msg: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."}
				}
			}
			continue
		}
		answered := map[string]bool{}
		for j := i + 1; j < len(msgs); j++ {
			if len(msgs[j].results) == 0 {
				break
			}
			for _, res := range msgs[j].results {
				answered[res.id] = true
			}
			if provider == "anthropic" {
				break
			}
		}
		var missing []string
		for _, c := range m.calls {
			if !answered[c.id] {
				missing = append(missing, c.id)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if provider == "anthropic" {
			return badRequest("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
		return &apiError{status: 400, typ: "invalid_request_error", param: "messages",
			msg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(missing, ", ")}
	}
	return nil
}

func hasCall(calls []ncall, id string) bool {
	for _, c := range calls {
		if c.id == id {
			return true
		}
	}
	return false
}

// answersEarlier reports whether the OpenAI tool turn at i follows,
// through tool turns only, an assistant turn that made call id.
func answersEarlier(msgs []nmsg, i int, id string) bool {
	for j := i - 1; j >= 0; j-- {
		if msgs[j].role == "assistant" {
			return hasCall(msgs[j].calls, id)
		}
		if len(msgs[j].results) == 0 {
			return false
		}
	}
	return false
}
