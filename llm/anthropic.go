package llm

import (
	"fmt"
	"strings"

	json "github.com/segmentio/encoding/json"
)

// Anthropic Messages wire types (only the fields we send or read).

type anRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []Message     `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	Tools       []anTool      `json:"tools,omitempty"`
	ToolChoice  *anToolChoice `json:"tool_choice,omitempty"`
	Metadata    *anMetadata   `json:"metadata,omitempty"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type anMetadata struct {
	UserID string `json:"user_id"`
}

type anResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason  string `json:"stop_reason"`
	StopDetails *struct {
		Explanation string `json:"explanation"`
	} `json:"stop_details"`
	Usage *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

// encodeAnthropic builds the Messages body. The system prompt is top-level
// (a "system" message in Messages is moved there); max_tokens is always
// sent. ModeJSONSchema has no Messages equivalent and is sent as ModeTool.
func (c *Client) encodeAnthropic(req *Request) ([]byte, error) {
	w := anRequest{Model: req.Model, MaxTokens: req.MaxTokens, System: req.System, Temperature: req.Temperature}
	if w.MaxTokens <= 0 {
		w.MaxTokens = AnthropicMaxTokensDefault
	}
	w.Messages = make([]Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == "system" {
			w.System = strings.TrimSpace(w.System + "\n\n" + m.Content)
			continue
		}
		w.Messages = append(w.Messages, m)
	}
	if req.Mode == ModeTool || req.Mode == ModeJSONSchema {
		name := schemaName(req)
		w.Tools = []anTool{{Name: name, Description: toolDescription, InputSchema: req.Schema}}
		w.ToolChoice = &anToolChoice{Type: "tool", Name: name}
	}
	if req.User != "" {
		w.Metadata = &anMetadata{UserID: req.User}
	}
	return json.Marshal(&w)
}

// decodeAnthropic reads a 2xx Messages body.
func decodeAnthropic(body []byte, req *Request, out *Response) error {
	var w anResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	if w.StopReason == "" && w.Content == nil {
		return fmt.Errorf("decode message: no content and no stop_reason")
	}
	out.Model = w.Model
	var text strings.Builder
	toolIdx := -1
	for i, b := range w.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if toolIdx < 0 || (b.Name == schemaName(req) && w.Content[toolIdx].Name != b.Name) {
				toolIdx = i
			}
		}
	}
	out.Text = text.String()
	switch w.StopReason {
	case "end_turn", "stop_sequence", "pause_turn", "":
		out.FinishReason = FinishStop
	case "max_tokens", "model_context_window_exceeded":
		out.FinishReason = FinishLength
	case "tool_use":
		out.FinishReason = FinishTool
	case "refusal":
		out.FinishReason = FinishRefusal
	default:
		out.FinishReason = FinishReason(w.StopReason)
	}
	if toolIdx >= 0 {
		out.Text = string(w.Content[toolIdx].Input)
	}
	if out.FinishReason == FinishRefusal {
		// Partial text before a refusal is not an answer.
		out.Refusal = "refused"
		if w.StopDetails != nil && w.StopDetails.Explanation != "" {
			out.Refusal = w.StopDetails.Explanation
		}
		out.Text = ""
	}
	if u := w.Usage; u != nil {
		out.Usage.InputTokens = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		out.Usage.OutputTokens = u.OutputTokens
		out.Usage.CachedInputTokens = u.CacheReadInputTokens
	}
	normalizeRefusal(out)
	return nil
}
