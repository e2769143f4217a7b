package llm

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
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

// MaxRetryHint is the longest retry hint taken as meant. The longest
// window a provider resets is a day (a daily request or token quota), so
// a wait beyond it is no window at all but a broken or hostile server
// (Retry-After: 999999999 is 31 years): honoured, it held a job and its
// lane for as long. Such a hint is ignored, as if the server had sent
// none, and the call backs off as after a hint-less 429.
const MaxRetryHint = 24 * time.Hour

// plausibleHint reports whether a wait a server asked for is one to honour
// (at most MaxRetryHint). Seconds too many for a Duration are not.
func plausibleHint(seconds float64) bool {
	return seconds <= MaxRetryHint.Seconds()
}

// retryAfter parses the server's explicit retry hint: retry-after-ms, then
// retry-after in seconds or as an HTTP date. Negative waits become 0; a
// wait over MaxRetryHint is no hint.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 && plausibleHint(ms/1000) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !plausibleHint(s) {
			return 0, false
		}
		return max(0, time.Duration(s*float64(time.Second))), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d <= MaxRetryHint {
			return max(0, d), true
		}
	}
	return 0, false
}

// demand is what one request takes from a provider's budgets, for the
// wait derived from its rate-limit headers.
type demand struct {
	input, output int // estimated tokens
}

// of returns the demand on the budget named in a header ("requests",
// "tokens", "input-tokens", "output-tokens", ...).
func (d demand) of(budget string) int64 {
	switch {
	case strings.HasPrefix(budget, "request"):
		return 1
	case strings.Contains(budget, "input"):
		return int64(d.input)
	case strings.Contains(budget, "output"):
		return int64(d.output)
	}
	return int64(d.input + d.output)
}

// resetWait derives from the rate-limit headers how long until this
// request fits in every budget the server reports. A reset header is the
// time until the budget is full again (OpenAI sends durations such as
// "6m0s", Anthropic RFC 3339 times), not the time until one more request
// fits: a budget refilling evenly gets back its missing limit-remaining in
// reset, and this request needs need-remaining of it, so it waits
// reset*(need-remaining)/(limit-remaining), at most reset. A budget with
// room (remaining >= need) costs nothing; a missing remaining counts as 0.
// It reports false when no budget short of room gives both its limit and
// its reset: the caller then backs off exponentially.
func resetWait(h http.Header, now time.Time, need demand) (time.Duration, bool) {
	var wait time.Duration
	var ok bool
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		var budget, limitKey, remainingKey string
		switch {
		case strings.HasPrefix(lk, "x-ratelimit-reset-"):
			budget = strings.TrimPrefix(lk, "x-ratelimit-reset-")
			limitKey, remainingKey = "x-ratelimit-limit-"+budget, "x-ratelimit-remaining-"+budget
		case strings.HasPrefix(lk, "anthropic-ratelimit-") && strings.HasSuffix(lk, "-reset"):
			budget = strings.TrimSuffix(strings.TrimPrefix(lk, "anthropic-ratelimit-"), "-reset")
			limitKey, remainingKey = "anthropic-ratelimit-"+budget+"-limit", "anthropic-ratelimit-"+budget+"-remaining"
		default:
			continue
		}
		n := need.of(budget)
		remaining, _ := headerInt(h, remainingKey)
		if remaining >= n {
			continue
		}
		reset, rok := parseReset(v[0], now)
		limit, lok := headerInt(h, limitKey)
		if !rok || !lok || limit <= remaining || reset > MaxRetryHint {
			continue
		}
		w := reset
		if missing := limit - remaining; n-remaining < missing {
			w = time.Duration(float64(reset) * float64(n-remaining) / float64(missing))
		}
		wait, ok = max(wait, w), true
	}
	return wait, ok
}

// headerInt reads a header holding a count.
func headerInt(h http.Header, key string) (int64, bool) {
	v := strings.TrimSpace(h.Get(key))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return max(n, 0), err == nil
}

func parseReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil {
		return max(0, d), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return max(0, t.Sub(now)), true
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && plausibleHint(s) {
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
	if err != nil || d < 0 || d > MaxRetryHint {
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

// modelNotFound reports a request for a model the server does not have:
// OpenAI's (and compatible servers') code model_not_found, whatever the
// status; or a 404 whose message names a model: Ollama's "model 'x' not
// found", Anthropic's not_found_error "model: x", vLLM's "The model `x`
// does not exist". A 404 that names no model (a wrong base URL's "no
// route") stays a bad request.
func modelNotFound(status int, pe providerError) bool {
	if pe.Code == "model_not_found" {
		return true
	}
	return status == http.StatusNotFound && strings.Contains(strings.ToLower(pe.Message), "model")
}

// capacityRefusal reports a flex-tier call refused for want of capacity:
// OpenAI's 429 "Resource Unavailable" (its flex processing guide,
// https://developers.openai.com/api/docs/guides/flex-processing: not
// charged; retry with backoff, or send it on the default tier), known by
// its code resource_unavailable or, when a server sends no code, its
// message; and Groq's 498 capacity_exceeded, the same refusal of its flex
// tier (https://console.groq.com/docs/flex-processing). It is not a rate
// limit: the account's budgets have room, the tier has none.
func capacityRefusal(status int, pe providerError) bool {
	switch status {
	case http.StatusTooManyRequests:
		return pe.Code == "resource_unavailable" || pe.Type == "resource_unavailable" ||
			strings.Contains(strings.ToLower(pe.Message), "resource unavailable")
	case 498:
		return pe.Code == "capacity_exceeded" || pe.Type == "capacity_exceeded"
	}
	return false
}

// classify maps a non-2xx response to an error class and retry hint; need
// is what the request takes from the budgets (for a wait derived from the
// rate-limit headers).
func classify(wire Wire, status int, h http.Header, pe providerError, now time.Time, need demand) (fixpoint.ErrorClass, time.Duration) {
	explicit, hasExplicit := retryAfter(h, now)
	switch {
	case capacityRefusal(status, pe):
		return fixpoint.ClassCapacity, explicit
	case status == http.StatusTooManyRequests:
		if pe.Code == "insufficient_quota" || pe.Type == "insufficient_quota" {
			return fixpoint.ClassQuotaExhausted, 0
		}
		if hasExplicit {
			return fixpoint.ClassRateLimited, explicit
		}
		if d, ok := messageHint(pe.Message); ok {
			return fixpoint.ClassRateLimited, d
		}
		if d, ok := resetWait(h, now, need); ok {
			return fixpoint.ClassRateLimited, d
		}
		// A 429 without a usable hint (an OpenAI-compatible server, Ollama,
		// an Anthropic 429 without retry-after) is a rate limit all the
		// same: back off and retry. Only OpenAI's insufficient_quota code
		// says the money is gone.
		return fixpoint.ClassRateLimited, 0
	case status == 529 || status == http.StatusServiceUnavailable:
		return fixpoint.ClassOverloaded, explicit
	case status >= 500:
		return fixpoint.ClassServer, explicit
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fixpoint.ClassAuth, 0
	case status == http.StatusBadRequest && wire == WireAnthropic && strings.Contains(pe.Message, "credit balance is too low"):
		// Anthropic's out-of-credit error is a 400 invalid_request_error;
		// only its message tells it from a malformed request.
		return fixpoint.ClassQuotaExhausted, 0
	case status == http.StatusRequestTimeout:
		return fixpoint.ClassTimeout, explicit
	case modelNotFound(status, pe):
		return fixpoint.ClassModelNotFound, 0
	case status >= 400:
		return fixpoint.ClassBadRequest, 0
	}
	return fixpoint.ClassBadResponse, 0
}
