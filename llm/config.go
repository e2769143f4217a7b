package llm

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults for Config. Each tunable has its default next to it.
const (
	BaseURLOpenAIDefault    = "https://api.openai.com/v1"
	BaseURLAnthropicDefault = "https://api.anthropic.com"
	BaseURLOllamaDefault    = "http://127.0.0.1:11434"

	AnthropicVersionDefault = "2023-06-01"
	// AnthropicMaxTokensDefault is sent when Request.MaxTokens is 0, because
	// the Messages API requires max_tokens.
	AnthropicMaxTokensDefault = 1024

	ConnectTimeoutDefault   = 10 * time.Second
	FirstByteTimeoutDefault = 120 * time.Second
	IdleTimeoutDefault      = 30 * time.Second
	TotalTimeoutDefault     = 300 * time.Second
	MaxBodyBytesDefault     = 4 << 20
	// FlexTimeoutDefault bounds one flex-tier attempt: OpenAI's flex guide
	// raises its SDKs' timeout to 15 minutes for it, the tier being slow
	// (https://developers.openai.com/api/docs/guides/flex-processing).
	FlexTimeoutDefault = 15 * time.Minute
	// FlexFallbackAfterDefault is how long a flex call keeps retrying
	// capacity 429s before it goes to the default tier. Ten minutes is
	// long enough to ride out a short capacity dip, which is what saves
	// half the price, and short enough that a job stuck on a tier with no
	// capacity costs the night at most a few of its calls' full price,
	// not hours.
	FlexFallbackAfterDefault = 10 * time.Minute
	// FlexNoFallback, as Config.FlexFallbackAfter, keeps a flex call on the
	// flex tier until it is served or its context ends.
	FlexNoFallback time.Duration = -1

	RetryInitialIntervalDefault     = 500 * time.Millisecond
	RetryMultiplierDefault          = 2.0
	RetryRandomizationFactorDefault = 0.5
	RetryMaxIntervalDefault         = 30 * time.Second
	RetryMaxElapsedTimeDefault      = 2 * time.Minute
	RetryMaxRetriesDefault          = 4

	LaneInitialConcurrencyDefault = 4
	LaneMinConcurrencyDefault     = 1
	LaneMaxConcurrencyDefault     = 64
	LaneResumeSpacingDefault      = 50 * time.Millisecond
	LaneQuotaCooldownDefault      = 5 * time.Minute
	// LaneMaxHintWaitDefault is the longest wait a server's retry hint may
	// impose (LaneConfig.MaxHintWait). The official SDKs also sleep a
	// Retry-After only up to a bound; a longer one is handed back.
	LaneMaxHintWaitDefault = 120 * time.Second
	// OutputTokensEstimateDefault is the output-token estimate charged to the
	// TPM budget when Request.MaxTokens is 0.
	OutputTokensEstimateDefault = 1024
)

// ErrConfig is wrapped by every configuration validation error.
var ErrConfig = errors.New("invalid llm config")

// Config configures a Client. The zero value of every field means its
// default; see WithDefaults.
type Config struct {
	// Provider is the name of a row of the provider table (Providers):
	// "openai" (any Chat Completions compatible server), "anthropic",
	// "ollama", ... Required.
	Provider string
	// BaseURL is the API root. Default: the provider's BaseURLDefault.
	BaseURL string
	// APIKey is sent as "x-api-key" on the Anthropic wire format, as
	// "Authorization: Bearer" on the others. It is never put in an error
	// or a Response. With no key, neither header is sent.
	APIKey string
	// AnthropicVersion is the anthropic-version header. Default "2023-06-01".
	AnthropicVersion string
	// OpenAIMaxTokensParam names the output cap on the wire for openai:
	// "max_completion_tokens" or "max_tokens". Default: max_completion_tokens
	// for api.openai.com (reasoning models reject max_tokens), max_tokens for
	// every other base URL (vLLM, llama.cpp, Ollama /v1, LM Studio).
	OpenAIMaxTokensParam string

	// ConnectTimeout bounds dialing and the TLS handshake. Default 10s.
	// Applies only to the transport New builds (not to a given HTTPClient).
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the time from the start of an attempt to the
	// response headers. Default 120s.
	FirstByteTimeout time.Duration
	// IdleTimeout is the longest gap allowed between two reads of the body; a
	// server that trickles bytes slower than this is cut off. Default 30s.
	IdleTimeout time.Duration
	// TotalTimeout bounds one attempt from start to the last body byte.
	// Default 300s. Retries are bounded by Retry.MaxElapsedTime.
	TotalTimeout time.Duration
	// MaxBodyBytes caps the response body. A bigger 2xx body fails with
	// ClassTooLarge, which is not retried (the reply was made and billed);
	// a bigger error body keeps the class of its status. Either way the
	// error carries the body's size and first bytes (Error.Size, Head).
	// Default 4 MiB.
	MaxBodyBytes int64

	// FlexTimeout bounds one attempt of a flex-tier call (Request.ServiceTier
	// flex) in place of TotalTimeout and FirstByteTimeout: the tier
	// answers slower, and a non-streamed reply sends its headers last.
	// Default 15m (FlexTimeoutDefault).
	FlexTimeout time.Duration
	// FlexFallbackAfter is how long, from its first try, a flex call
	// retries capacity 429s (ClassCapacity) before it is sent again without
	// the tier, on the default tier at the default price. Default 10m
	// (FlexFallbackAfterDefault); FlexNoFallback (any negative value) keeps
	// it on the flex tier. Capacity retries are not counted against
	// Retry.MaxRetries or Retry.MaxElapsedTime.
	FlexFallbackAfter time.Duration

	// Retry configures the transport retries.
	Retry RetryConfig
	// Lane configures the rate limits and concurrency of each lane.
	Lane LaneConfig

	// HTTPClient, when set, is used instead of the client New builds. Its own
	// Timeout should be 0 or above TotalTimeout.
	HTTPClient *http.Client
	// Clock drives backoff waits and lane limits. Default: the real clock.
	Clock Clock
	// Lanes is the registry lanes are taken from. Clients that share a
	// registry share the limiter of a lane; lanes then use the registry's
	// clock and observer. Default: a registry of its own built from Clock
	// and Observer.
	Lanes *Registry
	// Observer receives OnCall for every HTTP attempt (and the lane events
	// when the client builds its own registry). Default: none.
	Observer Observer
}

// RetryConfig configures the transport retries (exponential backoff with
// jitter, github.com/cenkalti/backoff/v4). The wait before a retry is the
// larger of the backoff interval and the server's retry hint; a hint over
// LaneConfig.MaxHintWait is not slept but returned (see Error.HintOverCap).
type RetryConfig struct {
	// InitialInterval is the first backoff interval. Default 500ms.
	InitialInterval time.Duration
	// Multiplier grows the interval after each retry. Default 2.
	Multiplier float64
	// RandomizationFactor is the jitter: the interval is drawn from
	// [i*(1-f), i*(1+f)]. Default 0.5; set NoJitter for none.
	RandomizationFactor float64
	// NoJitter sets the randomization factor to 0 (useful in tests).
	NoJitter bool
	// MaxInterval caps one backoff interval (not a server hint). Default 30s.
	MaxInterval time.Duration
	// MaxElapsedTime stops retrying once the next wait would end after it,
	// measured from the first attempt. Default 2m.
	MaxElapsedTime time.Duration
	// MaxRetries is the most retries after the first attempt. Default 4;
	// set Disabled for none.
	MaxRetries int
	// Disabled turns transport retries off.
	Disabled bool
}

// LaneConfig configures a lane: the budgets and concurrency shared by every
// call to one (provider, base URL, model, API key).
type LaneConfig struct {
	// RPM is the request-per-minute budget; 0 means unlimited. Requests are
	// spaced evenly, so no 60s window holds more than RPM requests.
	RPM int
	// TPM is the token-per-minute budget; 0 means unlimited. A request is
	// charged (prompt bytes)/4 + max tokens before it is sent, and any excess
	// of the reported usage after it returns.
	TPM int
	// TPMBurst is the token bucket size; default TPM/10. The refill rate is
	// (TPM-TPMBurst)/60 per second so that no 60s window holds more than TPM
	// tokens. A request bigger than the burst is charged in several pieces.
	TPMBurst int
	// InitialConcurrency is the starting concurrency limit. Default 4.
	InitialConcurrency int
	// MinConcurrency is the floor of the adaptive limit. Default 1.
	MinConcurrency int
	// MaxConcurrency is the ceiling of the adaptive limit. Default 64.
	MaxConcurrency int
	// ResumeSpacing spreads the requests that waited out a pause: the n-th
	// waiter resumes n*ResumeSpacing after the pause ends. Default 50ms.
	ResumeSpacing time.Duration
	// QuotaCooldown is how long a lane refuses calls after quota_exhausted.
	// Default 5m.
	QuotaCooldown time.Duration
	// MaxHintWait caps the wait a server's retry hint may impose: a
	// Retry-After or retry-after-ms header, OpenAI's "try again in", or the
	// wait derived from the rate-limit reset headers. A hint up to it
	// pauses the lane and is slept by the transport retry layer; a longer
	// one does neither: Complete returns at once an *Error with HintOverCap
	// set and RetryAfter the full hint, so that the caller hands the job
	// back with that delay instead of freezing the lane or holding a
	// worker. Default 120s.
	MaxHintWait time.Duration
	// OutputTokensEstimate is the output tokens charged when the request sets
	// no MaxTokens. Default 1024.
	OutputTokensEstimate int
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if p, ok := ProviderNamed(c.Provider); ok {
		c.BaseURL = cmp.Or(c.BaseURL, p.BaseURLDefault)
	}
	c.BaseURL = trimBaseURL(c.BaseURL)
	c.AnthropicVersion = cmp.Or(c.AnthropicVersion, AnthropicVersionDefault)
	if c.OpenAIMaxTokensParam == "" {
		c.OpenAIMaxTokensParam = "max_tokens"
		if c.BaseURL == BaseURLOpenAIDefault {
			c.OpenAIMaxTokensParam = "max_completion_tokens"
		}
	}
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, ConnectTimeoutDefault)
	c.FirstByteTimeout = cmp.Or(c.FirstByteTimeout, FirstByteTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.TotalTimeout = cmp.Or(c.TotalTimeout, TotalTimeoutDefault)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.FlexTimeout = cmp.Or(c.FlexTimeout, FlexTimeoutDefault)
	c.FlexFallbackAfter = cmp.Or(c.FlexFallbackAfter, FlexFallbackAfterDefault)
	if c.FlexFallbackAfter < 0 {
		c.FlexFallbackAfter = FlexNoFallback
	}
	c.Retry = c.Retry.WithDefaults()
	c.Lane = c.Lane.WithDefaults()
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	return c
}

// WithDefaults returns a copy of r with every zero field set to its default.
func (r RetryConfig) WithDefaults() RetryConfig {
	r.InitialInterval = cmp.Or(r.InitialInterval, RetryInitialIntervalDefault)
	r.Multiplier = cmp.Or(r.Multiplier, RetryMultiplierDefault)
	r.RandomizationFactor = cmp.Or(r.RandomizationFactor, RetryRandomizationFactorDefault)
	if r.NoJitter {
		r.RandomizationFactor = 0
	}
	r.MaxInterval = cmp.Or(r.MaxInterval, RetryMaxIntervalDefault)
	r.MaxElapsedTime = cmp.Or(r.MaxElapsedTime, RetryMaxElapsedTimeDefault)
	r.MaxRetries = cmp.Or(r.MaxRetries, RetryMaxRetriesDefault)
	if r.Disabled {
		r.MaxRetries = 0
	}
	return r
}

// WithDefaults returns a copy of l with every zero field set to its default.
func (l LaneConfig) WithDefaults() LaneConfig {
	l.InitialConcurrency = cmp.Or(l.InitialConcurrency, LaneInitialConcurrencyDefault)
	l.MinConcurrency = cmp.Or(l.MinConcurrency, LaneMinConcurrencyDefault)
	l.MaxConcurrency = cmp.Or(l.MaxConcurrency, max(LaneMaxConcurrencyDefault, l.InitialConcurrency))
	l.ResumeSpacing = cmp.Or(l.ResumeSpacing, LaneResumeSpacingDefault)
	l.QuotaCooldown = cmp.Or(l.QuotaCooldown, LaneQuotaCooldownDefault)
	l.MaxHintWait = cmp.Or(l.MaxHintWait, LaneMaxHintWaitDefault)
	l.OutputTokensEstimate = cmp.Or(l.OutputTokensEstimate, OutputTokensEstimateDefault)
	if l.TPM > 0 && l.TPMBurst == 0 {
		l.TPMBurst = max(1, l.TPM/10)
	}
	return l
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

func (c Config) validate() error {
	if _, ok := ProviderNamed(c.Provider); !ok {
		return configErr("Provider", "%q is not one of %s", c.Provider, strings.Join(ProviderNames(), ", "))
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configErr("BaseURL", "%q is not an http(s) URL", RedactURL(c.BaseURL))
	}
	if c.OpenAIMaxTokensParam != "max_tokens" && c.OpenAIMaxTokensParam != "max_completion_tokens" {
		return configErr("OpenAIMaxTokensParam", "%q is not max_tokens or max_completion_tokens", c.OpenAIMaxTokensParam)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ConnectTimeout", c.ConnectTimeout}, {"FirstByteTimeout", c.FirstByteTimeout},
		{"IdleTimeout", c.IdleTimeout}, {"TotalTimeout", c.TotalTimeout}, {"FlexTimeout", c.FlexTimeout},
		{"Retry.InitialInterval", c.Retry.InitialInterval}, {"Retry.MaxInterval", c.Retry.MaxInterval},
		{"Retry.MaxElapsedTime", c.Retry.MaxElapsedTime},
	} {
		if d.v < 0 {
			return configErr(d.name, "%v must be positive", d.v)
		}
	}
	if c.MaxBodyBytes < 1024 {
		return configErr("MaxBodyBytes", "%d must be at least 1024", c.MaxBodyBytes)
	}
	if c.Retry.Multiplier < 1 {
		return configErr("Retry.Multiplier", "%v must be at least 1", c.Retry.Multiplier)
	}
	if c.Retry.RandomizationFactor < 0 || c.Retry.RandomizationFactor > 1 {
		return configErr("Retry.RandomizationFactor", "%v must be in [0, 1]", c.Retry.RandomizationFactor)
	}
	if c.Retry.MaxRetries < 0 {
		return configErr("Retry.MaxRetries", "%d must be >= 0", c.Retry.MaxRetries)
	}
	return c.Lane.validate()
}

func (l LaneConfig) validate() error {
	if l.RPM < 0 {
		return configErr("Lane.RPM", "%d must be >= 0 (0 = unlimited)", l.RPM)
	}
	if l.TPM < 0 {
		return configErr("Lane.TPM", "%d must be >= 0 (0 = unlimited)", l.TPM)
	}
	if l.TPM > 0 && (l.TPMBurst < 1 || l.TPMBurst >= l.TPM) {
		return configErr("Lane.TPMBurst", "%d must be in [1, TPM)", l.TPMBurst)
	}
	if l.MinConcurrency < 1 {
		return configErr("Lane.MinConcurrency", "%d must be >= 1", l.MinConcurrency)
	}
	if l.MaxConcurrency < l.MinConcurrency {
		return configErr("Lane.MaxConcurrency", "%d must be >= MinConcurrency %d", l.MaxConcurrency, l.MinConcurrency)
	}
	if l.InitialConcurrency < l.MinConcurrency || l.InitialConcurrency > l.MaxConcurrency {
		return configErr("Lane.InitialConcurrency", "%d must be in [MinConcurrency %d, MaxConcurrency %d]",
			l.InitialConcurrency, l.MinConcurrency, l.MaxConcurrency)
	}
	if l.MaxHintWait < 0 {
		return configErr("Lane.MaxHintWait", "%v must be positive", l.MaxHintWait)
	}
	if l.ResumeSpacing < 0 || l.QuotaCooldown < 0 || l.OutputTokensEstimate < 0 {
		return configErr("Lane", "ResumeSpacing, QuotaCooldown and OutputTokensEstimate must be >= 0")
	}
	return nil
}
