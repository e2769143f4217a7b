package llm

import (
	"net/http"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

func TestRetryHints(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name     string
		provider string
		status   int
		header   http.Header
		pe       providerError
		want     fixpoint.ErrorClass
		wantHint time.Duration
	}{
		{"retry-after seconds", ProviderOpenAI, 429, h("Retry-After", "20"), providerError{}, fixpoint.ClassRateLimited, 20 * time.Second},
		{"retry-after fractional", ProviderOpenAI, 429, h("Retry-After", "0.5"), providerError{}, fixpoint.ClassRateLimited, 500 * time.Millisecond},
		{"retry-after http date", ProviderAnthropic, 429, h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), providerError{}, fixpoint.ClassRateLimited, 90 * time.Second},
		{"retry-after date in the past clamps to 0", ProviderOpenAI, 429, h("Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)), providerError{}, fixpoint.ClassRateLimited, 0},
		{"retry-after-ms wins", ProviderOpenAI, 429, h("Retry-After-Ms", "250", "Retry-After", "3"), providerError{}, fixpoint.ClassRateLimited, 250 * time.Millisecond},
		{"message hint", ProviderOpenAI, 429, h(), providerError{Message: "Please try again in 1m30s. Visit"}, fixpoint.ClassRateLimited, 90 * time.Second},
		{"anthropic reset times, spent budget", ProviderOpenAI, 429, h(
			"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", now.Add(5*time.Second).Format(time.RFC3339),
			"Anthropic-Ratelimit-Tokens-Remaining", "10", "Anthropic-Ratelimit-Tokens-Reset", now.Add(time.Second).Format(time.RFC3339)),
			// A reset is the time to a full refill; without the limit it
			// does not say when this request fits: backoff.
			providerError{}, fixpoint.ClassRateLimited, 0},
		{"openai resets without limits: backoff", ProviderOpenAI, 429, h(
			"X-Ratelimit-Reset-Requests", "12ms", "X-Ratelimit-Reset-Tokens", "9ms"), providerError{}, fixpoint.ClassRateLimited, 0},
		// The wait for this request from the spent budget's reset and limit
		// (need: 1,000 input + 500 output tokens, one request).
		{"openai tokens spent: reset x need/limit, not the 6m refill", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Tokens", "150000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s",
			"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "59", "X-Ratelimit-Reset-Requests", "1s"),
			providerError{}, fixpoint.ClassRateLimited, 3600 * time.Millisecond},
		{"openai tokens partly left: only the missing part", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Tokens", "3000", "X-Ratelimit-Remaining-Tokens", "1000", "X-Ratelimit-Reset-Tokens", "20s"),
			providerError{}, fixpoint.ClassRateLimited, 5 * time.Second},
		{"openai request bigger than the budget: the whole reset", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Tokens", "1000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"),
			providerError{}, fixpoint.ClassRateLimited, 6 * time.Minute},
		{"openai requests spent: reset/limit", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "30s"),
			providerError{}, fixpoint.ClassRateLimited, 500 * time.Millisecond},
		{"openai both spent: the longer wait", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "30s",
			"X-Ratelimit-Limit-Tokens", "150000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"),
			providerError{}, fixpoint.ClassRateLimited, 3600 * time.Millisecond},
		{"openai budgets with room: backoff", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Tokens", "150000", "X-Ratelimit-Remaining-Tokens", "149984", "X-Ratelimit-Reset-Tokens", "6m0s",
			"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "59", "X-Ratelimit-Reset-Requests", "1s"),
			providerError{}, fixpoint.ClassRateLimited, 0},
		{"anthropic input tokens spent: RFC 3339 reset x input need/limit", ProviderAnthropic, 429, h(
			"Anthropic-Ratelimit-Input-Tokens-Limit", "40000", "Anthropic-Ratelimit-Input-Tokens-Remaining", "0",
			"Anthropic-Ratelimit-Input-Tokens-Reset", now.Add(60*time.Second).Format(time.RFC3339),
			"Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49",
			"Anthropic-Ratelimit-Requests-Reset", now.Add(time.Second).Format(time.RFC3339)),
			providerError{}, fixpoint.ClassRateLimited, 1500 * time.Millisecond},
		{"anthropic output tokens spent: output need", ProviderAnthropic, 429, h(
			"Anthropic-Ratelimit-Output-Tokens-Limit", "8000", "Anthropic-Ratelimit-Output-Tokens-Remaining", "0",
			"Anthropic-Ratelimit-Output-Tokens-Reset", now.Add(64*time.Second).Format(time.RFC3339)),
			providerError{}, fixpoint.ClassRateLimited, 4 * time.Second},
		{"anthropic requests spent: reset/limit", ProviderAnthropic, 429, h(
			"Anthropic-Ratelimit-Requests-Limit", "4000", "Anthropic-Ratelimit-Requests-Remaining", "0",
			"Anthropic-Ratelimit-Requests-Reset", now.Add(60*time.Second).Format(time.RFC3339)),
			providerError{}, fixpoint.ClassRateLimited, 15 * time.Millisecond},
		{"reset time in the past clamps to 0", ProviderOpenAI, 429, h(
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "2025-10-30T16:17:37Z"), providerError{}, fixpoint.ClassRateLimited, 0},
		{"openai-compatible 429 without any hint", ProviderOpenAI, 429, h(), providerError{}, fixpoint.ClassRateLimited, 0},
		{"ollama 429 without any hint", ProviderOllama, 429, h(), providerError{}, fixpoint.ClassRateLimited, 0},
		{"insufficient_quota type only", ProviderOpenAI, 429, h("Retry-After", "1"), providerError{Type: "insufficient_quota"}, fixpoint.ClassQuotaExhausted, 0},
		// Not a spent quota: a rate limit with backoff (the reset is past).
		{"anthropic 429 with resets but no retry-after", ProviderAnthropic, 429, h("Anthropic-Ratelimit-Requests-Reset", "2025-10-30T16:17:37Z"), providerError{}, fixpoint.ClassRateLimited, 0},
		{"anthropic 429 without any hint", ProviderAnthropic, 429, h(), providerError{Type: "rate_limit_error", Code: "rate_limit_error"}, fixpoint.ClassRateLimited, 0},
		// A wait beyond any provider's window (a day) is no hint: backoff.
		{"retry-after of a day is kept", ProviderOpenAI, 429, h("Retry-After", "86400"), providerError{}, fixpoint.ClassRateLimited, 24 * time.Hour},
		{"retry-after beyond a day is ignored", ProviderOpenAI, 429, h("Retry-After", "999999999"), providerError{}, fixpoint.ClassRateLimited, 0},
		{"retry-after too large for a duration is ignored", ProviderOpenAI, 429, h("Retry-After", "1e300"), providerError{}, fixpoint.ClassRateLimited, 0},
		{"retry-after date years ahead is ignored", ProviderAnthropic, 429, h("Retry-After", now.AddDate(30, 0, 0).Format(http.TimeFormat)), providerError{}, fixpoint.ClassRateLimited, 0},
		{"bogus retry-after-ms falls back to retry-after", ProviderOpenAI, 429, h("Retry-After-Ms", "999999999999", "Retry-After", "3"), providerError{}, fixpoint.ClassRateLimited, 3 * time.Second},
		{"message hint beyond a day is ignored", ProviderOpenAI, 429, h(), providerError{Message: "Please try again in 99999999s."}, fixpoint.ClassRateLimited, 0},
		{"reset beyond a day is ignored", ProviderOpenAI, 429, h(
			"X-Ratelimit-Limit-Tokens", "1000", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "999999999"),
			providerError{}, fixpoint.ClassRateLimited, 0},
		{"503 with a bogus hint", ProviderOpenAI, 503, h("Retry-After", "999999999"), providerError{}, fixpoint.ClassOverloaded, 0},
		{"529", ProviderAnthropic, 529, h(), providerError{}, fixpoint.ClassOverloaded, 0},
		{"503 with hint", ProviderOpenAI, 503, h("Retry-After", "4"), providerError{}, fixpoint.ClassOverloaded, 4 * time.Second},
		{"502", ProviderOpenAI, 502, h(), providerError{}, fixpoint.ClassServer, 0},
		{"403", ProviderOpenAI, 403, h(), providerError{}, fixpoint.ClassAuth, 0},
		{"408", ProviderOpenAI, 408, h(), providerError{}, fixpoint.ClassTimeout, 0},
		{"413", ProviderOpenAI, 413, h(), providerError{}, fixpoint.ClassBadRequest, 0},
		{"anthropic out of credit", ProviderAnthropic, 400, h(), providerError{Message: "Your credit balance is too low to access the Anthropic API.", Code: "invalid_request_error"}, fixpoint.ClassQuotaExhausted, 0},
		// A model the server does not have: the provider's code, or a 404
		// naming a model (bodies as the providers send them).
		{"openai model_not_found", ProviderOpenAI, 404, h(), parseProviderError([]byte(`{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)), fixpoint.ClassModelNotFound, 0},
		{"compatible server model_not_found on a 400", ProviderOpenAI, 400, h(), parseProviderError([]byte(`{"error":{"message":"Model 'x' not found","code":"model_not_found"}}`)), fixpoint.ClassModelNotFound, 0},
		{"vllm 404 model does not exist", ProviderOpenAI, 404, h(), parseProviderError([]byte(`{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`)), fixpoint.ClassModelNotFound, 0},
		{"anthropic not_found_error on the model", ProviderAnthropic, 404, h(), parseProviderError([]byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-9"},"request_id":"req_1"}`)), fixpoint.ClassModelNotFound, 0},
		{"ollama model not found", ProviderOllama, 404, h(), parseProviderError([]byte(`{"error":"model \"llama9\" not found, try pulling it first"}`)), fixpoint.ClassModelNotFound, 0},
		{"404 naming no model", ProviderAnthropic, 404, h(), parseProviderError([]byte(`{"type":"error","error":{"type":"not_found_error","message":"The requested resource could not be found."}}`)), fixpoint.ClassBadRequest, 0},
		{"anthropic other 400", ProviderAnthropic, 400, h(), providerError{Message: "max_tokens: Field required", Code: "invalid_request_error"}, fixpoint.ClassBadRequest, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, hint := classify(WireOf(tt.provider), tt.status, tt.header, tt.pe, now, demand{input: 1000, output: 500})
			if got != tt.want || hint != tt.wantHint {
				t.Fatalf("classify = %s, %v; want %s, %v", got, hint, tt.want, tt.wantHint)
			}
		})
	}
}

func TestParseProviderError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want providerError
	}{
		{"openai", `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`,
			providerError{Message: "m", Type: "invalid_request_error", Code: "context_length_exceeded"}},
		{"openai null code falls back to type", `{"error":{"message":"m","type":"server_error","code":null}}`,
			providerError{Message: "m", Type: "server_error", Code: "server_error"}},
		{"anthropic", `{"type":"error","error":{"type":"api_error","message":"m"},"request_id":"req_1"}`,
			providerError{Message: "m", Type: "api_error", Code: "api_error", ReqID: "req_1"}},
		{"ollama", `{"error":"model 'x' not found"}`, providerError{Message: "model 'x' not found"}},
		{"vllm numeric code", `{"object":"error","message":"m","type":"BadRequestError","code":400}`,
			providerError{Message: "m", Type: "BadRequestError", Code: "400"}},
		{"not json", `<html>502 Bad Gateway</html>`, providerError{Message: "<html>502 Bad Gateway</html>"}},
	}
	for _, tt := range tests {
		if got := parseProviderError([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
