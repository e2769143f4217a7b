package llm

import (
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// Anthropic Messages wire types (only the fields we send or read).

type anRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      any           `json:"system,omitempty"` // a string, or []anSystemBlock to cache it
	Messages    []anMessage   `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	Tools       []anTool      `json:"tools,omitempty"`
	ToolChoice  *anToolChoice `json:"tool_choice,omitempty"`
	// OutputConfig asks for structured outputs (NativeOutputConfig).
	OutputConfig *anOutputConfig `json:"output_config,omitempty"`
	Metadata     *anMetadata     `json:"metadata,omitempty"`
}

// anOutputConfig is output_config: {"format": {"type": "json_schema",
// "schema": ...}}; the reply's text is then the JSON.
type anOutputConfig struct {
	Format anOutputFormat `json:"format"`
}

type anOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// anMessage is a turn: its content a string, or blocks (anTextBlock,
// anToolUse, anToolResult) when it holds tool calls or results.
type anMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type anTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// anSystemBlock is the system prompt as a text block, the form that can
// carry cache_control.
type anSystemBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl *anCacheControl `json:"cache_control,omitempty"`
}

type anCacheControl struct {
	Type string `json:"type"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type anMetadata struct {
	UserID string `json:"user_id"`
}

type anResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason  string `json:"stop_reason"`
	StopDetails *struct {
		Explanation string `json:"explanation"`
	} `json:"stop_details"`
	Usage *anUsage `json:"usage"`
}

type anUsage struct {
	InputTokens              tokenCount `json:"input_tokens"`
	OutputTokens             tokenCount `json:"output_tokens"`
	CacheReadInputTokens     tokenCount `json:"cache_read_input_tokens"`
	CacheCreationInputTokens tokenCount `json:"cache_creation_input_tokens"`
}

// usage is u as fixpoint counts it (Anthropic's input_tokens leave out
// the cache's, which fixpoint counts as input too), and the counts that
// could not be read.
func (u *anUsage) usage() (fixpoint.Usage, string) {
	if u == nil {
		return fixpoint.Usage{}, ""
	}
	read, write := u.CacheReadInputTokens.n, u.CacheCreationInputTokens.n
	return fixpoint.Usage{InputTokens: u.InputTokens.n + read + write, OutputTokens: u.OutputTokens.n,
			CachedInputTokens: read, CacheWriteTokens: write},
		unreadCounts(namedCount{"input_tokens", u.InputTokens}, namedCount{"output_tokens", u.OutputTokens},
			namedCount{"cache_read_input_tokens", u.CacheReadInputTokens}, namedCount{"cache_creation_input_tokens", u.CacheCreationInputTokens})
}

// encodeAnthropic builds the Messages body. The system prompt is top-level
// (a "system" message in Messages is moved there); max_tokens is always
// sent. ModeJSONSchema is sent as the row says (Provider.Modes): as
// output_config.format, the schema reduced to structured outputs' subset
// (dropped lists what was left out), when the model has structured
// outputs and the schema fits them, else as ModeTool. With CacheSystem, a
// system prompt long enough to be cached is sent as a text block with
// cache_control (see anthropicCacheable).
func (c *Client) encodeAnthropic(req *fixpoint.Request) (body []byte, dropped []string, err error) {
	w := anRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature}
	if w.MaxTokens <= 0 {
		w.MaxTokens = AnthropicMaxTokensDefault
	}
	system := req.System
	w.Messages = make([]anMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch {
		case m.Role == "system":
			system = strings.TrimSpace(system + "\n\n" + m.Content)
		case m.Role == fixpoint.RoleTool:
			// The results of one turn's calls go back in one user turn,
			// and the user's words after them in that turn too: the
			// Messages API wants every tool_use answered in the turn
			// that follows it.
			r := anToolResult{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError}
			if blocks, ok := lastUserBlocks(w.Messages); ok {
				w.Messages[len(w.Messages)-1].Content = append(blocks, r)
			} else {
				w.Messages = append(w.Messages, anMessage{Role: fixpoint.RoleUser, Content: []any{r}})
			}
		case m.Role == fixpoint.RoleUser && i > 0 && req.Messages[i-1].Role == fixpoint.RoleTool:
			blocks, _ := lastUserBlocks(w.Messages)
			w.Messages[len(w.Messages)-1].Content = append(blocks, anTextBlock{Type: "text", Text: m.Content})
		case len(m.ToolCalls) > 0:
			blocks := make([]any, 0, len(m.ToolCalls)+1)
			if m.Content != "" {
				blocks = append(blocks, anTextBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				if err := c.CheckArguments(); err != nil {
					return nil, nil, fmt.Errorf("messages[%d]: %w (the Messages API takes a tool_use's input as an object only)", i, err)
				}
				blocks = append(blocks, anToolUse{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage(c.Arguments)})
			}
			w.Messages = append(w.Messages, anMessage{Role: m.Role, Content: blocks})
		default:
			// A pointer: a string put in an interface is a copy on the heap.
			w.Messages = append(w.Messages, anMessage{Role: m.Role, Content: &req.Messages[i].Content})
		}
	}
	tool := req.Mode == fixpoint.ModeTool || req.Mode == fixpoint.ModeJSONSchema
	ar, structured, err := c.outputConfig(req)
	if err != nil {
		return nil, nil, err
	}
	if structured {
		w.OutputConfig = &anOutputConfig{Format: anOutputFormat{Type: "json_schema", Schema: ar.schema}}
		tool, dropped = false, ar.dropped
	}
	if tool {
		name := schemaName(req)
		w.Tools = []anTool{{Name: name, Description: toolDescription, InputSchema: req.Schema}}
		w.ToolChoice = &anToolChoice{Type: "tool", Name: name}
	}
	if len(req.Tools) > 0 {
		w.Tools = make([]anTool, len(req.Tools))
		for i, t := range req.Tools {
			w.Tools[i] = anTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters}
		}
		switch {
		case req.ToolChoice.Name != "":
			w.ToolChoice = &anToolChoice{Type: "tool", Name: req.ToolChoice.Name}
		case req.ToolChoice.Required:
			w.ToolChoice = &anToolChoice{Type: "any"}
		}
	}
	switch {
	case system == "":
	case req.CacheSystem && anthropicCacheable(req.Model, system, w.Tools):
		w.System = []anSystemBlock{{Type: "text", Text: system, CacheControl: &anCacheControl{Type: "ephemeral"}}}
	default:
		w.System = system
	}
	if req.User != "" {
		w.Metadata = &anMetadata{UserID: req.User}
	}
	body, err = json.Marshal(&w)
	return body, dropped, err
}

// outputConfig returns the schema req is sent with as output_config, and
// whether it is sent so: in ModeJSONSchema, on a row whose native form of
// it is NativeOutputConfig, to a model with structured outputs, for a
// schema they can take.
func (c *Client) outputConfig(req *fixpoint.Request) (strictResult, bool, error) {
	if req.Mode != fixpoint.ModeJSONSchema || c.row.Modes[fixpoint.ModeJSONSchema] != NativeOutputConfig || !anthropicStructured(req.Model) {
		return strictResult{}, false, nil
	}
	sr, err := c.anthropicSchema(req.Schema)
	return sr, err == nil && sr.strict, err
}

// anthropicSchema is anthropicSchema(schema), cached by the schema's text.
func (c *Client) anthropicSchema(schema json.RawMessage) (strictResult, error) {
	if v, ok := c.anSchemaCache.Load(string(schema)); ok {
		return v.(strictResult), nil
	}
	s, dropped, ok, err := anthropicSchema(schema)
	if err != nil {
		return strictResult{}, err
	}
	sr := strictResult{schema: s, dropped: dropped, strict: ok}
	c.anSchemaCache.Store(string(schema), sr)
	return sr, nil
}

// anthropicBeforeStructured are the models, by alias, that predate
// structured outputs (generally available for the 4.5 models and later);
// "claude-3", "claude-2" and "claude-instant" are prefixes of families.
var anthropicBeforeStructured = []string{"claude-opus-4", "claude-opus-4-0", "claude-opus-4-1", "claude-sonnet-4", "claude-sonnet-4-0"}

// anthropicStructured reports whether model has structured outputs: any
// model but the older ones, by alias, alias-latest or a snapshot date
// (claude-sonnet-4-20250514). A model fixpoint does not know is taken as
// newer.
func anthropicStructured(model string) bool {
	for _, family := range []string{"claude-3", "claude-2", "claude-instant"} {
		if strings.HasPrefix(model, family) {
			return false
		}
	}
	for _, alias := range anthropicBeforeStructured {
		if model == alias {
			return false
		}
		if rest, ok := strings.CutPrefix(model, alias+"-"); ok && isSnapshot(rest) {
			return false
		}
	}
	return true
}

// lastUserBlocks returns the blocks of the last turn when it is a user
// turn of tool results.
func lastUserBlocks(msgs []anMessage) ([]any, bool) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != fixpoint.RoleUser {
		return nil, false
	}
	blocks, ok := msgs[len(msgs)-1].Content.([]any)
	return blocks, ok
}

// anthropicCacheable reports whether a cache breakpoint on the system
// prompt would be honoured: the prefix it closes (the tools, then the
// system prompt) estimated at the package's measure, a quarter of its
// bytes, is at least the model's minimum. Below it Anthropic caches
// nothing, so the prompt is sent as before.
func anthropicCacheable(model, system string, tools []anTool) bool {
	n := len(system)
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return (n+3)/4 >= AnthropicCacheMinTokens(model)
}

// AnthropicCacheMinTokensUnknown is the minimum assumed for a model
// AnthropicCacheMinTokens does not know: the largest any model has, so an
// unknown model's prompt is marked only when every model could cache it.
const AnthropicCacheMinTokensUnknown = 4096

// anthropicCacheMin is the shortest prompt prefix each model caches, in
// tokens, from Anthropic's prompt-caching guide ("Cache limitations":
// https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
// as quoted in anthropics/anthropic-sdk-python#1194): 4,096 for Claude
// Opus 4.6, Opus 4.5 and Haiku 4.5; 1,024 for Sonnet 4.6, Sonnet 4.5,
// Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7 (and the retired Sonnet 3.5
// and Opus 3); 2,048 for Haiku 3.5 and Haiku 3.
var anthropicCacheMin = map[string]int{
	"claude-opus-4-6":   4096,
	"claude-opus-4-5":   4096,
	"claude-haiku-4-5":  4096,
	"claude-sonnet-4-6": 1024,
	"claude-sonnet-4-5": 1024,
	"claude-opus-4-1":   1024,
	"claude-opus-4-0":   1024,
	"claude-opus-4":     1024,
	"claude-sonnet-4-0": 1024,
	"claude-sonnet-4":   1024,
	"claude-3-7-sonnet": 1024,
	"claude-3-5-sonnet": 1024,
	"claude-3-opus":     1024,
	"claude-3-5-haiku":  2048,
	"claude-3-haiku":    2048,
}

// AnthropicCacheMinTokens is the shortest prompt prefix, in tokens, that
// model caches. A model is known by its alias (claude-sonnet-4-5), the
// alias with -latest, or the alias with a snapshot date
// (claude-sonnet-4-5-20250929); any other name, a newer model among them,
// gets AnthropicCacheMinTokensUnknown.
func AnthropicCacheMinTokens(model string) int {
	if n, ok := anthropicCacheMin[model]; ok {
		return n
	}
	if i := strings.LastIndexByte(model, '-'); i > 0 {
		if n, ok := anthropicCacheMin[model[:i]]; ok && isSnapshot(model[i+1:]) {
			return n
		}
	}
	return AnthropicCacheMinTokensUnknown
}

// isSnapshot reports whether s names a snapshot of an alias: "latest" or a
// date, YYYYMMDD.
func isSnapshot(s string) bool {
	if s == "latest" {
		return true
	}
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decodeAnthropic reads a 2xx Messages body.
func decodeAnthropic(body []byte, req *fixpoint.Request, out *fixpoint.Response) error {
	var w anResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("decode message: %w", briefDecodeError(err))
	}
	if w.StopReason == "" && w.Content == nil {
		return fmt.Errorf("decode message: no content and no stop_reason")
	}
	out.Model = w.Model
	var text strings.Builder
	toolIdx := -1
	for i, b := range w.Content {
		switch {
		case b.Type == "text":
			text.WriteString(b.Text)
		case b.Type != "tool_use":
		case len(req.Tools) > 0:
			out.ToolCalls = append(out.ToolCalls, fixpoint.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		case toolIdx < 0 && b.Name == schemaName(req):
			// Only a call of the tool we asked for is the answer: a call
			// of another won over a valid text block.
			toolIdx = i
		}
	}
	out.Text = text.String()
	switch w.StopReason {
	case "end_turn", "stop_sequence", "pause_turn", "":
		out.FinishReason = fixpoint.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		out.FinishReason = fixpoint.FinishLength
	case "tool_use":
		out.FinishReason = fixpoint.FinishTool
	case "refusal":
		out.FinishReason = fixpoint.FinishRefusal
	default:
		out.FinishReason = fixpoint.FinishReason(w.StopReason)
	}
	if toolIdx >= 0 {
		out.Text = string(w.Content[toolIdx].Input)
	}
	if out.FinishReason == fixpoint.FinishRefusal {
		// Partial text before a refusal is not an answer.
		out.Refusal = "refused"
		if w.StopDetails != nil && w.StopDetails.Explanation != "" {
			out.Refusal = w.StopDetails.Explanation
		}
		out.Text = ""
	}
	out.Usage, out.UsageAnomaly = w.Usage.usage()
	normalizeRefusal(out)
	return nil
}
