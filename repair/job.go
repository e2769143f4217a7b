package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/jobstatus"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Strategy is how the repair step feeds errors back to the model.
type Strategy string

const (
	// StrategyConversation appends the failed reply as an assistant turn and
	// the errors as a new user turn; the conversation grows each round.
	StrategyConversation Strategy = "conversation"
	// StrategyRepair sends a fresh request each round with the original task,
	// only the latest failed reply, its errors and the schema (constant size).
	StrategyRepair Strategy = "repair"
	// StrategyPatch asks, after a reply that gave a JSON value failing the
	// schema, for an RFC 6902 JSON Patch of that value touching only the
	// failing locations, and applies it locally (see patch.go). The request
	// keeps the system prompt and the task's messages as they were, for the
	// prompt cache, and adds one user turn. After a reply with no usable
	// value, or a patch that cannot be used, it re-asks for the whole value
	// as StrategyRepair does. It needs mode prompt (Limits.ValidateMode).
	StrategyPatch Strategy = "patch"
)

// FeedbackFormat is how errors are written for the model.
type FeedbackFormat string

const (
	FeedbackText FeedbackFormat = "text" // a numbered list
	FeedbackXML  FeedbackFormat = "xml"  // a <validation-errors> block
	// FeedbackVague names no error. It exists to measure how much exact
	// feedback is worth; never use it in production.
	FeedbackVague FeedbackFormat = "vague"
)

// Defaults for Limits.
const (
	MaxAttemptsDefault = 3
	MaxAttemptsMax     = 20
	MaxTokensDefault   = 1024
	StrategyDefault    = StrategyConversation
	FeedbackDefault    = FeedbackText
)

// Limits bound one job's repair attempts.
type Limits struct {
	// MaxAttempts is the number of provider calls that may produce a reply
	// (transport retries are not counted). Defaults to 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Strategy defaults to conversation.
	Strategy Strategy `json:"strategy,omitempty"`
	// Feedback defaults to text.
	Feedback FeedbackFormat `json:"feedback,omitempty"`
	// TokenBudget caps input+output tokens over all attempts; 0 means none.
	// An attempt whose estimated cost would cross it is not made.
	TokenBudget int `json:"token_budget,omitempty"`
	// RetryBudget caps transport retries over the whole job; 0 means the
	// client's own limit only. A job past it fails as a provider error.
	RetryBudget int `json:"retry_budget,omitempty"`
	// TruncationMaxTokens, when above the job's MaxTokens, is used as the
	// output limit for the attempt after a truncated reply.
	TruncationMaxTokens int `json:"truncation_max_tokens,omitempty"`
	// Coerce is which schema-guided local repairs are tried on a reply's
	// value before another call is spent (validate.CoerceMode: none, safe
	// or all). Defaults to safe.
	Coerce validate.CoerceMode `json:"coerce,omitempty"`
}

// WithDefaults returns a copy of l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxAttempts == 0 {
		l.MaxAttempts = MaxAttemptsDefault
	}
	if l.Strategy == "" {
		l.Strategy = StrategyDefault
	}
	if l.Feedback == "" {
		l.Feedback = FeedbackDefault
	}
	if l.Coerce == "" {
		l.Coerce = validate.CoerceSafe
	}
	return l
}

// Validate reports the first limit out of range.
func (l Limits) Validate() error {
	if l.MaxAttempts < 1 || l.MaxAttempts > MaxAttemptsMax {
		return fmt.Errorf("%w: max_attempts %d out of range 1..%d", ErrBadJob, l.MaxAttempts, MaxAttemptsMax)
	}
	switch l.Strategy {
	case StrategyConversation, StrategyRepair, StrategyPatch:
	default:
		return fmt.Errorf("%w: strategy %q is not conversation, repair or patch", ErrBadJob, l.Strategy)
	}
	if _, err := validate.ParseCoerceMode(string(l.Coerce)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJob, err)
	}
	switch l.Feedback {
	case FeedbackText, FeedbackXML, FeedbackVague:
	default:
		return fmt.Errorf("%w: feedback %q is not text or xml", ErrBadJob, l.Feedback)
	}
	if l.TokenBudget < 0 || l.RetryBudget < 0 || l.TruncationMaxTokens < 0 {
		return fmt.Errorf("%w: token_budget, retry_budget and truncation_max_tokens must not be negative", ErrBadJob)
	}
	return nil
}

// ValidateMode reports whether the strategy can run in mode (the job's
// llm.Mode, "" meaning prompt): StrategyPatch needs mode prompt, since in
// json_schema and tool modes the provider holds every reply to the job's
// schema, so a reply cannot be a patch. Start checks it; a driver that
// validates jobs before running them may too.
func (l Limits) ValidateMode(mode llm.Mode) error {
	if l.Strategy == StrategyPatch && mode != "" && mode != llm.ModePrompt {
		return fmt.Errorf("%w: strategy patch needs mode prompt, not %s: the provider holds %s replies to the schema, so they cannot be patches", ErrBadJob, mode, mode)
	}
	return nil
}

// Job is one unit of work for the repair step.
type Job struct {
	ID string
	// System is an optional system prompt from the user; the loop adds the
	// schema instructions after it.
	System string
	// Prompt is the task. Messages, when set, is used instead.
	Prompt   string
	Messages []llm.Message
	// Schema is the compiled schema; SchemaRaw its text.
	Schema    *validate.Schema
	SchemaRaw json.RawMessage
	Model     string
	Mode      llm.Mode
	// Temperature is optional.
	Temperature *float64
	// CacheKey, when set, asks the provider to cache the prompt prefix the
	// job's requests share (the system prompt): each request gets it as
	// llm.Request.CacheKey, with CacheSystem set. Give every job of a batch
	// with the same schema the same key.
	CacheKey string
	// MaxTokens caps output tokens per call. Defaults to 1024.
	MaxTokens int
	Limits    Limits
	// GateFunc is for drivers; the step ignores it. When set, a driver asks
	// it before each provider call: it returns a release func the driver
	// calls with the call's outcome, or an error: one matching
	// ErrOverBudget ends the job over_budget without the call (Step.Stop),
	// one matching ErrCancelled ends it cancelled; another (ErrTransient)
	// stops the driver, to run the job again later. The worker uses it to
	// stop the jobs of a cancelled batch and to hold a capped batch's
	// budget for each call.
	GateFunc func(ctx context.Context, req *llm.Request) (release func(*llm.Response, error), err error)
	// AttemptFunc is for drivers; the step ignores it. When set, a driver
	// calls it with each attempt Feed records, as soon as it is recorded:
	// the worker keeps each paid reply in its journal until the job's
	// rows are written.
	AttemptFunc func(a *Attempt)
	// SentFunc is for drivers; the step ignores it. When set, a driver
	// calls it as each request goes out (after GateFunc), with what
	// Step.Outstanding says of it: the worker keeps each call in its
	// journal until AttemptFunc has its outcome, so a call in flight when
	// the worker is killed still leaves a row.
	SentFunc func(a *Attempt)
}

// Status is a job's status; the statuses are defined once, in package
// jobstatus.
type Status = jobstatus.Status

// The statuses a job can end in.
const (
	StatusQueued     = jobstatus.Queued
	StatusValid      = jobstatus.Valid
	StatusInvalid    = jobstatus.Invalid    // no valid value after the last attempt
	StatusFailed     = jobstatus.Failed     // a permanent provider error or a budget
	StatusRejected   = jobstatus.Rejected   // a bad job, never run
	StatusDead       = jobstatus.Dead       // delivered MaxDeliver times without a final result
	StatusCancelled  = jobstatus.Cancelled  // enqueue cancel ended the job before it was done
	StatusOverBudget = jobstatus.OverBudget // the batch's spend cap was reached first
)

// Attempt class outcomes beyond validate's classes.
const (
	OutcomeTruncated = "truncated"
	OutcomeRefusal   = "refusal"
	OutcomeProvider  = "provider"
	OutcomeBudget    = "budget"
	// OutcomePanic ends a job whose driver panicked running it.
	OutcomePanic = "panic"
)

// FinalClasses lists every class a job can end with (its final_class), for
// checking a filter on it.
var FinalClasses = []string{string(validate.ClassSyntax), string(validate.ClassShape), string(validate.ClassSemantic),
	OutcomeTruncated, OutcomeRefusal, OutcomeProvider, OutcomeBudget, OutcomePanic}

// Attempt is one provider call of a job, and what came of it.
type Attempt struct {
	No int `json:"no"`
	// System is the system prompt sent first, and Request the messages
	// sent after it; both nil when only the hash is kept (or no system
	// prompt was sent). The ledger stores each distinct system prompt once.
	System      *Prompt         `json:"system,omitempty"`
	Request     json.RawMessage `json:"request,omitempty"`
	RequestHash string          `json:"request_hash"`
	Raw         string          `json:"raw"`
	// Source is where the chosen value was found; "" when none.
	Source          extract.Source   `json:"source"`
	Repairs         []extract.Repair `json:"repairs"`
	Errors          []validate.Error `json:"errors"`
	Class           string           `json:"class"`
	Valid           bool             `json:"valid"`
	RepairedLocally bool             `json:"repaired_locally"`
	Value           json.RawMessage  `json:"value,omitempty"`
	FinishReason    llm.FinishReason `json:"finish_reason,omitempty"`
	Latency         time.Duration    `json:"latency"`
	TokensIn        int              `json:"tokens_in"`
	TokensOut       int              `json:"tokens_out"`
	TokensCached    int              `json:"tokens_cached"`
	// TokensCacheWrite is the input written to the provider's prompt
	// cache (llm.Usage.CacheWriteTokens); like TokensCached, it is part of
	// TokensIn.
	TokensCacheWrite int `json:"tokens_cache_write"`
	// PriceBasis is how the call is billed (Config.PriceBasis), and
	// CostUSD what it cost on that basis at the step's prices, by the
	// job's model (the price table's key, not the model the provider
	// reported); 0 for a call that got no reply.
	PriceBasis PriceBasis `json:"price_basis"`
	CostUSD    float64    `json:"cost_usd"`
	// Unpriced: the step's prices have no row for the model, so CostUSD
	// is 0 for want of a price, not because the call was free.
	Unpriced       bool           `json:"unpriced,omitempty"`
	Retries        []llm.Retry    `json:"retries,omitempty"`
	ProviderStatus int            `json:"provider_status,omitempty"`
	ProviderError  string         `json:"provider_error,omitempty"`
	ProviderClass  llm.ErrorClass `json:"provider_class,omitempty"`
	Model          string         `json:"model,omitempty"`
	RequestID      string         `json:"request_id,omitempty"`
	StartedAt      time.Time      `json:"started_at"`
	// Coerced counts the schema-guided repairs made to the reply's value
	// (the last Coerced entries of Repairs): with Valid, a call saved.
	Coerced int `json:"coerced,omitempty"`
	// Feedback is the correction sent after this attempt, "" when none.
	// Under StrategyPatch it is either the whole patch request (the user
	// turn sent as is, starting with PatchRequestLead, the value to patch
	// in a ```json block) or the text of a full re-ask (see patch.go).
	Feedback string `json:"feedback,omitempty"`
	// Patch is the patch a reply to a patch request gave, as JSON (the
	// operations array as extracted), "" when the attempt answered no patch
	// request or its reply held no patch.
	Patch string `json:"patch,omitempty"`
	// PatchOutcome says how that patch went, "" when the attempt answered
	// no patch request. Neither it nor Patch is needed to rebuild a step
	// from its attempts (see patch.go).
	PatchOutcome PatchOutcome `json:"patch_outcome,omitempty"`
}

// Result is a job's outcome so far: final once the step is done.
type Result struct {
	JobID    string          `json:"job_id"`
	Status   Status          `json:"status"`
	Value    json.RawMessage `json:"value"`
	Error    string          `json:"error,omitempty"`
	Class    string          `json:"class"`
	Attempts []Attempt       `json:"attempts"`
	// Calls counts the provider calls of the attempts (one per attempt,
	// whether it got a reply or failed), transport retries excluded.
	Calls            int `json:"calls"`
	TransportRetries int `json:"transport_retries"`
	TokensIn         int `json:"tokens_in"`
	TokensOut        int `json:"tokens_out"`
	TokensCached     int `json:"tokens_cached"`
	TokensCacheWrite int `json:"tokens_cache_write"`
	// CostUSD is the sum of the attempts' CostUSD.
	CostUSD           float64       `json:"cost_usd"`
	FirstAttemptValid bool          `json:"first_attempt_valid"`
	RepairedLocally   bool          `json:"repaired_locally"`
	StartedAt         time.Time     `json:"started_at"`
	Wall              time.Duration `json:"wall"`
}
