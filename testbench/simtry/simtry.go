// Package simtry serves the simulator's presets to the Try playground
// (web/playground's Simulator): each preset's simulator starts in this
// process on first use and stops at Close. report serve and the web tests
// use it.
package simtry

import (
	"sync"

	"github.com/fixpoint-dev/fixpoint/testbench/sim"
	"github.com/fixpoint-dev/fixpoint/web"
)

// Presets starts a simulator per preset when a try first asks for it.
type Presets struct {
	// Latency is each simulator's think time.
	Latency sim.Latency

	mu      sync.Mutex
	urls    map[string]string
	closers []func()
}

// Presets lists the simulator's presets.
func (s *Presets) Presets() []web.TryPreset {
	var out []web.TryPreset
	for _, p := range sim.PresetNames() {
		out = append(out, web.TryPreset{Name: p.Name, Description: p.Description})
	}
	return out
}

// BaseURL is the OpenAI-compatible base URL of preset's simulator,
// started now if it is not running.
func (s *Presets) BaseURL(preset string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.urls[preset]; ok {
		return u, nil
	}
	cfg, err := sim.Preset(preset)
	if err != nil {
		return "", err
	}
	cfg.Seed, cfg.Latency = 1, s.Latency
	_, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		return "", err
	}
	if s.urls == nil {
		s.urls = map[string]string{}
	}
	s.urls[preset] = url + "/v1"
	s.closers = append(s.closers, closeSim)
	return url + "/v1", nil
}

// Close stops the simulators started.
func (s *Presets) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		c()
	}
	s.closers, s.urls = nil, nil
}
