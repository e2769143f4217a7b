package fixpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The markers of a prompt-mode request, the contract between the repair
// step, which writes them, and the simulator, which reads them. Each stands
// on a line of its own.
const (
	// SchemaMarkerOpen starts the JSON Schema in a prompt-mode system
	// prompt; SchemaMarkerClose ends it.
	SchemaMarkerOpen  = "<json-schema>"
	SchemaMarkerClose = "</json-schema>"
	// PreviousReplyOpen starts the failed reply quoted in a
	// repair-strategy request; PreviousReplyClose ends it.
	PreviousReplyOpen  = "<previous-reply>"
	PreviousReplyClose = "</previous-reply>"
	// TaskOpen starts the original task a repair-strategy request repeats
	// before the quoted reply; TaskClose ends it.
	TaskOpen  = "<task>"
	TaskClose = "</task>"
	// DocumentOpen starts a job's document in the first user message,
	// before the prompt; DocumentClose ends it. The text between them is
	// the document byte for byte, nothing escaped.
	DocumentOpen  = "<document>"
	DocumentClose = "</document>"
	// ValueSoFarOpen starts, in a sequential strategy's request over a
	// chunk after the first, the value built from the chunks before it
	// (JSON), which the reply extends or corrects; ValueSoFarClose ends
	// it.
	ValueSoFarOpen  = "<value-so-far>"
	ValueSoFarClose = "</value-so-far>"
	// MergeValuesOpen starts, in a parallel strategy's merge request (a
	// merge by a model, Limits.MergeModel), the chunks' values: one line
	// a chunk, a JSON object {"part": N, "start": S, "end": E, "value":
	// V} (N counted from 1, S and E its code point range in the
	// document); MergeValuesClose ends them. The reply is the one merged
	// value.
	MergeValuesOpen  = "<chunk-values>"
	MergeValuesClose = "</chunk-values>"
)

// Mode is how structured output is asked for.
type Mode string

const (
	// ModePrompt describes the schema in the system prompt and parses text.
	ModePrompt Mode = "prompt"
	// ModeJSONSchema uses the provider's native schema-constrained output
	// (OpenAI response_format json_schema, Anthropic output_config.format,
	// Ollama format; llm.Provider.Modes).
	ModeJSONSchema Mode = "json_schema"
	// ModeTool forces a tool call whose input schema is the job's schema.
	ModeTool Mode = "tool"
)

// Role of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool is a tool result's turn: ToolCallID names the call it
	// answers, Content is the result.
	RoleTool = "tool"
)

// Message is one conversation turn. System prompts go in Request.System.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant turn made, with any text it
	// wrote beside them in Content.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, on a RoleTool turn, the provider's id of the call
	// it answers (ToolCall.ID).
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a RoleTool turn whose Content is an error: the call
	// was refused or failed.
	IsError bool `json:"is_error,omitempty"`
}

// The tools of the agent strategy, the contract between the driver, which
// offers them, and the simulator, which calls them. set_output's
// arguments are the value itself (its parameters are the job's schema,
// required relaxed), update_output's the part to change; read_chunk takes
// a chunk's number ({"n": 0}), search a text ({"text": "..."}), fail a
// reason ({"reason": "..."}), finish nothing. A request that offers
// set_output is answered by the simulator as an agent (package sim).
const (
	ToolSetOutput    = "set_output"
	ToolUpdateOutput = "update_output"
	ToolReadChunk    = "read_chunk"
	ToolSearch       = "search"
	ToolFinish       = "finish"
	ToolFail         = "fail"
)

// Tool is a function a request offers the model.
type Tool struct {
	// Name is 1 to 64 letters, digits, '_' or '-' (what OpenAI and
	// Anthropic both accept).
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the call's arguments, an object.
	Parameters json.RawMessage `json:"parameters"`
}

// ToolChoice is what a request that offers tools lets the model do. The
// zero value lets it answer with text or call any number of tools.
type ToolChoice struct {
	// Required makes it call at least one tool.
	Required bool `json:"required,omitempty"`
	// Name, when set, is the one tool it must call (Required or not).
	Name string `json:"name,omitempty"`
}

// ToolCall is one call a reply made.
type ToolCall struct {
	// ID is the provider's id of the call, which its result names
	// (Message.ToolCallID). Ollama gives none: the client makes one up,
	// stable for the conversation (see package llm).
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments as the model wrote
	// it, which need not be JSON at all (see CheckArguments).
	Arguments string `json:"arguments"`
}

// CheckArguments says what is wrong with c's arguments when they are not
// a JSON object, naming the call; nil when they are one.
func (c ToolCall) CheckArguments() error {
	var obj map[string]json.RawMessage
	err := json.Unmarshal([]byte(c.Arguments), &obj)
	if err == nil && obj != nil {
		return nil
	}
	what := "are not a JSON object"
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case strings.TrimSpace(c.Arguments) == "":
		what = "are empty"
	case errors.As(err, &syn):
		what = fmt.Sprintf("are not valid JSON (%v at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		what = "are JSON " + typ.Value + ", not an object"
	case obj == nil:
		what = "are JSON null, not an object"
	}
	return fmt.Errorf("tool call %s (%s): arguments %s: %s", c.ID, c.Name, what, quoteHead(c.Arguments, 80))
}

// quoteHead is s quoted, cut to its first n bytes (on a rune boundary)
// with "..." when longer.
func quoteHead(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "..."
}

// Request is one provider call.
type Request struct {
	Model    string    `json:"model"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Mode     Mode      `json:"mode"`
	// Schema is the job's JSON Schema; used by ModeJSONSchema and ModeTool.
	Schema json.RawMessage `json:"schema,omitempty"`
	// SchemaName names the schema / tool on the wire. Defaults to "result".
	SchemaName  string   `json:"schema_name,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens caps output tokens; always sent to Anthropic (default 1024).
	MaxTokens int `json:"max_tokens,omitempty"`
	// User is an opaque end-user / job identifier sent as OpenAI "user",
	// Anthropic metadata.user_id: a job's id and run (RequestUser). The
	// simulator keys its ground truth on the id and its faults on both.
	User string `json:"user,omitempty"`
	// CacheKey, when set, is sent as OpenAI's prompt_cache_key: requests
	// with the same key and the same prefix are routed to the same prompt
	// cache. Keep it stable for every request that shares the prefix (one
	// key per batch and schema; the system prompt is that prefix and goes
	// first). Anthropic and Ollama ignore it. A compatible server that
	// rejects unknown fields must be sent none.
	CacheKey string `json:"cache_key,omitempty"`
	// CacheSystem asks Anthropic to cache the system prompt: it is sent as
	// one text block with cache_control {"type":"ephemeral"} (the 5-minute
	// cache) when it is long enough for the model to cache (see
	// llm.AnthropicCacheMinTokens), and as a plain string otherwise. OpenAI
	// caches on its own and Ollama has no cache: both ignore it.
	CacheSystem bool `json:"cache_system,omitempty"`
	// Tools are the functions the model may call, with ModePrompt (the
	// forced tool of ModeTool is made of Schema). The reply's calls are
	// in Response.ToolCalls.
	Tools      []Tool     `json:"tools,omitempty"`
	ToolChoice ToolChoice `json:"tool_choice,omitzero"`
	// ServiceTier, when ServiceTierFlex, asks the provider to serve the
	// call on its flex tier (OpenAI's service_tier): slower, at batch
	// prices, and refused with a capacity 429 when the tier is short
	// (ClassCapacity). "" is the provider's default tier. Only providers
	// whose row has the flex delivery are sent it.
	ServiceTier string `json:"service_tier,omitempty"`
}

// ServiceTierFlex is Request.ServiceTier for the flex tier.
const ServiceTierFlex = "flex"

// FinishReason is the provider's stop reason, normalized.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishRefusal       FinishReason = "refusal"
	FinishTool          FinishReason = "tool"
	FinishContentFilter FinishReason = "content_filter"
)

// Usage is the token accounting of one call, the same for every provider.
// InputTokens is every input token of the call, those read from and those
// written to the provider's prompt cache included (OpenAI's prompt_tokens
// already count them; Anthropic's input_tokens do not, so its
// cache_read_input_tokens and cache_creation_input_tokens are added).
// CachedInputTokens is the part read from the cache (OpenAI
// prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens),
// CacheWriteTokens the part written to it (Anthropic
// cache_creation_input_tokens, billed above the input price; OpenAI and
// Ollama report none). The rest, InputTokens − CachedInputTokens −
// CacheWriteTokens, is billed at the input price.
type Usage struct {
	InputTokens       int `json:"input_tokens"`
	OutputTokens      int `json:"output_tokens"`
	CachedInputTokens int `json:"cached_input_tokens"`
	CacheWriteTokens  int `json:"cache_write_tokens,omitempty"`
}

// MaxCallTokens bounds each token count one call can truly report: 10
// million, five times the largest context window offered today (2
// million), so no real call reaches it, and far below where a count or its
// cost would overflow the ledger's columns (10 million tokens at $1,000 a
// million is $10,000; cost_usd holds ten digits before the point).
const MaxCallTokens = 10_000_000

// Implausible says why u cannot be what any call used, "" when it can: a
// count below zero or over MaxCallTokens, or more input read from or
// written to the cache than input. Such usage is a provider anomaly:
// priced as reported, a negative count lifts a spend cap and a huge one
// overflows the ledger, so the call is charged by an estimate instead
// (the reported counts kept in the attempt's provider_error). See
// Anomaly for the bounds a known request adds.
func (u Usage) Implausible() string {
	var bad []string
	for _, c := range []struct {
		name string
		n    int
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cached input", u.CachedInputTokens}, {"cache write", u.CacheWriteTokens}} {
		switch {
		case c.n < 0:
			bad = append(bad, fmt.Sprintf("%s tokens %d below zero", c.name, c.n))
		case c.n > MaxCallTokens:
			bad = append(bad, fmt.Sprintf("%s tokens %d over %d", c.name, c.n, MaxCallTokens))
		}
	}
	if len(bad) == 0 && u.CachedInputTokens+u.CacheWriteTokens > u.InputTokens {
		bad = append(bad, fmt.Sprintf("cached %d and cache write %d tokens over the input's %d", u.CachedInputTokens, u.CacheWriteTokens, u.InputTokens))
	}
	return strings.Join(bad, ", ")
}

// InputSlackTokens is the input a provider may add to the text a request
// sends: its chat template, the tool definitions and the instructions it
// adds for structured output (Anthropic's tool use alone adds some 350
// tokens).
const InputSlackTokens = 4096

// TextBytes is the length of the text req sends: its system prompt, its
// schema, its tools and its messages with their tool calls.
func (r *Request) TextBytes() int {
	n := len(r.System) + len(r.Schema)
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	for _, m := range r.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// EstimateUsage is what a call of req that got a reply of replyBytes is
// charged when the provider's own count cannot be used (an anomaly, or a
// reply that could not be read): a quarter of the bytes, in and out, the
// measure the lanes' token budgets use too.
// The output is at most the request's MaxTokens: a reply of 50 MB was not
// billed 12 million tokens.
func EstimateUsage(req *Request, replyBytes int64) Usage {
	in, out := 0, (max(replyBytes, 0)+3)/4
	if req != nil {
		in = (req.TextBytes() + 3) / 4
		if req.MaxTokens > 0 {
			out = min(out, int64(req.MaxTokens))
		}
	}
	return Usage{InputTokens: in, OutputTokens: int(min(out, MaxCallTokens))}
}

// MaxInputTokens is the most input a call of r can truly be billed: every
// token is at least one byte of the text sent (byte-level tokenizers, and
// SentencePiece with byte fallback, never make more tokens than bytes),
// plus InputSlackTokens of the provider's own.
func (r *Request) MaxInputTokens() int { return r.TextBytes() + InputSlackTokens }

// Anomaly says why u cannot be what a call of req used, "" when it can:
// what Implausible says, or more than req could have cost: input over
// MaxInputTokens, or output over req's MaxTokens (every provider is sent
// that cap). Such usage is charged by an estimate, the reported counts
// kept in the attempt's provider_error: priced as reported, a few calls
// claiming millions of tokens for a short prompt would spend a batch's cap
// many times over, since a call holds only what its request can cost. A
// nil req adds no bound to Implausible.
func (u Usage) Anomaly(req *Request) string {
	if why := u.Implausible(); why != "" || req == nil {
		return why
	}
	var bad []string
	if limit := req.MaxInputTokens(); u.InputTokens > limit {
		bad = append(bad, fmt.Sprintf("input tokens %d over the %d the request could take (%d bytes sent)", u.InputTokens, limit, req.TextBytes()))
	}
	if req.MaxTokens > 0 && u.OutputTokens > req.MaxTokens {
		bad = append(bad, fmt.Sprintf("output tokens %d over the request's max_tokens %d", u.OutputTokens, req.MaxTokens))
	}
	return strings.Join(bad, ", ")
}

// Retry is one transport retry made inside a call.
type Retry struct {
	Class  ErrorClass    `json:"class"`
	Status int           `json:"status,omitempty"`
	Wait   time.Duration `json:"wait"`
}

// Response is one completed provider call.
type Response struct {
	// Text is the reply text, or the tool call's arguments in ModeTool.
	Text string `json:"text"`
	// ToolCalls are the reply's tool calls, in order, when the request
	// offered Tools (ModeTool's answer is in Text).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Refusal is the provider's refusal text, when it reports one separately.
	Refusal      string       `json:"refusal,omitempty"`
	FinishReason FinishReason `json:"finish_reason"`
	Usage        Usage        `json:"usage"`
	// Model is the model as the provider reported it.
	Model     string        `json:"model"`
	RequestID string        `json:"request_id,omitempty"`
	Status    int           `json:"status"`
	Latency   time.Duration `json:"latency"`
	// SentAt is when the request that got this response was sent: after
	// the wait for the lane's budgets and slot, and after any transport
	// retries. Latency runs from it. Zero for a reply read from a provider
	// batch.
	SentAt time.Time `json:"sent_at,omitzero"`
	// ServiceTier is the tier the provider says it served the call on
	// (OpenAI's service_tier: "flex", "default", ...), "" when the reply
	// names none. A flex request that fell back to the default tier
	// (llm.Config.FlexFallbackAfter) says "default".
	ServiceTier string `json:"service_tier,omitempty"`
	// RateLimit holds the rate-limit headers seen on the final response.
	RateLimit map[string]string `json:"rate_limit,omitempty"`
	// Retries lists the transport retries made before this response.
	Retries []Retry `json:"retries,omitempty"`
	// DroppedKeywords lists schema keywords left out of what was sent because
	// the provider does not accept them (the full schema is still validated).
	DroppedKeywords []string `json:"dropped_keywords,omitempty"`
	// UsageAnomaly, when not "", says the provider reported usage that
	// cannot be true (Usage.Implausible) and what it was: Usage is then an
	// estimate (the request's size for input, the reply's for output).
	UsageAnomaly string `json:"usage_anomaly,omitempty"`
}
