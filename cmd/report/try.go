package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

// The Try playground of report serve: the simulator's presets, each
// started in this process on first use, and the providers with the keys
// and base URLs of the environment (a key typed in the page serves that
// try alone).

// tryEnvHelp lists each provider's variables, from the provider table.
var tryEnvHelp = tryEnv()

func tryEnv() string {
	var lines []string
	for _, r := range llm.Providers() {
		if r.KeyEnv != "" {
			lines = append(lines, fmt.Sprintf("  %-22s the Try playground's key for %s (default none: the page asks for one; never logged or stored)", r.KeyEnv, r.Name))
		}
		lines = append(lines, fmt.Sprintf("  %-22s base URL of the playground's %s (default %s)", r.BaseURLEnv, r.Name, r.BaseURLDefault))
	}
	return strings.Join(lines, "\n")
}

// trySimLatency is the simulator's think time in the playground: enough
// for the page to show each stage light up.
var trySimLatency = sim.Latency{RequestP50: 300 * time.Millisecond, RequestP99: 1200 * time.Millisecond}

// newPlayground is the playground over sims and the environment's
// providers, one for each row of the provider table.
func newPlayground(sims *playground.SimPresets) *playground.Trier {
	var providers []playground.Provider
	for _, r := range llm.Providers() {
		p := playground.Provider{Name: r.Name, BaseURL: os.Getenv(r.BaseURLEnv), DefaultModel: r.DefaultModel}
		if r.KeyEnv != "" {
			p.Key = os.Getenv(r.KeyEnv)
		}
		providers = append(providers, p)
	}
	return playground.New(playground.Config{Simulator: sims, Providers: providers})
}
