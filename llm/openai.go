package llm

import (
	"bytes"
	"fmt"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// OpenAI Chat Completions wire types (only the fields we send or read).

type oaMessage struct {
	Role string `json:"role"`
	// Content is null on an assistant turn of tool calls only.
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaCallFunction `json:"function"`
}

type oaCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaRequest struct {
	Model               string            `json:"model"`
	Messages            []oaMessage       `json:"messages"`
	Temperature         *float64          `json:"temperature,omitempty"`
	MaxTokens           int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens int               `json:"max_completion_tokens,omitempty"`
	User                string            `json:"user,omitempty"`
	PromptCacheKey      string            `json:"prompt_cache_key,omitempty"`
	ServiceTier         string            `json:"service_tier,omitempty"`
	ResponseFormat      *oaResponseFormat `json:"response_format,omitempty"`
	Tools               []oaTool          `json:"tools,omitempty"`
	// ToolChoice is "required" or an *oaToolChoice naming a function;
	// nil leaves the default, auto.
	ToolChoice any `json:"tool_choice,omitempty"`
	// system holds the system prompt the first message points to: w is on
	// the heap already (it is marshalled), a pointer to req's would move
	// the caller's request there too.
	system string
}

type oaResponseFormat struct {
	Type       string        `json:"type"`
	JSONSchema *oaJSONSchema `json:"json_schema,omitempty"`
}

type oaJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type oaTool struct {
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

type oaToolChoice struct {
	Type     string         `json:"type"`
	Function oaToolFunction `json:"function"`
}

type oaToolFunction struct {
	Name string `json:"name"`
}

type oaResponse struct {
	ID          string `json:"id"`
	Model       string `json:"model"`
	ServiceTier string `json:"service_tier"`
	Choices     []struct {
		Message struct {
			Content   json.RawMessage `json:"content"` // string, null, or parts
			Refusal   *string         `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
					// Arguments is a JSON string holding the call's JSON;
					// some compatible servers send the object itself.
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

type oaUsage struct {
	PromptTokens        tokenCount `json:"prompt_tokens"`
	CompletionTokens    tokenCount `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens tokenCount `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// usage is u as fixpoint counts it, and the counts that could not be read.
func (u *oaUsage) usage() (fixpoint.Usage, string) {
	if u == nil {
		return fixpoint.Usage{}, ""
	}
	var cached tokenCount
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	return fixpoint.Usage{InputTokens: u.PromptTokens.n, OutputTokens: u.CompletionTokens.n, CachedInputTokens: cached.n},
		unreadCounts(namedCount{"prompt_tokens", u.PromptTokens}, namedCount{"completion_tokens", u.CompletionTokens},
			namedCount{"cached_tokens", cached})
}

// encodeOpenAI builds the Chat Completions body. schema is what to send
// (already made strict-compatible when strict is true). The system prompt
// goes first, so requests that share it share a cacheable prefix; OpenAI
// caches prefixes of 1,024 tokens and more on its own, and CacheKey, as
// prompt_cache_key, routes the requests of one batch to the same cache.
func (c *Client) encodeOpenAI(req *fixpoint.Request, schema json.RawMessage, strict bool) ([]byte, error) {
	w := oaRequest{Model: req.Model, Temperature: req.Temperature, User: req.User, PromptCacheKey: req.CacheKey,
		ServiceTier: req.ServiceTier, system: req.System}
	if c.row.Omits(FieldUser) {
		w.User = ""
	}
	if c.row.Omits(FieldPromptCacheKey) {
		w.PromptCacheKey = ""
	}
	msgs := make([]oaMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, oaMessage{Role: "system", Content: &w.system})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		o := oaMessage{Role: m.Role, Content: &m.Content}
		switch {
		case m.Role == fixpoint.RoleTool:
			text := toolResultText(*m)
			o.Content, o.ToolCallID = &text, m.ToolCallID
		case len(m.ToolCalls) > 0:
			if m.Content == "" {
				o.Content = nil
			}
			o.ToolCalls = make([]oaToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				o.ToolCalls[j] = oaToolCall{ID: c.ID, Type: "function", Function: oaCallFunction{Name: c.Name, Arguments: c.Arguments}}
			}
		}
		msgs = append(msgs, o)
	}
	w.Messages = msgs
	if c.cfg.OpenAIMaxTokensParam == "max_completion_tokens" {
		w.MaxCompletionTokens = req.MaxTokens
	} else {
		w.MaxTokens = req.MaxTokens
	}
	name := schemaName(req)
	switch req.Mode {
	case fixpoint.ModeJSONSchema:
		w.ResponseFormat = &oaResponseFormat{Type: "json_schema",
			JSONSchema: &oaJSONSchema{Name: name, Schema: schema, Strict: strict}}
	case fixpoint.ModeTool:
		w.Tools = []oaTool{{Type: "function", Function: oaFunction{
			Name: name, Description: toolDescription, Parameters: schema, Strict: strict}}}
		w.ToolChoice = &oaToolChoice{Type: "function", Function: oaToolFunction{Name: name}}
	}
	if len(req.Tools) > 0 {
		w.Tools = make([]oaTool, len(req.Tools))
		for i, t := range req.Tools {
			w.Tools[i] = oaTool{Type: "function", Function: oaFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
		}
		switch {
		case req.ToolChoice.Name != "":
			w.ToolChoice = &oaToolChoice{Type: "function", Function: oaToolFunction{Name: req.ToolChoice.Name}}
		case req.ToolChoice.Required:
			w.ToolChoice = "required"
		}
	}
	return json.Marshal(&w)
}

// decodeOpenAI reads a 2xx Chat Completions body.
// toolArguments is the JSON text of a tool call's arguments: the string a
// JSON string holds (OpenAI), or the JSON as sent when it is not a string
// (an object, from some compatible servers; it failed to decode, and the
// paid reply was retried as a bad response).
func toolArguments(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

func decodeOpenAI(body []byte, req *fixpoint.Request, out *fixpoint.Response) error {
	var w oaResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("decode chat completion: %w", briefDecodeError(err))
	}
	if len(w.Choices) == 0 {
		return fmt.Errorf("decode chat completion: no choices")
	}
	ch := &w.Choices[0]
	out.Model, out.ServiceTier = w.Model, w.ServiceTier
	text, err := openAIContent(ch.Message.Content)
	if err != nil {
		return err
	}
	out.Text = text
	switch ch.FinishReason {
	case "stop", "":
		out.FinishReason = fixpoint.FinishStop
	case "length":
		out.FinishReason = fixpoint.FinishLength
	case "tool_calls", "function_call":
		out.FinishReason = fixpoint.FinishTool
	case "content_filter":
		out.FinishReason = fixpoint.FinishContentFilter
	default:
		out.FinishReason = fixpoint.FinishReason(ch.FinishReason)
	}
	if calls := ch.Message.ToolCalls; len(req.Tools) > 0 && len(calls) > 0 {
		out.ToolCalls = make([]fixpoint.ToolCall, len(calls))
		for i, c := range calls {
			out.ToolCalls[i] = fixpoint.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: toolArguments(c.Function.Arguments)}
		}
		if out.FinishReason == fixpoint.FinishStop {
			out.FinishReason = fixpoint.FinishTool
		}
	} else if len(calls) > 0 {
		// A forced call may come with others: take the one we asked for.
		// A call of another function is not the answer (it was taken as
		// one): the reply's text stands, and without text there is no
		// JSON to check, which the model is told.
		i := -1
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
	if r := ch.Message.Refusal; r != nil && *r != "" {
		out.Refusal = *r
		out.FinishReason = fixpoint.FinishRefusal
	}
	out.Usage, out.UsageAnomaly = w.Usage.usage()
	normalizeRefusal(out)
	return nil
}

// openAIContent reads message.content: a string, null, or (some compatible
// servers) an array of {type: text, text} parts.
func openAIContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("decode message content: %w", err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("decode message content: %w", err)
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}
