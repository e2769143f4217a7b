package llm

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// maxToolName is the longest tool name OpenAI and Anthropic both accept.
const maxToolName = 64

// checkTools says what is wrong with the tools a request offers and the
// tool turns of its conversation, "" when nothing is: each provider
// refuses such a request with a 400 whose message names a wire field
// rather than the request's.
func checkTools(req *fixpoint.Request) string {
	if len(req.Tools) > 0 && req.Mode != "" && req.Mode != fixpoint.ModePrompt {
		return fmt.Sprintf("tools are offered with mode prompt only; mode %s sends a tool of its own, made of the schema", req.Mode)
	}
	if len(req.Tools) == 0 && req.ToolChoice != (fixpoint.ToolChoice{}) {
		return "tool_choice is set but no tools are offered"
	}
	seen := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		if why := badToolName(t.Name); why != "" {
			return fmt.Sprintf("tools[%d]: name %s", i, why)
		}
		if seen[t.Name] {
			return fmt.Sprintf("tools[%d]: name %q is offered twice", i, t.Name)
		}
		seen[t.Name] = true
		if p := bytes.TrimSpace(t.Parameters); len(p) == 0 || p[0] != '{' || !json.Valid(p) {
			return fmt.Sprintf("tools[%d] (%s): parameters must be a JSON Schema object", i, t.Name)
		}
	}
	if n := req.ToolChoice.Name; n != "" && !seen[n] {
		return fmt.Sprintf("tool_choice names %q, which is not among the tools offered", n)
	}
	calls := map[string]bool{}
	for i, m := range req.Messages {
		switch {
		case m.Role == fixpoint.RoleTool:
			if m.ToolCallID == "" {
				return fmt.Sprintf("messages[%d]: a tool result needs tool_call_id", i)
			}
			if !calls[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: tool result for %q, a call no earlier assistant turn made", i, m.ToolCallID)
			}
		case len(m.ToolCalls) > 0 && m.Role != fixpoint.RoleAssistant:
			return fmt.Sprintf("messages[%d]: only an assistant turn makes tool calls, not a %s turn", i, m.Role)
		case m.ToolCallID != "" || m.IsError:
			return fmt.Sprintf("messages[%d]: tool_call_id and is_error belong to a tool result (role %q), not a %s turn", i, fixpoint.RoleTool, m.Role)
		}
		for j, c := range m.ToolCalls {
			if c.ID == "" {
				return fmt.Sprintf("messages[%d].tool_calls[%d] (%s): the call has no id", i, j, c.Name)
			}
			if c.Name == "" {
				return fmt.Sprintf("messages[%d].tool_calls[%d] (%s): the call has no name", i, j, c.ID)
			}
			if calls[c.ID] {
				return fmt.Sprintf("messages[%d].tool_calls[%d]: id %q is used twice", i, j, c.ID)
			}
			calls[c.ID] = true
		}
	}
	return ""
}

// badToolName says why name is not a tool name, "" when it is one.
func badToolName(name string) string {
	if name == "" || len(name) > maxToolName {
		return fmt.Sprintf("%q must be 1 to %d characters", name, maxToolName)
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '_', b == '-':
		default:
			return fmt.Sprintf("%q has %q: only letters, digits, '_' and '-' are allowed", name, b)
		}
	}
	return ""
}

// hasToolTurns reports whether req's conversation holds tool calls or
// results, which the plain message shapes cannot carry.
func hasToolTurns(req *fixpoint.Request) bool {
	for _, m := range req.Messages {
		if len(m.ToolCalls) > 0 || m.Role == fixpoint.RoleTool {
			return true
		}
	}
	return false
}

// toolResultText is a tool result's content for a wire format with no
// error flag (OpenAI, Ollama): an error says so in its first word.
func toolResultText(m fixpoint.Message) string {
	if m.IsError {
		return "Error: " + m.Content
	}
	return m.Content
}

// ollamaCallID is the id given to call i of an Ollama reply to a
// conversation holding turn assistant turns: Ollama sends none, and this
// one is the same each time the conversation is asked again and unique
// within it.
func ollamaCallID(turn, i int) string {
	return "ollama_call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(i)
}

// assistantTurns counts the assistant turns of req's conversation.
func assistantTurns(req *fixpoint.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == fixpoint.RoleAssistant {
			n++
		}
	}
	return n
}
