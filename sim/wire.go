package sim

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// apiError is an error answer, written in the provider's shape.
type apiError struct {
	status int
	typ    string // OpenAI error.type / Anthropic error.type
	code   string // OpenAI error.code ("" = null)
	param  string
	msg    string
}

func badRequest(format string, a ...any) *apiError {
	return &apiError{status: 400, typ: "invalid_request_error", msg: fmt.Sprintf(format, a...)}
}

// textOf reads a content field: a string, an array of parts/blocks with
// text, or null. A tool_result's content is read the same way, down to
// maxContentDepth (the Messages API nests it once; deeper is ignored).
func textOf(raw json.RawMessage) string { return textOfDepth(raw, 0) }

// maxContentDepth bounds the nesting of tool_result content textOf reads.
const maxContentDepth = 4

func textOfDepth(raw json.RawMessage, depth int) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		switch bl.Type {
		case "tool_use":
			b.Write(bl.Input)
		case "tool_result":
			if depth < maxContentDepth {
				b.WriteString(textOfDepth(bl.Content, depth+1))
			}
		default:
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// textCache remembers the text of the system prompts a server has read: a
// batch sends the same one, a few kilobytes with the schema in it, with every
// request, and unquoting it each time was about a tenth of a request's work.
type textCache struct{ rawCache[string] }

// textCacheMax bounds a textCache.
const textCacheMax = 256

// text is textOf(raw), from the cache when raw was seen before.
func (c *textCache) text(raw json.RawMessage) string {
	return c.get(raw, textCacheMax, func(b []byte) string { return textOf(b) })
}

// decodeStrict decodes a request body; trailing data is an error, as with
// the providers. Raw fields (content, schemas) point into body rather than
// copy it: body is read afresh for each request and outlives the handler's
// use of them.
func decodeStrict(body []byte, v any) error {
	rest, err := json.Parse(body, v, json.DontCopyRawMessage)
	if err == nil && len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		err = fmt.Errorf("invalid character %q after top-level value", rest[0])
	}
	return err
}

// OpenAI Chat Completions request.
type oaRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"` // string or parts: see textOf
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	User                string          `json:"user"`
	Stream              bool            `json:"stream"`
	PromptCacheKey      string          `json:"prompt_cache_key"`
	// PromptCacheRetention is "in_memory" (the default) or "24h".
	PromptCacheRetention string `json:"prompt_cache_retention"`
	// ServiceTier is "auto", "default" or "flex" (see "Flex" in the
	// package documentation).
	ServiceTier string `json:"service_tier"`
}

// serveOptions reads how an OpenAI request asks to be served: its
// service_tier (flex, or the default tier) and its prompt cache's
// retention, answering a value OpenAI has not as OpenAI does.
func (r *chatReq) serveOptions(tier, retention string) *apiError {
	switch tier {
	case "", "auto", "default":
	case "flex":
		r.flex = true
	default:
		return &apiError{status: 400, typ: "invalid_request_error", param: "service_tier",
			msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'auto', 'default', and 'flex'.", tier)}
	}
	switch retention {
	case "", "in_memory":
	case "24h":
		r.cacheTTL = 24 * time.Hour
	default:
		return &apiError{status: 400, typ: "invalid_request_error", param: "prompt_cache_retention",
			msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'in_memory' and '24h'.", retention)}
	}
	return nil
}

func parseOpenAI(body []byte, texts *textCache) (*chatReq, *apiError) {
	var in oaRequest
	if err := decodeStrict(body, &in); err != nil {
		return nil, badRequest("We could not parse the JSON body of your request. (%v)", err)
	}
	if in.Model == "" {
		return nil, &apiError{status: 400, typ: "invalid_request_error", param: "model", msg: "you must provide a model parameter"}
	}
	if len(in.Messages) == 0 {
		return nil, &apiError{status: 400, typ: "invalid_request_error", param: "messages", msg: "[] is too short - 'messages'"}
	}
	if in.Stream {
		return nil, &apiError{status: 400, typ: "invalid_request_error", param: "stream", msg: "the simulator does not stream"}
	}
	r := &chatReq{provider: "openai", model: in.Model, user: in.User, cacheKey: in.PromptCacheKey}
	if bad := r.serveOptions(in.ServiceTier, in.PromptCacheRetention); bad != nil {
		return nil, bad
	}
	agent := false
	for _, t := range in.Tools {
		agent = agent || agentTool(t.Function.Name)
	}
	for _, m := range in.Messages {
		var t string
		if m.Role == "system" || m.Role == "developer" {
			t = texts.text(m.Content)
		} else {
			t = textOf(m.Content)
		}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 && !agent {
			t += m.ToolCalls[0].Function.Arguments
		}
		if m.Role == "system" || m.Role == "developer" {
			if r.system != "" {
				r.system += "\n"
			}
			r.system += t
			continue
		}
		nm := nmsg{role: m.Role, text: t}
		if agent {
			for _, c := range m.ToolCalls {
				nm.calls = append(nm.calls, ncall{id: c.ID, name: c.Function.Name, args: c.Function.Arguments})
				nm.text += c.Function.Name + c.Function.Arguments
			}
			if m.Role == "tool" {
				nm.results = []nresult{{id: m.ToolCallID, content: t, isError: resultIsError(t)}}
			}
		}
		r.msgs = append(r.msgs, nm)
	}
	if agent {
		r.agent = &agentReq{}
		for _, t := range in.Tools {
			if t.Function.Name == fixpoint.ToolSetOutput {
				r.agent.params = t.Function.Parameters
			}
			r.agent.toolBytes += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
		}
		var choice struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(in.ToolChoice, &r.agent.choice) != nil {
			_ = json.Unmarshal(in.ToolChoice, &choice)
			r.agent.choice = choice.Function.Name
		}
		if r.agent.choice == "auto" {
			r.agent.choice = ""
		}
		if aerr := checkToolTurns("openai", r.msgs); aerr != nil {
			return nil, aerr
		}
		in.Tools = nil // not a tool mode's forced tool
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type == "json_schema" && rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
		r.schema = rf.JSONSchema.Schema
	}
	r.jsonOnly = in.ResponseFormat != nil && in.ResponseFormat.Type == "json_object"
	if len(in.Tools) > 0 {
		var choice struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		var choiceStr string
		if json.Unmarshal(in.ToolChoice, &choiceStr) != nil {
			_ = json.Unmarshal(in.ToolChoice, &choice)
		}
		if choiceStr != "none" {
			tool := in.Tools[0]
			for _, t := range in.Tools {
				if t.Function.Name == choice.Function.Name {
					tool = t
				}
			}
			r.toolName = tool.Function.Name
			r.toolForced = choice.Function.Name != ""
			if r.schema == nil && len(tool.Function.Parameters) > 0 {
				r.schema = tool.Function.Parameters
			}
		}
	}
	switch {
	case in.MaxCompletionTokens != nil:
		r.maxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.maxTokens = *in.MaxTokens
	}
	return r, nil
}

// Anthropic Messages request.
type antRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens *int `json:"max_tokens"`
	Tools     []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl *cacheControl   `json:"cache_control"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Stream bool `json:"stream"`
	// CacheControl at the top level puts a breakpoint on the last block.
	CacheControl *cacheControl `json:"cache_control"`
	// OutputConfig asks for structured outputs: the reply's text is JSON
	// of format's schema.
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// cacheControl is Anthropic's cache_control of a block.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// ttl checks a cache_control and returns its TTL (0: the default).
func (cc *cacheControl) ttl(where string) (time.Duration, *apiError) {
	if cc.Type != "ephemeral" {
		return 0, badRequest("%s.cache_control.type: Input should be 'ephemeral'", where)
	}
	switch cc.TTL {
	case "":
		return 0, nil
	case "5m":
		return 5 * time.Minute, nil
	case "1h":
		return time.Hour, nil
	}
	return 0, badRequest("%s.cache_control.ttl: Input should be '5m' or '1h'", where)
}

// contentBlocks returns what each block of a content field adds to its
// text as textOf reads it, in bytes, with the block's cache_control. A
// string (or null) is one block without one.
func contentBlocks(raw json.RawMessage) ([]int, []*cacheControl) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return []int{len(textOf(raw))}, []*cacheControl{nil}
	}
	var blocks []struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		Input        json.RawMessage `json:"input"`
		Content      json.RawMessage `json:"content"`
		CacheControl *cacheControl   `json:"cache_control"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return []int{len(textOf(raw))}, []*cacheControl{nil}
	}
	lens := make([]int, len(blocks))
	ccs := make([]*cacheControl, len(blocks))
	for i, bl := range blocks {
		switch bl.Type {
		case "tool_use":
			lens[i] = len(bl.Input)
		case "tool_result":
			lens[i] = len(textOfDepth(bl.Content, 1))
		default:
			lens[i] = len(bl.Text)
		}
		ccs[i] = bl.CacheControl
	}
	return lens, ccs
}

// anthropicBounds lists the block boundaries of a request with a
// cache_control somewhere: the end of the tools, of each system block and
// of each message block, breakpoints marked.
func anthropicBounds(in *antRequest) ([]cacheBound, *apiError) {
	var out []cacheBound
	nbp := 0
	add := func(off int, cc *cacheControl, where string) *apiError {
		b := cacheBound{off: off}
		if cc != nil {
			ttl, aerr := cc.ttl(where)
			if aerr != nil {
				return aerr
			}
			b.bp, b.ttl = true, ttl
			nbp++
		}
		out = append(out, b)
		return nil
	}
	if len(in.Tools) > 0 {
		var cc *cacheControl
		where := "tools"
		for i, t := range in.Tools {
			if t.CacheControl != nil {
				cc, where = t.CacheControl, fmt.Sprintf("tools.%d", i)
				nbp++ // every marked tool counts against the limit
			}
		}
		if cc != nil {
			nbp--
		}
		if aerr := add(0, cc, where); aerr != nil {
			return nil, aerr
		}
	}
	off := 0
	lens, ccs := contentBlocks(in.System)
	for i := range lens {
		off += lens[i]
		if aerr := add(off, ccs[i], fmt.Sprintf("system.%d", i)); aerr != nil {
			return nil, aerr
		}
	}
	for m, msg := range in.Messages {
		lens, ccs := contentBlocks(msg.Content)
		for i := range lens {
			off += lens[i]
			if aerr := add(off, ccs[i], fmt.Sprintf("messages.%d.content.%d", m, i)); aerr != nil {
				return nil, aerr
			}
		}
	}
	if in.CacheControl != nil && len(out) > 0 && !out[len(out)-1].bp {
		ttl, aerr := in.CacheControl.ttl("")
		if aerr != nil {
			return nil, aerr
		}
		out[len(out)-1].bp, out[len(out)-1].ttl = true, ttl
		nbp++
	}
	if nbp > anthropicMaxBreakpoints {
		return nil, badRequest("A maximum of %d blocks with cache_control may be provided. Found %d.", anthropicMaxBreakpoints, nbp)
	}
	return out, nil
}

func parseAnthropic(body []byte, texts *textCache) (*chatReq, *apiError) {
	var in antRequest
	if err := decodeStrict(body, &in); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	switch {
	case in.Model == "":
		return nil, badRequest("model: Field required")
	case in.MaxTokens == nil:
		return nil, badRequest("max_tokens: Field required")
	case *in.MaxTokens < 1:
		return nil, badRequest("max_tokens: Input should be greater than or equal to 1")
	case len(in.Messages) == 0:
		return nil, badRequest("messages: at least one message is required")
	case in.Stream:
		return nil, badRequest("stream: the simulator does not stream")
	}
	r := &chatReq{provider: "anthropic", model: in.Model, maxTokens: *in.MaxTokens, system: texts.text(in.System)}
	if in.Metadata != nil {
		r.user = in.Metadata.UserID
	}
	if bytes.Contains(body, []byte(`"cache_control"`)) {
		bounds, aerr := anthropicBounds(&in)
		if aerr != nil {
			return nil, aerr
		}
		r.bounds = bounds
	}
	agent := false
	for _, t := range in.Tools {
		agent = agent || agentTool(t.Name)
	}
	for i, m := range in.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		nm := nmsg{role: m.Role, text: textOf(m.Content)}
		if agent {
			nm.text, nm.calls, nm.results = anthropicToolBlocks(m.Content, nm.text)
		}
		r.msgs = append(r.msgs, nm)
	}
	if agent {
		r.agent = &agentReq{}
		for _, t := range in.Tools {
			if t.Name == fixpoint.ToolSetOutput {
				r.agent.params = t.InputSchema
			}
			r.agent.toolBytes += len(t.Name) + len(t.Description) + len(t.InputSchema)
		}
		if tc := in.ToolChoice; tc != nil {
			switch tc.Type {
			case "any":
				r.agent.choice = "required"
			case "tool":
				r.agent.choice = tc.Name
			}
		}
		if aerr := checkToolTurns("anthropic", r.msgs); aerr != nil {
			return nil, aerr
		}
		return r, nil
	}
	if oc := in.OutputConfig; oc != nil && oc.Format != nil {
		switch {
		case oc.Format.Type != "json_schema":
			return nil, badRequest("output_config.format.type: Input should be 'json_schema'")
		case len(bytes.TrimSpace(oc.Format.Schema)) == 0:
			return nil, badRequest("output_config.format.schema: Field required")
		}
		r.schema = oc.Format.Schema
	}
	if len(in.Tools) > 0 && (in.ToolChoice == nil || in.ToolChoice.Type != "none") {
		tool := in.Tools[0]
		if in.ToolChoice != nil && in.ToolChoice.Type == "tool" {
			found := false
			for _, t := range in.Tools {
				if t.Name == in.ToolChoice.Name {
					tool, found = t, true
				}
			}
			if !found {
				return nil, badRequest("tool_choice: tool %q not found in tools", in.ToolChoice.Name)
			}
			r.toolForced = true
		}
		r.toolName = tool.Name
		r.schema = tool.InputSchema
	}
	return r, nil
}

// anthropicToolBlocks reads the tool_use and tool_result blocks of a
// content field, and its text with a line between blocks (textOf runs
// them together: "ok" then "/age: ..." would hide the pointer); a string
// content is text, as given.
func anthropicToolBlocks(raw json.RawMessage, text string) (string, []ncall, []nresult) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return text, nil, nil
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return text, nil, nil
	}
	var calls []ncall
	var results []nresult
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case "tool_use":
			calls = append(calls, ncall{id: b.ID, name: b.Name, args: string(b.Input)})
			parts = append(parts, string(b.Input))
		case "tool_result":
			content := textOfDepth(b.Content, 1)
			results = append(results, nresult{id: b.ToolUseID, content: content, isError: b.IsError})
			parts = append(parts, content)
		default:
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n"), calls, results
}

// Ollama chat request.
type olRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolName string `json:"tool_name"`
	} `json:"messages"`
	Stream  *bool           `json:"stream"`
	Format  json.RawMessage `json:"format"`
	Options *struct {
		NumPredict *int `json:"num_predict"`
	} `json:"options"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func parseOllama(body []byte) (*chatReq, *apiError) {
	var in olRequest
	if err := decodeStrict(body, &in); err != nil {
		return nil, &apiError{status: 400, msg: fmt.Sprintf("invalid character in request body: %v", err)}
	}
	if in.Model == "" {
		return nil, &apiError{status: 400, msg: "model is required"}
	}
	if in.Stream == nil || *in.Stream {
		return nil, &apiError{status: 400, msg: "the simulator only answers stream: false"}
	}
	r := &chatReq{provider: "ollama", model: in.Model}
	agent := false
	for _, t := range in.Tools {
		agent = agent || agentTool(t.Function.Name)
	}
	for _, m := range in.Messages {
		t := m.Content
		if m.Role == "assistant" && len(m.ToolCalls) > 0 && !agent {
			t += string(m.ToolCalls[0].Function.Arguments)
		}
		if m.Role == "system" {
			if r.system != "" {
				r.system += "\n"
			}
			r.system += t
			continue
		}
		nm := nmsg{role: m.Role, text: t}
		if agent {
			for _, c := range m.ToolCalls {
				nm.calls = append(nm.calls, ncall{name: c.Function.Name, args: string(c.Function.Arguments)})
				nm.text += c.Function.Name + string(c.Function.Arguments)
			}
			if m.Role == "tool" {
				nm.results = []nresult{{name: m.ToolName, content: t, isError: resultIsError(t)}}
			}
		}
		r.msgs = append(r.msgs, nm)
	}
	if agent {
		r.agent = &agentReq{}
		for _, t := range in.Tools {
			if t.Function.Name == fixpoint.ToolSetOutput {
				r.agent.params = t.Function.Parameters
			}
			r.agent.toolBytes += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
		}
		in.Tools = nil // not a tool mode's offered tool
	}
	if f := bytes.TrimSpace(in.Format); len(f) > 0 && f[0] == '{' {
		r.schema = f
	} else {
		r.jsonOnly = string(f) == `"json"`
	}
	if len(in.Tools) > 0 {
		r.toolName = in.Tools[0].Function.Name
		if r.schema == nil {
			r.schema = in.Tools[0].Function.Parameters
		}
	}
	if in.Options != nil && in.Options.NumPredict != nil && *in.Options.NumPredict > 0 {
		r.maxTokens = *in.Options.NumPredict
	}
	return r, nil
}

// OpenAI response shapes, field order as the API sends them.
type oaResponse struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	Choices           []oaChoice `json:"choices"`
	Usage             oaUsage    `json:"usage"`
	ServiceTier       string     `json:"service_tier"`
	SystemFingerprint string     `json:"system_fingerprint"`
}

type oaChoice struct {
	Index        int       `json:"index"`
	Message      oaMessage `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type oaMessage struct {
	Role        string       `json:"role"`
	Content     *string      `json:"content"`
	Refusal     *string      `json:"refusal"`
	ToolCalls   []oaToolCall `json:"tool_calls,omitempty"`
	Annotations []struct{}   `json:"annotations"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

// Anthropic response shapes.
type antResponse struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Model        string   `json:"model"`
	Content      []any    `json:"content"`
	StopReason   string   `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        antUsage `json:"usage"`
}

type antText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type antToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type antUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens int    `json:"output_tokens"`
	ServiceTier  string `json:"service_tier"`
}

// Ollama response shape.
type olResponse struct {
	Model              string    `json:"model"`
	CreatedAt          string    `json:"created_at"`
	Message            olMessage `json:"message"`
	DoneReason         string    `json:"done_reason"`
	Done               bool      `json:"done"`
	TotalDuration      int64     `json:"total_duration"`
	LoadDuration       int64     `json:"load_duration"`
	PromptEvalCount    int       `json:"prompt_eval_count"`
	PromptEvalDuration int64     `json:"prompt_eval_duration"`
	EvalCount          int       `json:"eval_count"`
	EvalDuration       int64     `json:"eval_duration"`
}

type olMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	ToolCalls []olToolCall `json:"tool_calls,omitempty"`
}

type olToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// errorBody renders e in the provider's error shape.
func errorBody(provider string, e *apiError, requestID string) []byte {
	var v any
	switch provider {
	case "anthropic":
		type inner struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		v = struct {
			Type      string `json:"type"`
			Error     inner  `json:"error"`
			RequestID string `json:"request_id,omitempty"`
		}{"error", inner{e.typ, e.msg}, requestID}
	case "ollama":
		v = struct {
			Error string `json:"error"`
		}{e.msg}
	default:
		type inner struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		}
		in := inner{Message: e.msg, Type: e.typ}
		if e.param != "" {
			in.Param = &e.param
		}
		if e.code != "" {
			in.Code = &e.code
		}
		v = struct {
			Error inner `json:"error"`
		}{in}
	}
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

// statusError is the provider's error for a transport status.
func statusError(provider string, status int) *apiError {
	switch provider {
	case "anthropic":
		switch status {
		case 529:
			return &apiError{status: status, typ: "overloaded_error", msg: "Overloaded"}
		case 429:
			return &apiError{status: status, typ: "rate_limit_error", msg: "This request would exceed your account's rate limit. Please try again later."}
		case 400:
			return &apiError{status: status, typ: "invalid_request_error", msg: "invalid request"}
		case 401:
			return &apiError{status: status, typ: "authentication_error", msg: "invalid x-api-key"}
		case 403:
			return &apiError{status: status, typ: "permission_error", msg: "Your API key does not have permission to use the specified resource."}
		case 404:
			return &apiError{status: status, typ: "not_found_error", msg: "The requested resource could not be found."}
		}
		return &apiError{status: status, typ: "api_error", msg: "Internal server error"}
	case "ollama":
		switch status {
		case 503, 429:
			return &apiError{status: 503, msg: "server busy, please try again.  maximum pending requests exceeded"}
		case 404:
			return &apiError{status: status, msg: "model not found, try pulling it first"}
		}
		return &apiError{status: status, msg: "llama runner process has terminated: exit status 2"}
	}
	switch status {
	case 429:
		return &apiError{status: status, typ: "requests", code: "rate_limit_exceeded", msg: "Rate limit reached for requests. Please try again later."}
	case 503:
		return &apiError{status: status, typ: "server_error", msg: "The server is overloaded or not ready yet."}
	case 529:
		return &apiError{status: status, typ: "overloaded_error", msg: "The engine is currently overloaded, please try again later."}
	case 400:
		return &apiError{status: status, typ: "invalid_request_error", msg: "invalid request"}
	case 401:
		return &apiError{status: status, typ: "invalid_request_error", code: "invalid_api_key", msg: "Incorrect API key provided."}
	case 404:
		return &apiError{status: status, typ: "invalid_request_error", code: "model_not_found", msg: "The model does not exist or you do not have access to it."}
	}
	return &apiError{status: status, typ: "server_error", msg: "The server had an error processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if you keep seeing this error."}
}
