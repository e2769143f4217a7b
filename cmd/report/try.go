package main

import (
	"os"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

// The Try playground of report serve: the simulator's presets, each
// started in this process on first use, and the providers with the keys
// and base URLs of the environment (a key typed in the page serves that
// try alone).

const tryEnvHelp = `  OPENAI_API_KEY         the Try playground's key for openai (default none: the page asks for one; never logged or stored)
  OPENAI_BASE_URL        Chat Completions base URL of the playground's openai (default https://api.openai.com/v1)
  ANTHROPIC_API_KEY      the Try playground's key for anthropic (default none)
  ANTHROPIC_BASE_URL     Messages API base URL of the playground's anthropic (default https://api.anthropic.com)
  OLLAMA_BASE_URL        Ollama base URL of the playground (default http://127.0.0.1:11434)`

// trySimLatency is the simulator's think time in the playground: enough
// for the page to show each stage light up.
var trySimLatency = sim.Latency{RequestP50: 300 * time.Millisecond, RequestP99: 1200 * time.Millisecond}

// newPlayground is the playground over sims and the environment's
// providers.
func newPlayground(sims *playground.SimPresets) *playground.Trier {
	return playground.New(playground.Config{Simulator: sims, Providers: []playground.Provider{
		{Name: llm.ProviderOpenAI, BaseURL: os.Getenv("OPENAI_BASE_URL"), Key: os.Getenv("OPENAI_API_KEY"), DefaultModel: "gpt-4o-mini"},
		{Name: llm.ProviderAnthropic, BaseURL: os.Getenv("ANTHROPIC_BASE_URL"), Key: os.Getenv("ANTHROPIC_API_KEY"), DefaultModel: "claude-3-5-haiku-latest"},
		{Name: llm.ProviderOllama, BaseURL: os.Getenv("OLLAMA_BASE_URL"), DefaultModel: "llama3.1"},
	}})
}
