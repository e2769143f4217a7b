package llm

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// Ollama /api/chat wire types (only the fields we send or read).

type olRequest struct {
	Model    string          `json:"model"`
	Messages []olMessage     `json:"messages"`
	Stream   bool            `json:"stream"`
	Format   json.RawMessage `json:"format,omitempty"`
	Tools    []oaTool        `json:"tools,omitempty"`
	Options  *olOptions      `json:"options,omitempty"`
}

// olMessage is a turn. A tool result names its tool, not its call:
// Ollama has no call ids.
type olMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	ToolCalls []olToolCall `json:"tool_calls,omitempty"`
	ToolName  string       `json:"tool_name,omitempty"`
}

type olToolCall struct {
	Function olCallFunction `json:"function"`
}

type olCallFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type olOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
}

type olResponse struct {
	Model   string `json:"model"`
	Message struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			// ID is sent by no Ollama we know of; one that did would
			// be taken.
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool       `json:"done"`
	DoneReason      string     `json:"done_reason"`
	PromptEvalCount tokenCount `json:"prompt_eval_count"`
	EvalCount       tokenCount `json:"eval_count"`
}

// usage is w's usage as fixpoint counts it, and the counts that could not
// be read.
func (w *olResponse) usage() (fixpoint.Usage, string) {
	return fixpoint.Usage{InputTokens: w.PromptEvalCount.n, OutputTokens: w.EvalCount.n},
		unreadCounts(namedCount{"prompt_eval_count", w.PromptEvalCount}, namedCount{"eval_count", w.EvalCount})
}

// encodeOllama builds the /api/chat body: stream false; in ModeJSONSchema
// format is the full schema (Ollama ignores keywords its grammar does not
// support); ModePrompt sends no format, so the answer is parsed from text
// as with every provider. ModeTool offers one tool; Ollama cannot force a
// tool call, so a text answer is returned as text. Request.Tools are
// offered the same way: a ToolChoice cannot be sent.
func (c *Client) encodeOllama(req *fixpoint.Request) ([]byte, error) {
	w := olRequest{Model: req.Model, Stream: false}
	w.Messages = make([]olMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		w.Messages = append(w.Messages, olMessage{Role: "system", Content: req.System})
	}
	names := map[string]string{} // call id -> tool name
	for i, m := range req.Messages {
		o := olMessage{Role: m.Role, Content: m.Content}
		if m.Role == fixpoint.RoleTool {
			o.Content, o.ToolName = toolResultText(m), names[m.ToolCallID]
		}
		for _, tc := range m.ToolCalls {
			if err := tc.CheckArguments(); err != nil {
				return nil, fmt.Errorf("messages[%d]: %w (Ollama takes a call's arguments as an object only)", i, err)
			}
			names[tc.ID] = tc.Name
			o.ToolCalls = append(o.ToolCalls, olToolCall{Function: olCallFunction{Name: tc.Name, Arguments: json.RawMessage(tc.Arguments)}})
		}
		w.Messages = append(w.Messages, o)
	}
	for _, t := range req.Tools {
		w.Tools = append(w.Tools, oaTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	switch req.Mode {
	case fixpoint.ModeJSONSchema:
		w.Format = req.Schema
	case fixpoint.ModeTool:
		w.Tools = []oaTool{{Type: "function", Function: oaFunction{
			Name: schemaName(req), Description: toolDescription, Parameters: req.Schema}}}
	}
	if req.Temperature != nil || req.MaxTokens > 0 {
		w.Options = &olOptions{Temperature: req.Temperature, NumPredict: req.MaxTokens}
	}
	return json.Marshal(&w)
}

// decodeOllama reads a 2xx /api/chat body.
func decodeOllama(body []byte, req *fixpoint.Request, out *fixpoint.Response) error {
	var w olResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("decode chat: %w", briefDecodeError(err))
	}
	if !w.Done {
		return fmt.Errorf("decode chat: done is false (streamed reply?)")
	}
	out.Model = w.Model
	out.Text = w.Message.Content
	switch w.DoneReason {
	case "stop", "":
		out.FinishReason = fixpoint.FinishStop
	case "length":
		out.FinishReason = fixpoint.FinishLength
	default:
		out.FinishReason = fixpoint.FinishReason(w.DoneReason)
	}
	if calls := w.Message.ToolCalls; len(req.Tools) > 0 && len(calls) > 0 {
		turn := assistantTurns(req)
		out.ToolCalls = make([]fixpoint.ToolCall, len(calls))
		for i, c := range calls {
			id := c.ID
			if id == "" {
				id = ollamaCallID(turn, i)
			}
			out.ToolCalls[i] = fixpoint.ToolCall{ID: id, Name: c.Function.Name, Arguments: toolArguments(c.Function.Arguments)}
		}
		if out.FinishReason == fixpoint.FinishStop {
			out.FinishReason = fixpoint.FinishTool
		}
	} else if len(calls) > 0 {
		i := -1 // a call of another function is not the answer
		for j := range calls {
			if calls[j].Function.Name == schemaName(req) {
				i = j
				break
			}
		}
		if i >= 0 {
			out.Text = toolArguments(calls[i].Function.Arguments)
			if out.FinishReason == fixpoint.FinishStop {
				out.FinishReason = fixpoint.FinishTool
			}
		}
	}
	out.Usage, out.UsageAnomaly = w.usage()
	normalizeRefusal(out)
	return nil
}
