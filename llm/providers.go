package llm

import (
	"slices"

	"github.com/fixpoint-dev/fixpoint"
)

// Wire is a wire format: the shape of a provider's requests and replies.
// Providers differ in facts (their row in Providers) and speak one of
// these; the behaviour that differs lives with the wire format.
type Wire string

// Wire formats.
const (
	// WireOpenAIChat is Chat Completions (POST {base}/chat/completions),
	// with a Bearer key.
	WireOpenAIChat Wire = "openai-chat"
	// WireAnthropic is the Messages API (POST {base}/v1/messages), with
	// an x-api-key and an anthropic-version header.
	WireAnthropic Wire = "anthropic"
	// WireOllama is Ollama's native chat (POST {base}/api/chat).
	WireOllama Wire = "ollama"
)

// Delivery is a way a provider's calls are delivered and billed.
type Delivery string

// Deliveries. Every provider has DeliveryRealtime.
const (
	// DeliveryRealtime is one call answered at once, at the list price.
	DeliveryRealtime Delivery = "realtime"
	// DeliveryBatch is the provider's batch API: requests submitted
	// together, answered within a day, at half the list price.
	DeliveryBatch Delivery = "batch"
	// DeliveryFlex is the provider's flex tier: the realtime call with
	// service_tier flex, at batch rates, slower, and refused with a
	// capacity 429 when the tier is short (docs/delivery.md).
	DeliveryFlex Delivery = "flex"
)

// Native is how a provider is asked for a mode's structured output in
// its own terms. Each has the schema subset it accepts (docs/providers.md);
// what is left out of the subset is still checked by the local validator,
// which is the judge of every reply whatever the provider promised.
type Native string

// Native modes.
const (
	// NativeResponseFormat is Chat Completions' response_format
	// json_schema with strict: true, the schema reduced to OpenAI's
	// strict subset (strictSchema); a schema that cannot be reduced is
	// sent as given with strict: false.
	NativeResponseFormat Native = "response_format json_schema (strict)"
	// NativeFunctionForced is Chat Completions' tools with a tool_choice
	// naming the one function, its parameters in the strict subset.
	NativeFunctionForced Native = "forced function call (strict)"
	// NativeToolForced is the Messages API's tool_choice {type: tool}:
	// the schema, as given, is a tool's input_schema.
	NativeToolForced Native = "forced tool_use"
	// NativeOutputConfig is the Messages API's structured outputs,
	// output_config.format {type: json_schema}, the schema reduced to
	// Anthropic's subset (anthropicSchema). A model that predates it, or
	// a schema the subset cannot hold (a recursive one), gets
	// NativeToolForced instead.
	NativeOutputConfig Native = "output_config.format json_schema"
	// NativeFormat is Ollama's format: the whole schema, which its
	// grammar follows as far as it can.
	NativeFormat Native = "format (whole schema)"
	// NativeToolOffered is a tool offered but not forced (Ollama cannot
	// force a call): a text answer comes back as text.
	NativeToolOffered Native = "tool offered, not forced"
)

// Body fields a provider may refuse (Provider.Omit): the request carries
// them on other providers.
const (
	// FieldUser is Chat Completions' "user", the end user's id.
	FieldUser = "user"
	// FieldPromptCacheKey is OpenAI's "prompt_cache_key".
	FieldPromptCacheKey = "prompt_cache_key"
)

// omittable are the fields the Chat Completions encoder can leave out.
var omittable = []string{FieldUser, FieldPromptCacheKey}

// Provider is one row of the provider table: what fixpoint knows of a
// provider. Commands, their help, the generated configuration page and
// the tests read it; adding a provider is a row here, a row of prices
// (repair.DefaultPrices) and whatever quirk it has that no column says.
type Provider struct {
	// Name is what --provider takes and the ledger records.
	Name string
	// Wire is the wire format it speaks.
	Wire Wire
	// BaseURLDefault is its API root when none is given.
	BaseURLDefault string
	// KeyEnv is the environment variable of its API key; "" when it
	// takes none.
	KeyEnv string
	// BaseURLEnv is the environment variable of its base URL.
	BaseURLEnv string
	// KeyRequired: its API at BaseURLDefault refuses every call without
	// a key. Another base URL (a compatible server) may not.
	KeyRequired bool
	// Deliveries are the deliveries it has, DeliveryRealtime first.
	Deliveries []Delivery
	// Modes says how each mode that sends the schema is asked for
	// natively (ModePrompt sends none anywhere).
	Modes map[fixpoint.Mode]Native
	// Omit lists the body fields it refuses (FieldUser, ...): they are
	// left out of its requests.
	Omit []string
	// DefaultModel is the model a form or an example suggests.
	DefaultModel string
	// Description is one line for help texts and the docs.
	Description string
}

// Has reports whether p has delivery d.
func (p Provider) Has(d Delivery) bool { return slices.Contains(p.Deliveries, d) }

// Omits reports whether p's requests leave out the body field f.
func (p Provider) Omits(f string) bool { return slices.Contains(p.Omit, f) }

// providers is the table, in the order help texts list it.
var providers = []Provider{
	{
		Name: ProviderOpenAI, Wire: WireOpenAIChat,
		BaseURLDefault: BaseURLOpenAIDefault, KeyEnv: "OPENAI_API_KEY", BaseURLEnv: "OPENAI_BASE_URL", KeyRequired: true,
		Deliveries:   []Delivery{DeliveryRealtime, DeliveryBatch, DeliveryFlex},
		Modes:        map[fixpoint.Mode]Native{fixpoint.ModeJSONSchema: NativeResponseFormat, fixpoint.ModeTool: NativeFunctionForced},
		DefaultModel: "gpt-4o-mini",
		Description:  "OpenAI Chat Completions, or any compatible server (vLLM, LM Studio, llama.cpp, OpenRouter, Groq)",
	},
	{
		Name: ProviderAnthropic, Wire: WireAnthropic,
		BaseURLDefault: BaseURLAnthropicDefault, KeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyRequired: true,
		Deliveries:   []Delivery{DeliveryRealtime, DeliveryBatch},
		Modes:        map[fixpoint.Mode]Native{fixpoint.ModeJSONSchema: NativeOutputConfig, fixpoint.ModeTool: NativeToolForced},
		DefaultModel: "claude-haiku-4-5",
		Description:  "Anthropic Messages API",
	},
	{
		Name: ProviderOllama, Wire: WireOllama,
		BaseURLDefault: BaseURLOllamaDefault, BaseURLEnv: "OLLAMA_BASE_URL",
		Deliveries:   []Delivery{DeliveryRealtime},
		Modes:        map[fixpoint.Mode]Native{fixpoint.ModeJSONSchema: NativeFormat, fixpoint.ModeTool: NativeToolOffered},
		DefaultModel: "llama3.1",
		Description:  "Ollama's native chat API",
	},
	{
		// Chat Completions, but a body field it does not know is a 422.
		Name: "mistral", Wire: WireOpenAIChat,
		BaseURLDefault: "https://api.mistral.ai/v1", KeyEnv: "MISTRAL_API_KEY", BaseURLEnv: "MISTRAL_BASE_URL", KeyRequired: true,
		Deliveries:   []Delivery{DeliveryRealtime},
		Modes:        map[fixpoint.Mode]Native{fixpoint.ModeJSONSchema: NativeResponseFormat, fixpoint.ModeTool: NativeFunctionForced},
		Omit:         []string{FieldUser, FieldPromptCacheKey},
		DefaultModel: "mistral-small-latest",
		Description:  "Mistral's chat completions (OpenAI-compatible)",
	},
}

// Providers returns the provider table, one row per provider.
func Providers() []Provider {
	out := make([]Provider, len(providers))
	copy(out, providers)
	return out
}

// ProviderNamed returns the row of the provider called name.
func ProviderNamed(name string) (Provider, bool) {
	for _, p := range providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// ProviderNames returns the providers' names, in the table's order.
func ProviderNames() []string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name
	}
	return names
}

// HasBatchAPI reports whether the provider called name has a batch API.
func HasBatchAPI(name string) bool {
	p, ok := ProviderNamed(name)
	return ok && p.Has(DeliveryBatch)
}

// HasFlex reports whether the provider called name has a flex tier.
func HasFlex(name string) bool {
	p, ok := ProviderNamed(name)
	return ok && p.Has(DeliveryFlex)
}

// WireOf returns the wire format of the provider called name, "" for a
// name the table lacks.
func WireOf(name string) Wire {
	p, _ := ProviderNamed(name)
	return p.Wire
}

// wireInfo is what the client needs of a wire format.
type wireInfo struct {
	// chatPath is the completion endpoint under the base URL.
	chatPath string
	// modelsPath lists the models, for CheckKey; "" when the wire format
	// takes no key to check.
	modelsPath string
	// requestIDHeader carries the server's id of a request.
	requestIDHeader string
}

var wires = map[Wire]wireInfo{
	WireOpenAIChat: {chatPath: "/chat/completions", modelsPath: "/models", requestIDHeader: "X-Request-Id"},
	WireAnthropic:  {chatPath: "/v1/messages", modelsPath: "/v1/models", requestIDHeader: "Request-Id"},
	WireOllama:     {chatPath: "/api/chat", requestIDHeader: "X-Request-Id"},
}
