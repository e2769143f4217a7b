// Package sim is an in-process language-model server for tests, demos and
// benchmarks. It speaks the OpenAI Chat Completions, Anthropic Messages and
// Ollama chat wire formats over real HTTP and answers like a model that is
// asked for JSON: a schema-valid instance, then faults drawn from a
// configurable mix.
//
// # What it answers
//
// The simulator looks for a JSON Schema in the request, in this order:
// OpenAI response_format.json_schema.schema, the first tool's parameters /
// input_schema, Ollama's format object, or a block in the system prompt (or
// the first user message) between the lines [SchemaMarkerOpen] and
// [SchemaMarkerClose]. Without one it answers with a few lines of prose.
//
// The ground truth is a schema-valid instance generated from (Config.Seed,
// task key, schema text, task text); [Server.Truth] returns it (and
// [TruthFor], without a server). The task key is the job id of OpenAI's
// "user" or Anthropic's metadata.user_id (without the run a requeued job's
// id carries, fixpoint.RequestUser), or else a hash of the first user
// message (up to a quoted previous reply, and of a repair-strategy
// request's the task between fixpoint.TaskOpen and fixpoint.TaskClose;
// [TaskKey] computes it); callers that rewrite the first message otherwise
// on a repair turn should send a user id. The task text is the same part
// of the first user message, less a schema block in it. The faults are
// drawn by the task, the run and the model: a requeued job, or the same
// task on another model, gets faults of its own around the same truth.
// An array has 1 to 3 items within its minItems and maxItems, except that
// one with minItems of 3 or more and a maxItems has minItems to maxItems of
// them ([InvoiceSchema]'s 30 to 60 line items). On a first attempt the reply is
// the ground truth with faults drawn from Config.Mix: formatting faults
// (fences, prose, trailing commas, single quotes, Python literals,
// comments), content faults (wrong types, missing required properties,
// extra properties, enum violations, out-of-range numbers), shape faults
// (below), truth faults (below) and outcome faults (truncation, refusal,
// empty reply).
//
// # The ground truth is copied from the task
//
// A faithful model copies what the task states. Each string and number of
// the truth at a place package evidence does not exempt (evidence.Exempt:
// not under enum or const, nor under "x-fixpoint-evidence": false; a
// derived summary or category stays generated) is a span of the task text
// of its kind, drawn by seed among those the node allows (type, bounds,
// multipleOf, length, pattern):
//
//   - a number: a number as the text writes it (49.90, 1,249.99, 49,90,
//     -5); for a property whose name says money (price, amount, total,
//     cost, fee) only one next to a currency (EUR 49.90, $12, 30 €);
//   - a string of format date: a date the text writes as 2026-11-03,
//     3.11.2026, 3 November 2026 or November 3, 2026, as an ISO date;
//     format email: an address in the text;
//   - a string with a pattern: a run of 1 to 6 words the pattern matches;
//   - a name (the property's last word is name, customer, vendor,
//     company, supplier, person, contact, author, client, ...): a run of
//     2 to 4 capitalized words with only spaces between them ("Ada Park");
//   - another string: a run of 1 to 6 words, on one line and within one
//     sentence.
//
// A word is what stands between white space, less the punctuation around
// it. A leaf the text has no span of its kind for is left out when its
// property is optional, as a faithful model leaves out what the text does
// not say, and keeps its generated value when it is required. Strings of
// another format (date-time, uri, uuid, ...) and patterns Go cannot read
// keep their generated value. Items of an array with uniqueItems get
// different spans while there are some. The simulator cannot tell a row's
// values from the words a prompt template adds around them: a free-text
// property (the last kind above) may be copied from the template's text,
// which evidence-source row does not count; a name, a number, a date or a
// pattern rarely is. When the schema has rules (x-fixpoint-rules, package
// rules), the truth is drawn again, up to 32 times, until every rule of
// severity error holds; a schema whose rules no draw keeps (a sum no random
// draw meets) gets the last draw, which breaks them.
//
// # Shape faults
//
// Shape faults are what a schema-guided local repair meets: five it can
// undo without loss, giving back the ground truth exactly, and two it must
// not coerce. Each is drawn with its own probability in Config.Mix, from a
// seed stream of its own after the content faults (so a mix that adds them
// leaves the content faults where they were, and a mix without them
// answers as before they existed), and put at most once per reply, at a
// place no content fault took. The places exclude the root and any node
// that reaches oneOf or anyOf. Exactly:
//
//   - scalar_as_string (lossless): a number or boolean of the truth, where
//     the node declares its types and they exclude string, written as a
//     string of its JSON text: 42 as "42", 12.5 as "12.5", true as "true".
//   - enum_case (lossless): a string of the truth under enum or const that
//     matches exactly one allowed value up to letter case and surrounding
//     white space, written as one of: first letter upper-cased ("Bug"),
//     all upper case ("BUG"), all lower case ("eur" for "EUR"), a leading
//     space (" bug") or a trailing one ("bug "), drawn among those that
//     differ from it and are not allowed themselves.
//   - single_for_array (lossless): an array of the truth with exactly one
//     item, whose node declares its types (not the item's) and has items
//     (not prefixItems), written as that item: ["x"] as "x".
//   - null_optional (lossless): an optional property the truth leaves out,
//     whose node declares its types and allows no null (type, enum,
//     const), written as null. The repair drops the property.
//   - renamed_key (lossless): a property of the truth under another
//     spelling of its name: camelCase for a name with _ or - in it
//     ("customer_name": "customerName"), snake_case for a camelCase one
//     ("dueDate": "due_date"), else capitalized ("category": "Category");
//     only where the object's node declares no property of that spelling
//     or of one equal to it up to case and separators, and the property is
//     required or the node has additionalProperties false (else the
//     rename would pass unseen). Its value is the truth's.
//   - number_prose (lossy): a number of the truth, where scalar_as_string
//     could go, written as prose: "about R" with R the number rounded to
//     two significant digits (41.37: "about 41", 4327.5: "about 4300"), or,
//     half the time when the property's name hints at a unit, the number's
//     text and the unit: "12.5 EUR" (price, amount, total, cost, fee),
//     "3 units" (qty, quantity, count), "40 kg" (weight, mass), "30 years"
//     (age), "5 %" (percent, rate).
//   - enum_synonym (lossy): a string under enum or const written as a
//     synonym: from a short table for common values ("bug": "Bug report",
//     "pending": "Awaiting shipment", "high": "Urgent", ...), else, for a
//     value with _ or -, its words with spaces and the first capitalized
//     ("in_progress": "In progress"), else "similar to " and the value;
//     never one that is allowed or matches one up to case and space.
//
// A validator reports scalar_as_string, single_for_array, null_optional and
// number_prose as type errors (class shape), enum_case and enum_synonym as
// enum or const errors, renamed_key as a missing required property and a
// property additionalProperties forbids (either, or both). The fault
// checker finds them as wrong_type, enum_violation, missing_required and
// extra_property; X-Sim-Faults and Stats name them by their own kind as
// long as the value the first attempt wrote is still there (under the
// spelling it wrote, for renamed_key), in corrections too.
// Some content faults can also be undone locally: wrong_type on a number
// writes its text as a string (as scalar_as_string does) and
// enum_violation on a string may write it upper-cased; they keep their
// kind. A correction naming a shape fault fixes it with Config.FixProb,
// writing the truth's value (for null_optional: leaving the property out;
// for renamed_key, the missing property written and the misspelt one
// removed, each as its own fault).
//
// Every walk over a schema and the values made from it is bounded: a
// schema that refers to itself ({"$ref": "#"}, a required property whose
// schema is the root, an array of at least five of itself) or fans out
// through allOf is answered like any other, and when no finite value
// satisfies it, or it asks for more than a reply holds (minItems of a
// billion), with a bounded value (at most 8,192 values, 128 KiB of text)
// that breaks it.
//
// # Truth faults
//
// Truth faults keep the schema but are not true; package rules and the
// evidence stage catch them, the schema does not. Each is drawn with its
// probability in Config.Mix once per first attempt, from a seed stream of
// its own after the shape faults (a mix without them answers as before),
// at a place no other fault took:
//
//   - invented: a string or number of the truth that the task text
//     grounds (as package evidence grades it) replaced by an invented
//     value of its schema that the text does not hold, and that keeps the
//     schema's rules: a number 5% to 60% off, a date 1 to 90 days off, an
//     invented name for a name ("Dana Whitfield", "Globex Corporation"),
//     else a generated value ("Lilac ripple timber"). The invented value
//     at a place is a function of the task and the place
//     ([Server.Inventions] lists them), so a value holding it there holds
//     an invention.
//   - rule_break: a change of the truth that makes a rule of severity
//     error fail, at a path (the error's) holding every leaf changed: a
//     boolean negated, two leaves of one schema swapped (start and end), or
//     a leaf given another value of its schema. Up to 64 changes are
//     tried; a schema without rules of severity error has no place for
//     it, nor a truth whose rules no such change breaks.
//
// X-Sim-Faults and Stats name them: invented at each leaf that holds the
// simulator's invention there, rule_break at the path of each error rule
// that fails once the reply's schema faults are set right (the worker
// checks rules on a value the schema takes), in corrections too. A
// correction names an invented value by its pointer (the evidence
// stage's "/customer: "Dana Whitfield" does not appear in the source"),
// a rule break by the rule's message (its text when it has none) and
// path; a named one is fixed with Config.FixProb: the truth's value at the
// invented leaf, and at each leaf under the rule's path that differs from
// the truth, but for leaves at fault otherwise (a schema fault, an
// invention), which their own errors name. A patch reply fixes them with
// replace operations.
//
// # Long documents
//
// [NewDocument] writes a long document (DocumentMinChars to
// DocumentMaxChars characters; English, German, French or Japanese,
// which is written without spaces between words) with planted fields and
// DocumentItems subsidiaries, and returns its truth beside it;
// [DocumentSchema] is the schema they match. A request whose schema
// declares every root property of DocumentSchema is a request over such a
// text (the whole document, or one chunk of it, in its first user message):
// its truth is not drawn but read back from the text, each field and list
// item whose phrase the text holds whole, in the language the text is
// written in (a phrase cut by the chunk's start or end is not read). A
// field the text does not state is left out, as a faithful model leaves it
// out, required or not; the list holds the items in text order, the first
// Config.MaxListItems of them when that is set (a model asked for a long
// list in one call gives its first few tens: typical 50, messy 30).
//
// The faults are drawn as for any request, by the task key and a hash of
// the text (so the chunks of one job draw apart, and one chunk draws the
// same faults on every turn), on that truth. One more fault applies
// only here: invented_absent (Mix.InventedAbsent), drawn for each field
// the text does not state but the currency (an enum, which evidence does
// not check), writes a plausible invented value: a name, a jurisdiction,
// a date in 2019 to 2021, a notice period of 150 days or more, an amount
// with cents, of lists no document holds, in the text's language, so an
// evidence check over the whole document finds none of them; fault
// invented on a field the text does hold writes the same value. A correction
// naming such a field takes the invention back; one naming it as a
// missing required property (a validator that does not relax required on
// a chunk) gets the invention written in, as a pushed model invents.
//
// A request of the sequential strategy carries the value so far between
// fixpoint.ValueSoFarOpen and ValueSoFarClose beside its chunk. Its truth
// is that value extended from the chunk: the value so far as given,
// errors included, each field the chunk states written over it, and the
// chunk's subsidiaries (its first Config.MaxListItems) after those the
// value lists, by name. The reply is the whole value, with the faults
// drawn as for any request; copying the value so far is not extracting,
// so the list cut applies to the chunk's new items only.
//
// A merge request of the parallel strategy (a merge by a model) carries
// the chunks' values between fixpoint.MergeValuesOpen and
// MergeValuesClose, one line a chunk. Its truth is those values merged as
// a model would: objects by property, list items united by name (case
// and spacing folded; items without a name kept once each), a scalar the
// first non-null in part order. The reply is that value with the faults
// drawn as for any request, with no list cut (copying is not extracting).
//
// A correction over a document value looks each item of its list up in
// the text by the item's name, or by its country and percent when the
// name is missing, not by its index (a value merged from chunks lists
// them in another order, and the text of a repair may be a few chunks):
// the truth it fixes a named fault from is that item, past the list cut
// too, since looking an item up is not writing a list out.
//
// # Corrections
//
// A request is a correction when it carries a previous reply: an assistant
// message in the conversation, or the previous reply quoted in the last user
// message between the lines [PreviousReplyOpen] and [PreviousReplyClose]. The
// simulator parses the previous reply, finds its content faults and fixes
// each one the correction names exactly (its JSON pointer, delimited) with
// probability Config.FixProb; with probability Config.NewFaultProb it adds a
// new one. Faults that are not named stay, so vague feedback converges worse
// than exact feedback.
//
// # Patch replies
//
// A correction whose correction text contains the exact phrase
// [PatchMarker], "JSON Patch", is a patch request: the reply is an RFC 6902
// JSON Patch, a JSON array of add, remove and replace operations, against
// the previous value, instead of the value. The repair step sends, for
// example, after the previous value (an assistant message, or quoted
// between the previous-reply markers):
//
//	Reply with a JSON Patch (RFC 6902) that fixes only these errors in your
//	previous value, as a JSON array of operations:
//	1. /items/3/qty: expected integer, got string "2"
//
// The correction text is everything after the last assistant message or,
// with a quoted previous reply, the last user message outside the quote,
// which for the repair strategy includes the task: a task that says "JSON
// Patch" itself makes every repair turn a patch request. The patch fixes
// the content and shape faults of the previous value that the request names
// (as a correction does, each with Config.FixProb): replace with the
// truth's value, add for a missing property, remove for an extra one and
// for null_optional. Unnamed faults stay, and no new fault is added; an
// empty array answers a request naming nothing it can fix. Config.Mix
// spoils a patch with patch_bad_pointer (one operation's path does not
// exist: an array index dropped, "/items/qty"; the first token with an "s"
// added or removed; or "/data" in front; so the patch does not apply),
// patch_wrong_op (one operation's op changed: add for a replace at an
// array index, remove for a replace of a required property, replace for an
// add) and patch_extra_op (one more replace, of a value without an error,
// by another value of its schema), each drawn once per patch, and fences
// or prose around it with Mix.Fence and Mix.Prose. A patch is text
// whatever the request's mode (never a tool call), its output tokens
// counted from its text like any reply's; it carries the header
// X-Sim-Patch: 1, and its X-Sim-Faults lists the patch faults (with the
// path of the operation) and then the faults of the value the patch gives
// when applied (the previous value's when it does not apply).
// Stats.Patches counts patch replies. When the previous reply holds no
// JSON value (truncated, refused, empty) or its root is at fault, the reply
// is the full corrected value, as a model would send.
//
// Replies are a pure function of (seed, task key, run, model, turn,
// request): concurrency
// does not change them. Transport faults (Config.Transport) and latency are
// drawn per call and depend on arrival order; rate limits (Config.RPM, TPM)
// hold state per model and API key, and the prompt cache (below) holds the
// prefixes seen, so the cache fields of a reply's usage depend on the calls
// before it.
//
// Every reply carries the headers X-Sim-Faults (the faults in it, as
// "kind" or "kind:pointer", comma-separated) and X-Sim-Turn. [Server.Stats]
// counts calls, statuses, faults and transport events, and Config.Script
// forces the answer of chosen calls (a status, a delay, a hang, a reset).
//
// Tokens are counted the same way everywhere: bytes / 4, rounded up, of the
// prompt (system, messages, and the schema when it is not in the prompt) and
// of the completion.
//
// # Agents
//
// A request that offers a tool named fixpoint.ToolSetOutput is an agent's
// (issue 39's agent strategy); every other request with tools is answered
// as above. Its value is the one a prompt-mode request of the same task
// gets: the schema is the one between the schema markers in the system
// prompt, or else set_output's parameters; each set_output the agent made
// is taken as its reply and the tool results and user turns after it as
// the correction. So the first turn calls set_output with the first
// attempt's value (its content faults in it) and finish, two calls in one
// reply; a turn after results that are errors calls them again with the
// corrected value; a turn after a finish that succeeded (or a fail) says
// so in text. A refusal calls fail with RefusalText as the reason; a
// truncation cuts set_output's arguments (OpenAI; Anthropic sends the call
// empty, Ollama none) with the finish reason length; a prose fault answers
// the JSON as text instead of a call, for a driver to nudge, unless the
// request requires a call (OpenAI "required" or a named function,
// Anthropic "any" or "tool"; Ollama cannot say so). A tool_choice naming
// finish, fail or set_output calls that one tool. Calls have ids (OpenAI
// call_..., Anthropic toolu_01...; Ollama none, as Ollama), and results
// must answer them as the provider wants: on OpenAI, tool turns right
// after the calls' turn, one per call; on Anthropic, tool_result blocks in
// the next turn; otherwise the answer is the provider's 400 naming the
// id. OpenAI and Ollama have no error flag on a result: one whose content
// starts with "Error" is an error. The tools' definitions count in the
// prompt's tokens. This agent calls read_chunk, search or update_output
// only when a tool_choice names it, with empty arguments.
//
// An agent request over a long document (DocumentSchema) whose first user
// message holds no document, as the agent strategy sends it, is answered
// by a reader instead: it reads the chunks one a turn with read_chunk and
// puts what each holds with set_output, then update_output (the value a
// chunk call over that chunk's text gets, with its faults: a put refused
// for a content fault is corrected on the next turn, a prose fault or a
// refusal answers text to be nudged, an empty reply finishes before the
// document is read, a truncation cuts the put), then calls finish. A
// nudged turn calls a tool when the request requires one; on Ollama,
// which cannot say so, its text faults are drawn afresh. A refused finish
// starts another pass for the fields and list items it names: a search
// for the phrase that states each field and for each item's name, a read
// of the chunks found, every chunk again when it names the list but no
// item. See sim/agent_reader.go.
//
// # Batches
//
// The simulator serves the providers' batch APIs, in memory: OpenAI's Files
// (POST /v1/files, multipart with purpose=batch and a .jsonl file; GET
// /v1/files/{id} and /v1/files/{id}/content) and Batches (POST and GET
// /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel), and
// Anthropic's Message Batches (POST and GET /v1/messages/batches, GET
// .../{id}, POST .../{id}/cancel, GET .../{id}/results, which is the
// results_url it hands out). Objects, statuses, ids (file-, batch_,
// batch_req_, msgbatch_) and result lines have the published shapes; lists
// are newest first (OpenAI: limit, after; Anthropic: limit, after_id,
// before_id).
//
// Each request of a batch is answered as the same request is answered as a
// single call: the same reply whatever its place in the batch, its usage
// with the prompt cache's fields (Anthropic's service_tier is "batch"), and
// a request the single call refuses ends errored with that error. Transport
// faults, latency and rate limits do not apply; Config.Script does. A
// batch's requests finish one by one over Config.Batch.CompletionDelay in a
// seeded order, which is the order of the results (not the input's). A
// batch still running at Config.Batch.Deadline ends expired, its finished
// requests kept and the others expired; a cancel ends it
// Config.Batch.CancelDelay later, the requests not finished when it arrived
// cancelled. Config.Batch.ExpiredShare and ErroredShare make exact shares of
// each batch's requests end expired or errored (OpenAI: a 500 server_error
// under response in the error file; Anthropic: an api_error envelope nested
// under result.error). An OpenAI batch with an expired request ends expired;
// its error file holds the errored requests (error null, the error under
// response.body), the expired ones (batch_expired) and the cancelled ones
// (batch_cancelled, a shape OpenAI does not publish). OpenAI's request_counts
// move as requests finish, with expired and cancelled ones counted as
// failed at the end; Anthropic's stay at processing until the batch ends.
//
// OpenAI validates the input file when the batch is created: a line that is
// not a JSON object, lacks custom_id, method, url or body, repeats a
// custom_id, names another url or another model makes a batch whose every
// poll says failed, with each such line in errors.data (code, message,
// param, line). Anthropic refuses at create time, with a 400
// invalid_request_error, a custom_id outside ^[a-zA-Z0-9_-]{1,64}$ or
// repeated; a request's params are checked when it runs. With
// Config.QuotaExhausted both create calls get the quota error.
//
// Nothing runs in the background: a batch advances when it is looked at, on
// the clock Config.Now, so a test with an injected clock steps it exactly,
// and the requests due run then, in order. Ids depend on the seed and on
// how many objects were made before; fates and order on the seed and the
// batch id. Stats.Batch counts files, batches and requests by outcome.
//
// # Prompt caching
//
// A prompt prefix seen recently, for the same provider, model and key, is
// billed as cached, with each provider's rules; the cached prefixes expire
// Config.Cache.TTL (5 minutes) after their last use, on the clock
// Config.Now. The prompt is read in the order the providers cache it:
// schema (tools, response_format), system prompt, messages.
//
// OpenAI caches automatically, prompts of at least OpenAICacheMinTokens
// (1,024) tokens: usage.prompt_tokens_details.cached_tokens is the longest
// prefix shared with a prompt seen before, in whole OpenAICacheIncrement
// (128) token steps, and prompt_tokens still counts every token.
// prompt_cache_key scopes it (requests with different keys, or with and
// without one, do not share), prompt_cache_retention "24h" keeps a prefix a
// day.
//
// Anthropic caches only a prefix that ends at a cache_control breakpoint
// (a system or message block, a tool, or the request's top-level
// cache_control, which marks the last block; at most 4 per request) and
// holds at least the model's minimum: AnthropicHaikuCacheMinTokens (2,048)
// for a model whose name contains "haiku", as for Claude Haiku 3 and 3.5,
// AnthropicCacheMinTokens (1,024) for any other, as for Claude Sonnet 4 and
// 4.5 and Opus 4 and 4.1 (the "Cache limitations" of Anthropic's prompt
// caching guide); Config.Cache.AnthropicMinTokens sets one minimum for
// every model (4,096 for Claude Haiku 4.5 or Opus 4.5). The longest cached
// prefix at a breakpoint, or at one of the 20 block boundaries before one,
// is read (cache_read_input_tokens); the breakpoints after it are written
// (cache_creation_input_tokens, split by TTL in cache_creation: a block's
// "ttl": "1h" keeps it an hour); input_tokens counts only the tokens after
// the last breakpoint. Ollama has no cache.
//
// Batch requests read and write the same cache as single calls, each at
// the time it finishes; Config.Batch.CacheHitProb makes their reads best
// effort, as Anthropic documents them. Config.Cache.Off turns caching off.
// The cache never changes a reply's text. Stats.Cache counts reads and
// writes.
//
// # Flex
//
// An OpenAI call with service_tier "flex" asks for the flex tier: it is
// answered Config.FlexLatency later than the same call on the default
// tier, its reply says service_tier "flex" (every other OpenAI reply says
// "default"), and a share Config.FlexBusy of such calls, drawn per call
// from Seed, is refused with the tier's 429 Resource Unavailable (type and
// code resource_unavailable, no Retry-After), counted as EventCapacity.
// The refusal is not a rate limit and is not counted as one (though the
// call, admitted first, took its share of the RPM and TPM budgets). A
// service_tier other than auto, default or flex is a 400.
package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// FixProbDefault is Config.FixProb when it is 0.
	FixProbDefault = 0.9
	// RetryAfterDefault is the Retry-After of injected 429s.
	RetryAfterDefault = time.Second
	// TrickleIntervalDefault is the gap between the bytes of a trickle.
	TrickleIntervalDefault = 50 * time.Millisecond
	// HugeBytesDefault is the size of a huge reply.
	HugeBytesDefault = 5 << 20
	// BatchCompletionDelayDefault is Config.Batch.CompletionDelay when it
	// is 0: short, so that tests poll a batch to its end quickly.
	BatchCompletionDelayDefault = 100 * time.Millisecond
	// BatchDeadlineDefault is Config.Batch.Deadline when it is 0: the
	// providers' 24-hour completion window.
	BatchDeadlineDefault = 24 * time.Hour
	// CacheTTLDefault is Config.Cache.TTL when it is 0: both providers keep
	// an unused prefix about 5 minutes.
	CacheTTLDefault = 5 * time.Minute
)

// ErrConfig is matched by every configuration error.
var ErrConfig = errors.New("invalid simulator config")

var errNotSchema = errors.New("not a JSON Schema object")

// Mix holds the probabilities of the reply faults, each in [0, 1].
//
// The outcome faults (Refusal, Empty, Truncation) are exclusive and drawn
// first; their sum must not exceed 1. Content, shape and formatting faults
// are drawn independently of each other, each applied when the reply has a
// place for it (an enum violation needs an enum in the schema, Python
// literals need a boolean or null in the value). Formatting faults go into
// text only, never into a tool input sent as a JSON object (Anthropic,
// Ollama). The patch faults apply to patch replies only.
type Mix struct {
	Refusal    float64
	Empty      float64
	Truncation float64

	WrongType       float64
	MissingRequired float64
	ExtraProperty   float64
	EnumViolation   float64
	OutOfRange      float64

	Fence          float64
	Prose          float64
	TrailingComma  float64
	SingleQuotes   float64
	PythonLiterals float64
	Comments       float64

	// Shape faults a schema-guided local repair fixes without loss (see
	// "Shape faults" in the package documentation): each is drawn from a
	// seed stream of its own, after the content faults above, so turning
	// them on leaves those faults where they were.
	ScalarAsString float64 // a number or boolean written as its JSON text in a string: "42", "true"
	EnumCase       float64 // an enum or const string in another letter case or with surrounding spaces
	SingleForArray float64 // the one item of a one-item array, without the array
	NullOptional   float64 // null for an optional property the truth lacks and whose type excludes null
	RenamedKey     float64 // a property under another case or separators of its name: "customerName" for "customer_name"
	// Shape faults a local repair must not coerce: the value is lost.
	NumberProse float64 // a number written as prose in a string: "about 40", "40 kg"
	EnumSynonym float64 // an enum or const string replaced by a synonym: "Bug report" for "bug"

	// Faults of a JSON Patch reply (see "Patch replies"), each drawn once
	// per patch reply.
	PatchBadPointer float64 // one operation's path does not exist, so the patch does not apply
	PatchWrongOp    float64 // one operation has the wrong op: add for replace at an array index, remove for replace of a required property, replace for add of a missing one
	PatchExtraOp    float64 // one more operation replaces a value that had no error

	// Truth faults (see "Truth faults" in the package documentation): the
	// value keeps the schema but is not true. Each is drawn once per first
	// attempt, from a seed stream of its own, at a place no other fault
	// took.
	RuleBreak float64 // a change that makes one of the schema's error rules fail
	Invented  float64 // a value copied from the task replaced by one the task does not hold
	// InventedAbsent is drawn once for each field of a long document
	// (DocumentSchema) that the request's text does not hold: a value
	// invented for it (see "Long documents" in the package documentation).
	InventedAbsent float64
}

// Prob returns the probability of fault kind k.
func (m Mix) Prob(k FaultKind) float64 {
	switch k {
	case FaultRefusal:
		return m.Refusal
	case FaultEmpty:
		return m.Empty
	case FaultTruncation:
		return m.Truncation
	case FaultWrongType:
		return m.WrongType
	case FaultMissingRequired:
		return m.MissingRequired
	case FaultExtraProperty:
		return m.ExtraProperty
	case FaultEnumViolation:
		return m.EnumViolation
	case FaultOutOfRange:
		return m.OutOfRange
	case FaultFence:
		return m.Fence
	case FaultProse:
		return m.Prose
	case FaultTrailingComma:
		return m.TrailingComma
	case FaultSingleQuotes:
		return m.SingleQuotes
	case FaultPythonLiterals:
		return m.PythonLiterals
	case FaultComments:
		return m.Comments
	case FaultScalarAsString:
		return m.ScalarAsString
	case FaultEnumCase:
		return m.EnumCase
	case FaultSingleForArray:
		return m.SingleForArray
	case FaultNullOptional:
		return m.NullOptional
	case FaultNumberProse:
		return m.NumberProse
	case FaultEnumSynonym:
		return m.EnumSynonym
	case FaultRenamedKey:
		return m.RenamedKey
	case FaultPatchBadPointer:
		return m.PatchBadPointer
	case FaultPatchWrongOp:
		return m.PatchWrongOp
	case FaultPatchExtraOp:
		return m.PatchExtraOp
	case FaultRuleBreak:
		return m.RuleBreak
	case FaultInvented:
		return m.Invented
	case FaultInventedAbsent:
		return m.InventedAbsent
	}
	return 0
}

// Set sets the probability of fault kind k; it reports false for a kind
// it does not know. The probability is checked when the config is (see
// Config.Validate).
func (m *Mix) Set(k FaultKind, p float64) bool {
	ptrs := map[FaultKind]*float64{
		FaultRefusal: &m.Refusal, FaultEmpty: &m.Empty, FaultTruncation: &m.Truncation,
		FaultWrongType: &m.WrongType, FaultMissingRequired: &m.MissingRequired, FaultExtraProperty: &m.ExtraProperty,
		FaultEnumViolation: &m.EnumViolation, FaultOutOfRange: &m.OutOfRange,
		FaultFence: &m.Fence, FaultProse: &m.Prose, FaultTrailingComma: &m.TrailingComma,
		FaultSingleQuotes: &m.SingleQuotes, FaultPythonLiterals: &m.PythonLiterals, FaultComments: &m.Comments,
		FaultScalarAsString: &m.ScalarAsString, FaultEnumCase: &m.EnumCase, FaultSingleForArray: &m.SingleForArray,
		FaultNullOptional: &m.NullOptional, FaultNumberProse: &m.NumberProse, FaultEnumSynonym: &m.EnumSynonym,
		FaultRenamedKey:      &m.RenamedKey,
		FaultPatchBadPointer: &m.PatchBadPointer, FaultPatchWrongOp: &m.PatchWrongOp, FaultPatchExtraOp: &m.PatchExtraOp,
		FaultRuleBreak: &m.RuleBreak, FaultInvented: &m.Invented, FaultInventedAbsent: &m.InventedAbsent,
	}
	f, ok := ptrs[k]
	if ok {
		*f = p
	}
	return ok
}

// shapeOn reports whether any shape fault can be drawn.
func (m Mix) shapeOn() bool {
	for _, k := range shapeKinds {
		if m.Prob(k) > 0 {
			return true
		}
	}
	return false
}

// Transport holds the per-call probabilities of transport faults. They are
// exclusive and their sum must not exceed 1.
type Transport struct {
	Status500 float64 // 500 with the provider's server error body
	Status503 float64 // 503 (Ollama: "server busy")
	Status529 float64 // 529 overloaded (any provider)
	// RateLimited answers 429 with Retry-After (Config.RetryAfter) and the
	// provider's rate-limit headers.
	RateLimited float64
	Hang        float64 // never answer until the client or the server goes away
	Trickle     float64 // send the body one byte per Config.TrickleInterval
	Reset       float64 // close the connection without answering
	Malformed   float64 // 200 with half a JSON body
	Huge        float64 // a valid reply of Config.HugeBytes
}

func (t Transport) sum() float64 {
	return t.Status500 + t.Status503 + t.Status529 + t.RateLimited + t.Hang + t.Trickle + t.Reset + t.Malformed + t.Huge
}

// Dist is a latency distribution.
type Dist string

// Latency distributions.
const (
	DistFixed     Dist = "fixed"     // always P50
	DistUniform   Dist = "uniform"   // uniform with the given median and 99th percentile
	DistLognormal Dist = "lognormal" // lognormal with the given median and 99th percentile
)

// Latency sets the simulated think time: a per-request part plus a per-token
// part times the completion tokens. Zero values mean no delay.
type Latency struct {
	// Dist defaults to DistLognormal.
	Dist       Dist
	RequestP50 time.Duration
	RequestP99 time.Duration
	TokenP50   time.Duration
	TokenP99   time.Duration
}

// ScriptedReply forces what one call gets. A zero Status with no Body and no
// Hang/Reset/Trickle means "answer normally" (after Delay).
type ScriptedReply struct {
	// Status is the HTTP status. When Body is nil the simulator writes the
	// provider's own error body for the status (429 with Retry-After).
	Status int
	// Header is added to the response headers.
	Header http.Header
	// Body, when non-nil, is sent as is.
	Body []byte
	// Delay is waited before answering.
	Delay time.Duration
	// Hang never answers, until the request's context or the server ends.
	Hang bool
	// Reset closes the connection without an answer.
	Reset bool
	// Trickle sends the (normal or given) body one byte per
	// Config.TrickleInterval.
	Trickle bool
}

// ScriptFunc decides the reply of call n (1-based, in arrival order). The
// request body can be read from r. Returning nil answers normally.
type ScriptFunc func(n int, r *http.Request) *ScriptedReply

// Config configures a Server. The zero value is a clean, instant simulator.
type Config struct {
	// Seed selects the ground truth and the fault draws.
	Seed uint64
	// Mix is the fault mix of first attempts.
	Mix Mix
	// FixProb is the probability that a correction (a patch request
	// too) that names a fault exactly fixes it. 0 means FixProbDefault;
	// negative means never.
	FixProb float64
	// NewFaultProb is the probability that a correction turn introduces a
	// new content fault (never a shape fault; never in a patch). 0 means
	// never.
	NewFaultProb float64
	// Transport is the per-call transport fault mix.
	Transport Transport
	// Latency is the think time; zero means instant.
	Latency Latency
	// RPM and TPM are the request and token budgets per minute, per model
	// and API key. 0 means unlimited (and no rate-limit headers).
	RPM int
	TPM int
	// QuotaExhausted answers every call with the provider's quota error
	// (OpenAI 429 insufficient_quota, Anthropic 400 "Your credit balance is
	// too low"; Ollama, which has no quota, a bare 429).
	QuotaExhausted bool
	// APIKey, when set, is the only key accepted: a call (chat or batch) with another
	// (Authorization: Bearer for OpenAI, x-api-key for Anthropic) gets the
	// provider's 401. Ollama takes no key.
	APIKey string
	// RetryAfter is the Retry-After of injected 429s. Default 1s.
	RetryAfter time.Duration
	// TrickleInterval is the gap between bytes of a trickled body. Default 50ms.
	TrickleInterval time.Duration
	// HugeBytes is the size of a huge reply. Default 5 MiB.
	HugeBytes int
	// Now is the clock for timestamps and rate limits. Default time.Now.
	Now func() time.Time
	// Script, when set, is asked first about every call, the batch
	// endpoints' included.
	Script ScriptFunc
	// KeyByPrompt keys each task by its first user message alone, ignoring
	// the request's user id (the job id): two batches of the same rows then
	// get the same replies, so a benchmark can compare settings on one
	// dataset although each batch's job ids differ.
	KeyByPrompt bool
	// Batch configures the batch endpoints (see "Batches" in the package
	// documentation).
	Batch BatchConfig
	// Cache configures the prompt-cache model (see "Prompt caching" in the
	// package documentation).
	Cache CacheConfig
	// FlexLatency is added to the think time of a call asking for the
	// flex tier (OpenAI's service_tier "flex"), which is slower; FlexBusy
	// is the share of such calls refused for want of capacity with
	// OpenAI's 429 Resource Unavailable (drawn per call from Seed). A flex
	// call served says service_tier "flex" in its reply. See "Flex" in
	// the package documentation.
	FlexLatency time.Duration
	FlexBusy    float64
	// MaxListItems is the most items a reply over a long document (see
	// "Long documents" in the package documentation) lists in one array,
	// the first ones its text holds: a model asked for a long list in one
	// call often gives only its first few tens. 0 means no limit.
	MaxListItems int
}

// BatchConfig configures the providers' batch endpoints. Transport faults,
// latency and rate limits do not apply to them (Script does).
type BatchConfig struct {
	// CompletionDelay is how long a batch runs: its requests finish one by
	// one over it, in a seeded order, and the batch ends when the last one
	// has. 0 means BatchCompletionDelayDefault; negative means no delay (the
	// first poll after the create call sees the batch ended).
	CompletionDelay time.Duration
	// Deadline ends a batch that is still running this long after its
	// creation: it ends expired, its unfinished requests expired, its
	// finished ones kept. 0 means BatchDeadlineDefault.
	Deadline time.Duration
	// CancelDelay is how long a cancel takes: the cancel call answers
	// cancelling (Anthropic: canceling), and polls from CancelDelay later on
	// see the batch ended. Requests that had not finished when the cancel
	// arrived end cancelled. Default 0.
	CancelDelay time.Duration
	// ExpiredShare is the share of each batch's requests that end expired,
	// as if the deadline had passed before they ran: round(share × n) of
	// them, chosen by seed. An OpenAI batch with an expired request ends
	// expired; an Anthropic one ends with request_counts.expired.
	ExpiredShare float64
	// ErroredShare is the share of each batch's requests that end errored
	// with the provider's 500 (OpenAI server_error in the error file,
	// Anthropic api_error nested in an errored result): round(share × n),
	// chosen by seed, none of them an expired one. ExpiredShare +
	// ErroredShare must not exceed 1.
	ErroredShare float64
	// CacheHitProb is the probability that a batch request whose prompt
	// prefix is cached reads it (Anthropic documents cache hits in batches
	// as best effort); a request that does not read still writes. 0 means
	// 1; negative means never.
	CacheHitProb float64
	// IDSalt is mixed into the ids of files and batches. Ids depend on the
	// seed and a counter alone otherwise, so a server restarted with the
	// same seed hands out the ids of the earlier run's batches again, and
	// a worker still polling one of those would read another batch's
	// results. simllm salts with its start time; tests leave it empty.
	IDSalt string
}

// CacheConfig configures the prompt-cache model.
type CacheConfig struct {
	// Off turns prompt caching off: no request reads or writes a cache.
	Off bool
	// TTL is how long a cached prefix lives after its last use. 0 means
	// CacheTTLDefault. A request asks for longer with Anthropic's
	// cache_control "ttl": "1h" or OpenAI's prompt_cache_retention "24h".
	TTL time.Duration
	// AnthropicMinTokens is the minimum cacheable prefix, in tokens, of
	// every Anthropic model. 0 means by model name:
	// AnthropicHaikuCacheMinTokens for a name containing "haiku",
	// AnthropicCacheMinTokens for any other.
	AnthropicMinTokens int
}

// WithDefaults returns c with defaults filled in.
func (c Config) WithDefaults() Config {
	switch {
	case c.FixProb == 0:
		c.FixProb = FixProbDefault
	case c.FixProb < 0:
		c.FixProb = 0
	}
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	c.TrickleInterval = cmp.Or(c.TrickleInterval, TrickleIntervalDefault)
	c.HugeBytes = cmp.Or(c.HugeBytes, HugeBytesDefault)
	c.Latency.Dist = cmp.Or(c.Latency.Dist, DistLognormal)
	c.Batch.CompletionDelay = cmp.Or(c.Batch.CompletionDelay, BatchCompletionDelayDefault)
	c.Batch.Deadline = cmp.Or(c.Batch.Deadline, BatchDeadlineDefault)
	if c.Batch.CacheHitProb == 0 {
		c.Batch.CacheHitProb = 1
	}
	c.Cache.TTL = cmp.Or(c.Cache.TTL, CacheTTLDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	probs := map[string]float64{"FixProb": c.FixProb, "NewFaultProb": c.NewFaultProb,
		"Batch.ExpiredShare": c.Batch.ExpiredShare, "Batch.ErroredShare": c.Batch.ErroredShare}
	for _, k := range allFaultKinds {
		probs["Mix."+string(k)] = c.Mix.Prob(k)
	}
	names := make([]string, 0, len(probs))
	for n := range probs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if p := probs[n]; math.IsNaN(p) || p < 0 || p > 1 {
			return fmt.Errorf("%w: %s = %v, want 0..1", ErrConfig, n, p)
		}
	}
	if s := c.Mix.Refusal + c.Mix.Empty + c.Mix.Truncation; s > 1 {
		return fmt.Errorf("%w: Mix.Refusal+Empty+Truncation = %v, want <= 1", ErrConfig, s)
	}
	if s := c.Transport.sum(); s < 0 || s > 1 {
		return fmt.Errorf("%w: Transport probabilities sum to %v, want 0..1", ErrConfig, s)
	}
	if c.MaxListItems < 0 {
		return fmt.Errorf("%w: MaxListItems = %d, want >= 0", ErrConfig, c.MaxListItems)
	}
	if c.RPM < 0 || c.TPM < 0 {
		return fmt.Errorf("%w: RPM = %d, TPM = %d, want >= 0", ErrConfig, c.RPM, c.TPM)
	}
	switch c.Latency.Dist {
	case DistFixed, DistUniform, DistLognormal:
	default:
		return fmt.Errorf("%w: Latency.Dist = %q, want fixed, uniform or lognormal", ErrConfig, c.Latency.Dist)
	}
	if c.Latency.RequestP50 < 0 || c.Latency.TokenP50 < 0 || c.Latency.RequestP99 < 0 || c.Latency.TokenP99 < 0 {
		return fmt.Errorf("%w: Latency durations must be >= 0", ErrConfig)
	}
	return c.validateBatchCache()
}

func (c Config) validateBatchCache() error {
	b := c.Batch
	if s := b.ExpiredShare + b.ErroredShare; s > 1 {
		return fmt.Errorf("%w: Batch.ExpiredShare+ErroredShare = %v, want <= 1", ErrConfig, s)
	}
	if b.Deadline < 0 || b.CancelDelay < 0 {
		return fmt.Errorf("%w: Batch.Deadline = %v, CancelDelay = %v, want >= 0", ErrConfig, b.Deadline, b.CancelDelay)
	}
	if math.IsNaN(b.CacheHitProb) || b.CacheHitProb > 1 {
		return fmt.Errorf("%w: Batch.CacheHitProb = %v, want <= 1", ErrConfig, b.CacheHitProb)
	}
	if c.Cache.TTL < 0 || c.Cache.AnthropicMinTokens < 0 {
		return fmt.Errorf("%w: Cache.TTL = %v, AnthropicMinTokens = %d, want >= 0", ErrConfig, c.Cache.TTL, c.Cache.AnthropicMinTokens)
	}
	return nil
}

// Validate reports a configuration error, matching ErrConfig.
func (c Config) Validate() error { return c.WithDefaults().validate() }

// Server is the simulator. It is an http.Handler and safe for concurrent use.
type Server struct {
	cfg    Config
	calls  atomic.Int64
	stats  counters
	limits *limiter
	// schemas caches parsed schemas by their text (see Server.schema).
	schemas rawCache[*schemaDoc]
	// systems caches the text of system prompts by their raw JSON.
	systems textCache
	// prompts is the prompt-cache model's state (promptcache.go).
	prompts promptCache
	// batches holds the batch endpoints' files and batches (batch.go).
	batches batchStore
	done    chan struct{}
	closeMu sync.Once
}

var _ http.Handler = (*Server)(nil)

// New returns a simulator. It panics on an invalid config (see Validate);
// use NewChecked to get an error instead.
func New(cfg Config) *Server {
	s, err := NewChecked(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// NewChecked returns a simulator, or an error matching ErrConfig.
func NewChecked(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{
		cfg:    cfg,
		limits: newLimiter(cfg.RPM, cfg.TPM, cfg.Now),
		done:   make(chan struct{}),
	}, nil
}

// Config returns the server's configuration with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Close releases hanging and trickling handlers. It is safe to call twice.
func (s *Server) Close() {
	s.closeMu.Do(func() { close(s.done) })
}

// Start serves a new simulator on a loopback port. close stops it, releasing
// hanging requests first; it is safe to call twice.
func Start(cfg Config) (srv *Server, url string, close func(), err error) {
	srv, err = NewChecked(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	ts := httptest.NewServer(srv)
	var once sync.Once
	return srv, ts.URL, func() {
		once.Do(func() {
			srv.Close()
			ts.CloseClientConnections()
			ts.Close()
		})
	}, nil
}
