package llm

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// rateLimitHeader reports whether a response header is one recorded in
// Response.RateLimit.
func rateLimitHeader(lower string) bool {
	return strings.HasPrefix(lower, "x-ratelimit-") ||
		strings.HasPrefix(lower, "anthropic-ratelimit-") ||
		lower == "retry-after" || lower == "retry-after-ms"
}

// rateLimitHeaders copies the rate-limit headers of h, names lower-cased.
func rateLimitHeaders(h http.Header) map[string]string {
	var m map[string]string
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if !rateLimitHeader(lk) {
			continue
		}
		if m == nil {
			m = make(map[string]string, 8)
		}
		m[lk] = v[0]
	}
	return m
}

// retryAfter parses the server's explicit retry hint: retry-after-ms, then
// retry-after in seconds or as an HTTP date. Negative waits become 0.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return max(0, time.Duration(s*float64(time.Second))), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// resetHint derives a wait from the reset headers of the budgets that are
// spent (remaining 0); when none is reported spent, from the shortest reset.
// OpenAI sends durations ("6m0s", "1s", "20ms"), Anthropic RFC 3339 times;
// times in the past count as 0.
func resetHint(h http.Header, now time.Time) (time.Duration, bool) {
	var spent, any time.Duration
	var haveSpent, haveAny bool
	for k, v := range h {
		lk := strings.ToLower(k)
		var prefix string
		switch {
		case strings.HasPrefix(lk, "x-ratelimit-reset-"):
			prefix = "x-ratelimit-"
		case strings.HasPrefix(lk, "anthropic-ratelimit-") && strings.HasSuffix(lk, "-reset"):
			prefix = "anthropic-ratelimit-"
		default:
			continue
		}
		if len(v) == 0 {
			continue
		}
		d, ok := parseReset(v[0], now)
		if !ok {
			continue
		}
		var remaining string
		if prefix == "x-ratelimit-" {
			remaining = h.Get("x-ratelimit-remaining-" + strings.TrimPrefix(lk, "x-ratelimit-reset-"))
		} else {
			remaining = h.Get(strings.TrimSuffix(lk, "-reset") + "-remaining")
		}
		if remaining == "0" {
			spent, haveSpent = max(spent, d), true
		}
		if !haveAny || d < any {
			any, haveAny = d, true
		}
	}
	if haveSpent {
		return spent, true
	}
	return any, haveAny
}

func parseReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil {
		return max(0, d), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return max(0, t.Sub(now)), true
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return max(0, time.Duration(s*float64(time.Second))), true
	}
	return 0, false
}

// tryAgainRE finds OpenAI's "Please try again in 12.441s" / "in 579ms".
var tryAgainRE = regexp.MustCompile(`(?i)try again in (\d+(?:\.\d+)?(?:ms|s|m)(?:\d+(?:\.\d+)?(?:ms|s))?)`)

func messageHint(msg string) (time.Duration, bool) {
	m := tryAgainRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// providerError is the part of a provider error body we read.
type providerError struct {
	Message string
	Code    string // error.code, or error.type when no code
	Type    string
	ReqID   string
}

// classify maps a non-2xx response to an error class and retry hint.
func classify(provider string, status int, h http.Header, pe providerError, now time.Time) (ErrorClass, time.Duration) {
	explicit, hasExplicit := retryAfter(h, now)
	switch {
	case status == http.StatusTooManyRequests:
		if pe.Code == "insufficient_quota" || pe.Type == "insufficient_quota" {
			return ClassQuotaExhausted, 0
		}
		if hasExplicit {
			return ClassRateLimited, explicit
		}
		if provider == ProviderAnthropic {
			// Anthropic always sends retry-after on a transient 429.
			return ClassQuotaExhausted, 0
		}
		if d, ok := messageHint(pe.Message); ok {
			return ClassRateLimited, d
		}
		if d, ok := resetHint(h, now); ok {
			return ClassRateLimited, d
		}
		// An OpenAI-compatible server (vLLM, LM Studio, a proxy) or Ollama
		// may send a bare 429: back off and retry. Only OpenAI's own
		// insufficient_quota code and Anthropic's hintless 429 mean the
		// quota is gone.
		return ClassRateLimited, 0
	case status == 529 || status == http.StatusServiceUnavailable:
		return ClassOverloaded, explicit
	case status >= 500:
		return ClassServer, explicit
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ClassAuth, 0
	case status == http.StatusRequestTimeout:
		return ClassTimeout, explicit
	case status >= 400:
		return ClassBadRequest, 0
	}
	return ClassBadResponse, 0
}
