package fixpoint

import (
	"errors"
	"fmt"
	"time"
)

// ErrorClass classifies a failed provider call. The names are stored in the
// ledger and used as metric labels.
type ErrorClass string

const (
	ClassRateLimited ErrorClass = "rate_limited" // 429 other than a spent quota, with or without a hint; retryable
	// ClassCapacity is a flex-tier call refused for want of capacity
	// (OpenAI's 429 "Resource Unavailable"): not a rate limit, the lane's
	// budgets are not shrunk for it. Retryable, with jittered backoff,
	// until the call falls back to the default tier (llm.Config.FlexFallbackAfter).
	ClassCapacity       ErrorClass = "capacity"
	ClassOverloaded     ErrorClass = "overloaded"      // 529, 503; retryable
	ClassServer         ErrorClass = "server"          // other 5xx; retryable
	ClassTimeout        ErrorClass = "timeout"         // connect, first byte, idle or total timeout; retryable
	ClassNetwork        ErrorClass = "network"         // connection refused or reset; retryable
	ClassQuotaExhausted ErrorClass = "quota_exhausted" // no credit left (OpenAI insufficient_quota, Anthropic's "credit balance is too low" 400), not a rate limit; permanent for the lane until its cooldown
	ClassAuth           ErrorClass = "auth"            // 401, 403; permanent
	ClassBadRequest     ErrorClass = "bad_request"     // 400, 404, 422, context length exceeded; permanent
	// ClassBadResponse is a reply whose body cannot be read (HTML from a
	// proxy, a body cut short, JSON of another shape). Retryable as a
	// request; but a 2xx one was made and billed (Replied), so it is not
	// retried inside the call: it is a paid attempt of its job.
	ClassBadResponse ErrorClass = "bad_response"
	// ClassModelNotFound is a request for a model the server does not
	// have (OpenAI's model_not_found code, Ollama's 404 "model ... not
	// found", Anthropic's 404 not_found_error naming the model): permanent
	// for the request, and a set-up error of its whole lane, every job of
	// which would fail alike. Code keeps the provider's own code.
	ClassModelNotFound ErrorClass = "model_not_found"
	// ClassTooLarge is a 2xx reply whose body is over llm.Config.MaxBodyBytes.
	// The call was made and is billed, and the same request would get the
	// same reply: it is permanent for that request, never retried.
	// Error.Size and Error.Head describe the body.
	ClassTooLarge ErrorClass = "too_large"
	// ClassStopped is a call its caller stopped waiting for (its context
	// cancelled: a worker's shutdown, a job cut off): not a timeout, and
	// nothing wrong with the provider. Retryable as a request; the
	// provider may have billed it if it was sent.
	ClassStopped ErrorClass = "stopped"

	// The classes below come only from the results of a provider batch
	// (llm.Client.BatchResults), never from llm.Client.Complete. An errored batch request
	// gets the class its error would have in realtime (OpenAI's
	// response.status_code and body, Anthropic's nested error type), so
	// Retryable and Permanent mean the same for it in a later wave.

	// ClassExpired is a batch request the batch ended before running
	// (OpenAI batch_expired, Anthropic "expired"). It was not billed;
	// retryable: send it again in a later wave, or realtime when the
	// deadline is near.
	ClassExpired ErrorClass = "expired"
	// ClassCancelled is a batch request that did not run because its
	// batch was cancelled (Anthropic "canceled", OpenAI batch_cancelled).
	// It was not billed. Retryable as a request (nothing is wrong with
	// it), but a cancel is someone's decision: a driver sends it again
	// only when its job is still wanted.
	ClassCancelled ErrorClass = "cancelled"

	// ClassInFlight is a call whose outcome its caller never saw: the
	// process that sent it died with it in flight. Client.Complete never returns
	// it; a driver that keeps a journal of the calls it sends records it
	// for them. The provider may have billed the reply, for tokens no one
	// knows. Not retryable as such: the driver's next start decides.
	ClassInFlight ErrorClass = "in_flight"
)

// Retryable reports whether a call failing with c may succeed if made again.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassRateLimited, ClassCapacity, ClassOverloaded, ClassServer, ClassTimeout, ClassStopped, ClassNetwork, ClassBadResponse,
		ClassExpired, ClassCancelled:
		return true
	}
	return false
}

// ErrProvider is matched by every *ProviderError with errors.Is.
var ErrProvider = errors.New("provider error")

// ProviderError is a failed provider call, after transport retries.
type ProviderError struct {
	Class ErrorClass
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Message is the provider's error message (never contains the API key).
	Message string
	// Code is the provider's error code or type, e.g. "insufficient_quota".
	Code      string
	RequestID string
	// RetryAfter is how long the server asked to wait before this request
	// is sent again: Retry-After or retry-after-ms, OpenAI's "try again in",
	// or else the wait derived from the rate-limit headers (the time until
	// the spent budget has room for this request); 0 when none was given.
	// It is the full hint, never capped; a hint over llm.MaxRetryHint (a
	// day) is bogus and ignored, as if none was given. When it is over the lane's
	// llm.LaneConfig.MaxHintWait, llm.Client.Complete did not sleep it: it returned at once
	// with HintOverCap set, and the caller should send the request again no
	// sooner than RetryAfter from now (hand the job back with that delay). On
	// a quota_exhausted lane it is the time until the lane accepts calls.
	RetryAfter time.Duration
	// HintOverCap reports that the server asked for a wait (RetryAfter)
	// longer than this client sleeps (llm.LaneConfig.MaxHintWait), so Complete
	// returned without retrying. The class stays retryable: the request has
	// not failed, it must wait longer than a worker should hold it.
	HintOverCap bool
	// RateLimit holds the rate-limit headers of the failed response.
	RateLimit map[string]string
	// Size is the length in bytes of a body that could not be used: one
	// over llm.Config.MaxBodyBytes (ClassTooLarge for a 2xx, else the
	// class of the status), from Content-Length or, when the server sent
	// none, the bytes read before the cap stopped the read (MaxBodyBytes+1,
	// so the body is at least Size; Message then says "more than"); or a
	// 2xx body that could not be read (ClassBadResponse). 0 otherwise.
	Size int64
	// Head is the first bytes (at most 1 KiB) of such a body, valid UTF-8,
	// the API key redacted; "" otherwise.
	Head string
	// Retries lists the transport retries made before giving up.
	Retries []Retry
	// Billed is what a call that got a 2xx reply it could not use
	// (Replied) is charged: the usage the body reported when it could be
	// read and could be true (Usage.Anomaly), else an estimate
	// (EstimateUsage: the request's size and the body's); tokens paid for
	// with no reply to show.
	Billed Usage
	// RetriesStopped is why the retries ended before the retry policy did:
	// the error of the context's retry check (llm.WithRetryCheck), nil
	// otherwise. The Error is then the last failure, still retryable.
	RetriesStopped error
	// NotSent reports that no request of the call was sent: it ended
	// waiting for its lane (its context ended), so the provider never saw
	// it.
	NotSent bool
	Err     error
}

func (e *ProviderError) Error() string {
	s := string(e.Class)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	} else if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.HintOverCap {
		s += fmt.Sprintf(" (the server asks to wait %v, longer than the client sleeps)", e.RetryAfter)
	}
	return s
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrProvider) true for every *ProviderError.
func (e *ProviderError) Is(target error) bool { return target == ErrProvider }

// Permanent reports whether retrying the same request cannot help.
func (e *ProviderError) Permanent() bool { return !e.Class.Retryable() }

// Replied reports whether the call got a 2xx reply it could not use (a
// body too large, or one that could not be read): the provider made the
// reply and billed it, so the call is a paid attempt, charged Billed,
// whatever its class says of sending the request again.
func (e *ProviderError) Replied() bool { return e.Status >= 200 && e.Status <= 299 }
