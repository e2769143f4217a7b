// Package llm calls language-model providers (OpenAI-compatible Chat
// Completions, Anthropic Messages, Ollama chat) over HTTP, with one transport
// retry layer, per-lane rate limits and an adaptive concurrency limit.
//
// It knows nothing of NATS or Postgres. Its simulator lives in package sim.
package llm

// Provider names: the rows of the provider table (Providers) that code
// names on its own.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderOllama    = "ollama"
)
