package fixpoint

import (
	"fmt"
	"strings"
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
	// failing locations, and applies it locally (see package repair). The request
	// keeps the system prompt and the task's messages as they were, for the
	// prompt cache, and adds one user turn. After a reply with no usable
	// value, or a patch that cannot be used, it re-asks for the whole value
	// as StrategyRepair does. It needs mode prompt (Limits.ValidateMode).
	StrategyPatch Strategy = "patch"

	// The document strategies run a job whose input is a long document
	// (repair.Job.Document) in more than one call; see package repair and
	// docs/documents.md. They need mode prompt.

	// StrategyParallel splits the document into chunks
	// (Limits.ChunkTokens, ChunkOverlap), extracts from every chunk at once,
	// each value checked against the schema with required relaxed (unless
	// Limits.Strict), merges the chunks' values and runs the merged value
	// through the full schema and the repair loop.
	StrategyParallel Strategy = "parallel"
	// StrategySequential reads the chunks in order, each call given the
	// value so far and asked to extend or correct it; the last value is
	// checked against the full schema.
	StrategySequential Strategy = "sequential"
	// StrategyAgent lets the model build the value through tools
	// (fixpoint.ToolSetOutput and the others): reading chunks, searching
	// the document, setting and updating the value, finishing.
	StrategyAgent Strategy = "agent"
)

// StrategyNames lists every strategy, in the order help texts give them.
func StrategyNames() []string {
	return []string{string(StrategyConversation), string(StrategyRepair), string(StrategyPatch),
		string(StrategyParallel), string(StrategySequential), string(StrategyAgent)}
}

// Document reports whether s is a document strategy: parallel, sequential
// or agent.
func (s Strategy) Document() bool {
	return s == StrategyParallel || s == StrategySequential || s == StrategyAgent
}

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

	// ChunkTokensDefault is a document strategy's chunk size in tokens
	// (chunk.Tokens estimates), and ChunkOverlapDefault how many of them
	// the next chunk repeats.
	ChunkTokensDefault  = 4000
	ChunkOverlapDefault = 200
	// ValidationAttemptsDefault is how many times an agent's finish may be
	// refused for a value the full schema does not take before the job
	// ends invalid.
	ValidationAttemptsDefault = 3
	// NudgesMax is how many times an agent that answers with text instead
	// of a tool call is asked to call one before the job ends invalid.
	NudgesMax = 3
	// ListPassesDefault is the commands' default for Limits.ListPasses.
	// On the long-document bench (a model that lists 30 items a call,
	// chunks of about 60) one pass reads a chunk to its end, and 1, 2 and
	// 3 measure the same: passes stop where the list does, so a bound
	// above the need costs nothing. 3 reads a chunk that holds four times
	// what the model lists in one call.
	ListPassesDefault = 3
)

// CoerceMode selects the schema-guided repairs tried on a reply's value
// before another call is spent.
type CoerceMode string

const (
	// CoerceNone makes no schema-guided repair.
	CoerceNone CoerceMode = "none"
	// CoerceSafe converts a string holding a JSON number or boolean, fixes
	// the letter case or surrounding whitespace of an enum or const string,
	// wraps a single value in an array and drops a null optional property.
	CoerceSafe CoerceMode = "safe"
	// CoerceAll does what CoerceSafe does, and also drops properties that
	// additionalProperties forbids, when every required property is present.
	CoerceAll CoerceMode = "all"
)

// ParseCoerceMode parses "none", "safe" or "all"; "" is CoerceNone (the
// setting was left out). Anything else is an error.
func ParseCoerceMode(s string) (CoerceMode, error) {
	switch m := CoerceMode(s); m {
	case "", CoerceNone:
		return CoerceNone, nil
	case CoerceSafe, CoerceAll:
		return m, nil
	}
	return CoerceNone, fmt.Errorf("unknown coerce mode %q: want none, safe or all", s)
}

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
	// value before another call is spent (CoerceMode: none, safe
	// or all). Defaults to safe.
	Coerce CoerceMode `json:"coerce,omitempty"`
	// ChunkTokens and ChunkOverlap size the chunks of a document strategy
	// (defaults ChunkTokensDefault and ChunkOverlapDefault; an overlap
	// below the size). Other strategies ignore them.
	ChunkTokens  int `json:"chunk_tokens,omitempty"`
	ChunkOverlap int `json:"chunk_overlap,omitempty"`
	// ListPasses is how many more calls the parallel and sequential
	// strategies may make over the rest of one chunk whose value's list
	// looks cut, each from the last item read (docs/documents.md, "List
	// passes"). 0 makes none; the commands default to ListPassesDefault.
	// Other strategies ignore it.
	ListPasses int `json:"list_passes,omitempty"`
	// Strict turns a document strategy's smart validation off: each
	// chunk's value is checked against the full schema, required and all.
	Strict bool `json:"strict,omitempty"`
	// MaxValidationAttempts bounds how often the agent strategy's finish
	// is refused for an invalid value (default ValidationAttemptsDefault).
	MaxValidationAttempts int `json:"max_validation_attempts,omitempty"`
	// MergeModel, under StrategyParallel only, is the model that merges
	// the chunks' values when two or more chunks gave one: a call (step
	// merge) sent the values, each with its chunk, and the deterministic
	// merge's conflicts as hints, priced by the model's price row, on the
	// job's provider. "" (the default) merges without a call (package
	// merge). The repair that follows an invalid merge runs on the job's
	// model. See docs/documents.md.
	MergeModel string `json:"merge_model,omitempty"`
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
		l.Coerce = CoerceSafe
	}
	if l.Strategy.Document() {
		if l.ChunkTokens == 0 {
			l.ChunkTokens = ChunkTokensDefault
			if l.ChunkOverlap == 0 {
				l.ChunkOverlap = ChunkOverlapDefault
			}
		}
		if l.MaxValidationAttempts == 0 {
			l.MaxValidationAttempts = ValidationAttemptsDefault
		}
	}
	return l
}

// Validate reports the first limit out of range.
func (l Limits) Validate() error {
	if l.MaxAttempts < 1 || l.MaxAttempts > MaxAttemptsMax {
		return fmt.Errorf("%w: max_attempts %d out of range 1..%d", ErrBadJob, l.MaxAttempts, MaxAttemptsMax)
	}
	switch l.Strategy {
	case StrategyConversation, StrategyRepair, StrategyPatch, StrategyParallel, StrategySequential, StrategyAgent:
	default:
		return fmt.Errorf("%w: strategy %q is not one of %s", ErrBadJob, l.Strategy, strings.Join(StrategyNames(), ", "))
	}
	if l.ChunkTokens < 0 || l.ChunkOverlap < 0 || l.MaxValidationAttempts < 0 {
		return fmt.Errorf("%w: chunk_tokens, chunk_overlap and max_validation_attempts must not be negative", ErrBadJob)
	}
	if l.ListPasses < 0 {
		return fmt.Errorf("%w: list_passes %d must not be negative (0 makes no list pass)", ErrBadJob, l.ListPasses)
	}
	if l.ChunkTokens > 0 && l.ChunkOverlap >= l.ChunkTokens {
		return fmt.Errorf("%w: chunk_overlap %d must be less than chunk_tokens %d", ErrBadJob, l.ChunkOverlap, l.ChunkTokens)
	}
	if _, err := ParseCoerceMode(string(l.Coerce)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJob, err)
	}
	switch l.Feedback {
	case FeedbackText, FeedbackXML, FeedbackVague:
	default:
		return fmt.Errorf("%w: feedback %q is not text or xml", ErrBadJob, l.Feedback)
	}
	if l.MergeModel != "" && l.Strategy != StrategyParallel {
		return fmt.Errorf("%w: merge_model %q is for strategy parallel, which merges the values of a document's chunks, not %s", ErrBadJob, l.MergeModel, l.Strategy)
	}
	if l.TokenBudget < 0 || l.RetryBudget < 0 || l.TruncationMaxTokens < 0 {
		return fmt.Errorf("%w: token_budget, retry_budget and truncation_max_tokens must not be negative", ErrBadJob)
	}
	return nil
}

// ValidateMode reports whether the strategy can run in mode (the job's
// Mode, "" meaning prompt): StrategyPatch needs mode prompt, since in
// json_schema and tool modes the provider holds every reply to the job's
// schema, so a reply cannot be a patch. repair.Start checks it; a driver that
// validates jobs before running them may too.
func (l Limits) ValidateMode(mode Mode) error {
	if l.Strategy.Document() && mode != "" && mode != ModePrompt {
		return fmt.Errorf("%w: strategy %s needs mode prompt, not %s: a chunk's value may leave out what the schema requires, which %s would force the model to invent", ErrBadJob, l.Strategy, mode, mode)
	}
	if l.Strategy == StrategyPatch && mode != "" && mode != ModePrompt {
		return fmt.Errorf("%w: strategy patch needs mode prompt, not %s: the provider holds %s replies to the schema, so they cannot be patches", ErrBadJob, mode, mode)
	}
	return nil
}
