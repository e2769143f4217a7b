// Package playground runs the dashboard's Try playground: it is the
// web.Trier report serve gives web.NewHandler. A try is one job through
// pipeline.Try, the repair step a worker runs, calling a provider (with
// the server's key or one typed in the form, for that try only) or the
// simulator at one of its presets.
//
// The dashboard (package web) links no provider client and no simulator;
// this package links the provider clients and the simulator (package sim):
// the command gives it a Simulator, SimPresets in report serve.
package playground

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web"
)

// Simulator serves the simulator's presets over the OpenAI wire format.
type Simulator interface {
	// Presets lists the presets with what each does.
	Presets() []web.TryPreset
	// BaseURL is the OpenAI-compatible base URL (ending in /v1) of a
	// simulator at preset, started on first use.
	BaseURL(preset string) (string, error)
}

// Provider is a provider a try may call.
type Provider struct {
	// Name is the name of a row of the provider table (llm.Providers).
	Name string
	// BaseURL is its API root ("": the provider's default). A try cannot
	// change it: the server calls no URL a form gives.
	BaseURL string
	// Key is the server's key for it ("": none; a try must type one).
	Key string
	// DefaultModel is the model the form suggests.
	DefaultModel string
}

// Config configures the playground.
type Config struct {
	// Simulator serves the presets; nil offers none.
	Simulator Simulator
	// Providers are the providers offered.
	Providers []Provider
	// CallTimeout bounds one provider call (llm.Config.TotalTimeout).
	// Default 60 s.
	CallTimeout time.Duration
	// TransportRetries is the transport retries of a call. Default 2.
	TransportRetries int
}

// Trier is the playground.
type Trier struct {
	cfg     Config
	example func() *web.TryExample
}

var _ web.Trier = (*Trier)(nil)

// New returns the playground of cfg.
func New(cfg Config) *Trier {
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 60*time.Second)
	cfg.TransportRetries = cmp.Or(cfg.TransportRetries, 2)
	return &Trier{cfg: cfg, example: sync.OnceValue(exampleDocument)}
}

// exampleDocument is the document job the form offers with the
// simulator: a simulated agreement of the shortest length the simulator
// writes (about four chunks at the default size), its schema and prompt.
// nil if the simulator cannot write it.
func exampleDocument() *web.TryExample {
	d, err := sim.NewDocument(1, 0, "en", sim.DocumentMinChars)
	if err != nil {
		return nil
	}
	prompt := strings.ReplaceAll(sim.DocumentTemplate, "{{.id}}", "FA-1")
	return &web.TryExample{Schema: sim.DocumentSchema, Prompt: strings.TrimSpace(prompt), Document: d.Text}
}

// Choices implements web.Trier.
func (t *Trier) Choices() web.TryChoices {
	var c web.TryChoices
	if t.cfg.Simulator != nil {
		c.Presets = t.cfg.Simulator.Presets()
		c.Example = t.example()
	}
	for _, p := range t.cfg.Providers {
		row, _ := llm.ProviderNamed(p.Name)
		c.Providers = append(c.Providers, web.TryProvider{Name: p.Name, HasKey: p.Key != "",
			NeedsKey: row.KeyRequired, DefaultModel: p.DefaultModel})
	}
	return c
}

// Prepare implements web.Trier: it checks req with pipeline.TryJob and
// builds the client of its calls, holding req.Key for them alone.
func (t *Trier) Prepare(req web.TryRequest) (web.TryFunc, error) {
	// A document job's values are graded against its document (TryJob),
	// as a batch's with evidence source "document".
	spec := pipeline.TrySpec{Model: req.Model, Prompt: req.Prompt, Schema: req.Schema, Mode: req.Mode, Limits: req.Limits, MaxTokens: req.MaxTokens,
		Document: req.Document}
	cfg := llm.Config{TotalTimeout: t.cfg.CallTimeout,
		Retry: llm.RetryConfig{MaxRetries: t.cfg.TransportRetries},
		Lane:  llm.LaneConfig{MaxHintWait: 10 * time.Second}}
	switch {
	case req.Preset != "":
		if t.cfg.Simulator == nil {
			return nil, errors.New("this dashboard runs no simulator")
		}
		url, err := t.cfg.Simulator.BaseURL(req.Preset)
		if err != nil {
			return nil, fmt.Errorf("simulator %s: %w", req.Preset, err)
		}
		spec.Provider, spec.Nonce = llm.ProviderOpenAI, req.Seed
		spec.Model = cmp.Or(spec.Model, "sim-"+req.Preset)
		cfg.Provider, cfg.BaseURL, cfg.APIKey = llm.ProviderOpenAI, url, "sim"
	default:
		var p *Provider
		for i := range t.cfg.Providers {
			if t.cfg.Providers[i].Name == req.Provider {
				p = &t.cfg.Providers[i]
			}
		}
		if p == nil {
			return nil, fmt.Errorf("provider %q is not offered here", req.Provider)
		}
		spec.Provider = p.Name
		spec.Model = cmp.Or(spec.Model, p.DefaultModel)
		cfg.Provider, cfg.BaseURL, cfg.APIKey = p.Name, p.BaseURL, cmp.Or(req.Key, p.Key)
		if row, _ := llm.ProviderNamed(p.Name); cfg.APIKey == "" && row.KeyRequired {
			return nil, fmt.Errorf("%s needs an API key: type one, or pick a simulator preset", p.Name)
		}
	}
	job, err := pipeline.TryJob(spec)
	if err != nil {
		return nil, err
	}
	client, err := llm.New(cfg)
	if err != nil {
		// The configuration, never the key: llm's errors name the field.
		return nil, fmt.Errorf("provider client: %w", err)
	}
	return func(ctx context.Context, progress func(web.TryEvent)) (*fixpoint.Result, error) {
		hooks := pipeline.LoopHooks{
			SentFunc: func(a *fixpoint.Attempt) {
				if a != nil {
					progress(web.TryEvent{Sent: a.No})
				}
			},
			AttemptFunc: func(a *fixpoint.Attempt) { progress(web.TryEvent{Attempt: a}) },
		}
		return pipeline.Try(ctx, client, job, hooks)
	}, nil
}
