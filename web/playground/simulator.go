package playground

import (
	"sync"

	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web"
)

// SimPresets is the Simulator of the simulator's presets (package sim):
// each preset's simulator starts in this process when a try first asks
// for it, and stops at Close.
type SimPresets struct {
	// Latency is each simulator's think time.
	Latency sim.Latency

	mu      sync.Mutex
	urls    map[string]string
	closers []func()
}

// Presets lists the simulator's presets.
func (s *SimPresets) Presets() []web.TryPreset {
	var out []web.TryPreset
	for _, p := range sim.PresetNames() {
		out = append(out, web.TryPreset{Name: p.Name, Description: p.Description})
	}
	return out
}

// BaseURL is the OpenAI-compatible base URL of preset's simulator,
// started now if it is not running.
func (s *SimPresets) BaseURL(preset string) (string, error) {
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
func (s *SimPresets) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		c()
	}
	s.closers, s.urls = nil, nil
}
