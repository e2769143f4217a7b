package fixpoint

import (
	"encoding/json"
	"time"
)

// Source says where in a reply a candidate was found. The names are stable: they
// are stored in the ledger and printed by `worker check`.
type Source string

const (
	SourceRaw    Source = "raw"    // the whole reply (after trimming) is the value
	SourceFence  Source = "fence"  // a fenced block: ```json, ```, ~~~
	SourceTag    Source = "tag"    // a wrapper tag: <json>, <output>, <answer>
	SourceInline Source = "inline" // inline `code`
	SourceScan   Source = "scan"   // an object or array found inside prose
	SourceString Source = "string" // JSON encoded a second time inside a string
)

// Repair is one change made to a reply's value. extract makes syntax repairs:
// changes to the text that turn it into strict JSON. The repair step adds
// schema-guided repairs (a string "42" where the schema wants an integer
// becomes 42, ...): those change the decoded value at Pointer, and record the
// value before and after, so one list carries both kinds of repair.
type Repair struct {
	// Kind is a stable snake_case name, e.g. "trailing_comma", "comment",
	// "single_quotes", "unquoted_key", "python_literal", "missing_comma",
	// "truncated" for syntax repairs; "coerce_number", "coerce_boolean",
	// "enum_case", "const_case", "wrap_array", "drop_null",
	// "drop_additional", "rename_key" for schema-guided ones (see repair).
	Kind string `json:"kind"`
	// Offset is the byte offset in the reply where the repair applies. For a
	// schema-guided repair it is the offset of the candidate the value came
	// from (0 when there was no reply); Pointer locates the value inside it.
	Offset int `json:"offset"`
	// Pointer is the JSON pointer (RFC 6901) of the value a schema-guided
	// repair changed or dropped, in the value as it was when the repair was
	// made (repairs apply in order); for rename_key, the property's new
	// location. Empty, and absent from the JSON, for syntax repairs and for
	// a repair of the root value.
	Pointer string `json:"pointer,omitempty"`
	// Before is the value at Pointer before a schema-guided repair, as JSON;
	// for rename_key, the property's old name as a JSON string. Absent for
	// syntax repairs.
	Before json.RawMessage `json:"before,omitempty"`
	// After is the value at Pointer after a schema-guided repair, as JSON;
	// for rename_key, the property's new name. Absent for syntax repairs
	// and for a repair that dropped the value.
	After json.RawMessage `json:"after,omitempty"`
	// Count, when over 1, says the entry stands for that many repairs of
	// its Kind past the first MaxListedRepairs (see CompactRepairs), the
	// first of them at Offset and Pointer.
	Count int `json:"count,omitempty"`
}

// Class is a failure class. The names are fixed: they go all the way to SQL.
type Class string

const (
	ClassNone     Class = ""
	ClassSyntax   Class = "syntax"   // no JSON value could be extracted, or only by closing a truncated reply
	ClassShape    Class = "shape"    // structure: types, required, additionalProperties, size bounds
	ClassSemantic Class = "semantic" // values: enum, const, ranges, pattern, format, ...
	// ClassEvidence: a string or number of the value does not appear in
	// the job's source, so the model may have invented it (see package
	// evidence).
	ClassEvidence Class = "evidence"
)

// ValidationError is one validation error: a value of a reply that its
// schema refuses, located and explained for the model.
type ValidationError struct {
	// Path is the JSON pointer of the failing value, "" for the root. For
	// keyword "required" it is the pointer the missing property would have;
	// the object lacking it is Path without its last token.
	Path string `json:"path"`
	// Keyword is the schema keyword that failed, e.g. "required", "enum".
	Keyword string `json:"keyword"`
	// Class is the failure class of Keyword.
	Class Class `json:"class"`
	// Message is written for a model to act on, and starts with the path.
	Message string `json:"message"`
	// Rule is the CEL text of the schema's rule that failed, for keyword
	// x-fixpoint-rules (package rules), so that reports group failures by
	// rule rather than by message; "" for every other keyword.
	Rule string `json:"rule,omitempty"`
}

// PriceBasis is how a call is billed: at the realtime price, at the
// batch price of a provider's batch API (OpenAI Batch, Anthropic Message
// Batches), or at the flex tier's price (batch rates on a synchronous
// call that the provider served on its flex tier).
type PriceBasis string

const (
	// PriceBasisRealtime is a call made on the provider's realtime API.
	PriceBasisRealtime PriceBasis = "realtime"
	// PriceBasisBatch is a request of a provider batch.
	PriceBasisBatch PriceBasis = "batch"
	// PriceBasisFlex is a realtime call the provider says it served on
	// its flex tier (Request.ServiceTier, Response.ServiceTier): billed
	// at batch rates, prompt-cache discounts on top.
	PriceBasisFlex PriceBasis = "flex"
)

// BasisOf is the basis a reply is priced on: flex when the provider says
// it served the call on the flex tier, else realtime. A call asked for
// flex and served on the default tier (a fallback, or a provider that
// ignored the tier) costs the default price; so does a reply that names
// no tier, which keeps a spend cap on the safe side.
func BasisOf(servedTier string) PriceBasis {
	if servedTier == ServiceTierFlex {
		return PriceBasisFlex
	}
	return PriceBasisRealtime
}

// PatchOutcome says how the patch a reply gave went.
type PatchOutcome string

const (
	// PatchApplied: the patch was applied; the attempt's value is the
	// patched value (valid or not).
	PatchApplied PatchOutcome = "applied"
	// PatchParseError: the reply held no JSON array of patch operations.
	PatchParseError PatchOutcome = "parse_error"
	// PatchApplyError: the patch did not apply to the value.
	PatchApplyError PatchOutcome = "apply_error"
	// PatchOutOfScope: an operation touched a location outside the errors'
	// subtrees; the patch was not applied.
	PatchOutOfScope PatchOutcome = "out_of_scope"
)

// Attempt classes beyond the validation classes (Class).
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
var FinalClasses = []string{string(ClassSyntax), string(ClassShape), string(ClassSemantic), string(ClassEvidence),
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
	Source          Source            `json:"source"`
	Repairs         []Repair          `json:"repairs"`
	Errors          []ValidationError `json:"errors"`
	Class           string            `json:"class"`
	Valid           bool              `json:"valid"`
	RepairedLocally bool              `json:"repaired_locally"`
	Value           json.RawMessage   `json:"value,omitempty"`
	FinishReason    FinishReason      `json:"finish_reason,omitempty"`
	Latency         time.Duration     `json:"latency"`
	TokensIn        int               `json:"tokens_in"`
	TokensOut       int               `json:"tokens_out"`
	TokensCached    int               `json:"tokens_cached"`
	// TokensCacheWrite is the input written to the provider's prompt
	// cache (Usage.CacheWriteTokens); like TokensCached, it is part of
	// TokensIn.
	TokensCacheWrite int `json:"tokens_cache_write"`
	// PriceBasis is how the call is billed (repair.Config.PriceBasis), and
	// CostUSD what it cost on that basis at the step's prices, by the
	// job's model (the price table's key, not the model the provider
	// reported); 0 for a call that got no reply.
	PriceBasis PriceBasis `json:"price_basis"`
	CostUSD    float64    `json:"cost_usd"`
	// ServiceTier is the tier the provider says it served the call on
	// (Response.ServiceTier): "flex", "default", or "" when the reply
	// named none. A flex job's attempt is priced by it (BasisOf).
	ServiceTier string `json:"service_tier,omitempty"`
	// Unpriced: the step's prices have no row for the model, so CostUSD
	// is 0 for want of a price, not because the call was free.
	Unpriced       bool       `json:"unpriced,omitempty"`
	Retries        []Retry    `json:"retries,omitempty"`
	ProviderStatus int        `json:"provider_status,omitempty"`
	ProviderError  string     `json:"provider_error,omitempty"`
	ProviderClass  ErrorClass `json:"provider_class,omitempty"`
	ProviderCode   string     `json:"provider_code,omitempty"` // the provider's own code of the error (ProviderError.Code), "" when none
	Model          string     `json:"model,omitempty"`
	RequestID      string     `json:"request_id,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	// Evidence grades each string and number of the attempt's value
	// against the job's source (package evidence), when the job's
	// evidence mode is not off and the value passed the schema and its
	// rules; nil otherwise.
	Evidence []Grounding `json:"evidence,omitempty"`
	// Warnings are the failures of the schema's rules of severity warn
	// (package rules): recorded and reported, not fed back.
	Warnings []ValidationError `json:"warnings,omitempty"`
	// Coerced counts the schema-guided repairs made to the reply's value
	// (the last Coerced entries of Repairs): with Valid, a call saved.
	Coerced int `json:"coerced,omitempty"`
	// Feedback is the correction sent after this attempt, "" when none.
	// Under StrategyPatch it is either the whole patch request (the user
	// turn sent as is, starting with repair.PatchRequestLead, the value to patch
	// in a ```json block) or the text of a full re-ask (see package repair).
	Feedback string `json:"feedback,omitempty"`
	// Patch is the patch a reply to a patch request gave, as JSON (the
	// operations array as extracted), "" when the attempt answered no patch
	// request or its reply held no patch.
	Patch string `json:"patch,omitempty"`
	// PatchOutcome says how that patch went, "" when the attempt answered
	// no patch request. Neither it nor Patch is needed to rebuild a step
	// from its attempts (see package repair).
	PatchOutcome PatchOutcome `json:"patch_outcome,omitempty"`
	// Step is the part of a document strategy the attempt was, "" for
	// the other strategies; Chunk the chunk a StepChunk attempt read.
	Step  StepKind  `json:"step,omitempty"`
	Chunk *ChunkRef `json:"chunk,omitempty"`
	// ToolCalls are the tool calls of the reply (the agent strategy), in
	// order, as the model made them.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Conflicts are, on a StepMerge attempt, the places where the chunks'
	// values disagreed.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// Called reports whether a was a provider call: every attempt but a merge
// by rule, which has no request, no reply and no tokens. A job's Calls
// count these.
func (a *Attempt) Called() bool {
	return a.Step != StepMerge || a.RequestHash != "" || a.Raw != "" || a.TokensIn+a.TokensOut > 0
}

// StepKind is the part of a document strategy an attempt was; "" for the
// one conversation of the other strategies.
type StepKind string

const (
	// StepChunk is a call over one chunk of the document (parallel and
	// sequential strategies); Attempt.Chunk says which.
	StepChunk StepKind = "chunk"
	// StepMerge is the merge of the chunks' values, made by package merge:
	// no call (no request, no tokens, no cost); or, under
	// Limits.MergeModel, a call to that model, sent the chunks' values.
	// Its value is the merged value, checked against the full schema, the
	// rules and the evidence over the whole document; its Conflicts where
	// the chunks' values disagreed (package merge's).
	StepMerge StepKind = "merge"
	// StepRepair is a call repairing a merged (or sequentially built)
	// value the full schema does not take.
	StepRepair StepKind = "repair"
	// StepAgent is one turn of the agent strategy: its tool calls are in
	// Attempt.ToolCalls.
	StepAgent StepKind = "agent"
)

// StepKinds lists every step kind but "", for checking a filter on it.
var StepKinds = []StepKind{StepChunk, StepMerge, StepRepair, StepAgent}

// ChunkRef names one chunk of a document: its number (0 for the first)
// and its place, code point offsets into the document, half open. A list
// pass over the rest of chunk N (see docs/documents.md, "List passes")
// has the chunk's N, its own Start (after the chunk's) and the chunk's
// End, and Pass from 1. The ledger keeps N, Start and End: a pass is told
// from its chunk by its Start, and Pass is counted again on replay.
type ChunkRef struct {
	N     int `json:"n"`
	Start int `json:"start"`
	End   int `json:"end"`
	Pass  int `json:"pass,omitempty"`
}

// Conflict is a place in a merged value where the chunks gave different
// values (package merge).
type Conflict struct {
	// Path is the place in the merged value, a JSON pointer.
	Path string `json:"path"`
	// Values are the distinct values the chunks gave there, in the order
	// of the first chunk that gave each.
	Values []json.RawMessage `json:"values"`
	// Chunks holds, for each of Values, the numbers of the chunks that
	// gave it, ascending.
	Chunks [][]int `json:"chunks"`
	// Chosen is the value the merged value holds: one of Values.
	Chosen json.RawMessage `json:"chosen"`
	// By says what decided the choice when it was not the count (the
	// value the most chunks gave, ties to the earliest chunk):
	// ConflictByGrounding, or "".
	By string `json:"by,omitempty"`
}

// ConflictByGrounding is a Conflict's By when the chosen value is
// grounded in its chunk and the value the count would have chosen was
// graded none in every chunk that gave it (see package merge).
const ConflictByGrounding = "grounding"

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

// Error returns the message, so that a ValidationError can travel as an
// error too.
func (e ValidationError) Error() string { return e.Message }
