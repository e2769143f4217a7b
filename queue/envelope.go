package queue

import (
	"fmt"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
)

// EnvelopeVersion is the version of the job message this code writes. A
// worker rejects messages of a version it does not know.
const EnvelopeVersion = 1

// Envelope is the job message on the queue. It is small: the schema and the
// job's document travel by their content hashes (each is stored once in
// Postgres), and the worker's own configuration decides base URLs and keys,
// never the message.
type Envelope struct {
	V          int             `json:"v"`
	JobID      string          `json:"job_id"`
	Batch      string          `json:"batch"`
	RowNo      int             `json:"row_no"`
	System     string          `json:"system,omitempty"`
	Prompt     string          `json:"prompt"`
	SchemaHash string          `json:"schema_hash"`
	Provider   string          `json:"provider"`
	Model      string          `json:"model"`
	Mode       fixpoint.Mode   `json:"mode"`
	MaxTokens  int             `json:"max_tokens,omitempty"`
	Temp       *float64        `json:"temperature,omitempty"`
	Limits     fixpoint.Limits `json:"limits"`
	// Run is the batch run the job is in (enqueue requeue starts run 2,
	// 3, ...); 0 means 1. A message of an earlier run than the job's is
	// acked unrun.
	Run int `json:"run,omitempty"`
	// Delivery is how the job's calls are made: DeliveryRealtime ("" too),
	// DeliveryBatch, in provider batch waves, or DeliveryFlex, realtime
	// calls on the provider's flex tier.
	Delivery string `json:"delivery,omitempty"`
	// Deadline (unix seconds, 0 for none) is when a batch-delivery job
	// must be final: near it, its attempts run realtime.
	Deadline int64 `json:"deadline,omitempty"`
	// CacheKey, when set, asks the provider to cache the prompt prefix the
	// batch's requests share (repair.Job.CacheKey).
	CacheKey string `json:"cache_key,omitempty"`
	// FromWave is set on the message of a batch-delivery job that the wave
	// driver hands to the queue to finish realtime: the worker goes on
	// from the attempts the ledger has recorded (the waves' attempts), not
	// from nothing.
	FromWave int64 `json:"from_wave,omitempty"`
	// Evidence is what the evidence stage does with a valid value ("" is
	// off), EvidenceSource the batch's setting of what the job's values
	// are checked against (fixpoint.EvidenceSourceRow, ...), and Source
	// the job's source text, made at enqueue from its row and prompt.
	Evidence       fixpoint.EvidenceMode `json:"evidence,omitempty"`
	EvidenceSource string                `json:"evidence_source,omitempty"`
	Source         string                `json:"source,omitempty"`
	// Document, when set, is the hash of the job's document
	// (store.DocumentHash: 64 lowercase hex digits), which the worker
	// loads from the ledger and puts in the first user message; the text
	// itself is never in the message.
	Document string `json:"document,omitempty"`
	// Messages, when set, are the conversation the job goes on from
	// instead of Prompt alone: a job requeued after its revalidation
	// failed gets its prompt, the reply checked and the errors found as
	// feedback.
	Messages []fixpoint.Message `json:"messages,omitempty"`
}

// Deliveries of a batch's calls (Envelope.Delivery).
const (
	DeliveryRealtime = "realtime"
	DeliveryBatch    = "batch"
	DeliveryFlex     = "flex"
)

// ServiceTier is the tier the job's calls ask for: flex for a job
// delivered flex, "" (the provider's default) otherwise.
func (e *Envelope) ServiceTier() string {
	if e.Delivery == DeliveryFlex {
		return fixpoint.ServiceTierFlex
	}
	return ""
}

// MergeModelBatchReason is why a job with a merge model
// (fixpoint.Limits.MergeModel) is not delivered in waves: a wave holds
// the requests of one model, and an OpenAI batch file must.
const MergeModelBatchReason = "merge_model runs with realtime delivery only: a batch wave holds the calls of one model (an OpenAI batch file must), and the merge call is to another"

// BatchDelivery reports that the job is delivered in waves.
func (e *Envelope) BatchDelivery() bool { return e.Delivery == DeliveryBatch }

// DeadlineTime is the job's deadline, zero when none.
func (e *Envelope) DeadlineTime() time.Time {
	if e.Deadline == 0 {
		return time.Time{}
	}
	return time.Unix(e.Deadline, 0)
}

// RunOrFirst is the envelope's run, 1 when unset.
func (e *Envelope) RunOrFirst() int { return max(e.Run, 1) }

// DecodeEnvelope parses and checks a job message. Every error matches
// ErrBadJob and names what is wrong.
func DecodeEnvelope(data []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: envelope is not valid JSON: %v", fixpoint.ErrBadJob, err)
	}
	if err := e.Validate(); err != nil {
		return &e, err
	}
	return &e, nil
}

// Validate checks the fields every job needs.
func (e *Envelope) Validate() error {
	var missing []string
	if e.V != EnvelopeVersion {
		return fmt.Errorf("%w: envelope version %d, this worker reads version %d", fixpoint.ErrBadJob, e.V, EnvelopeVersion)
	}
	if e.JobID == "" {
		missing = append(missing, "job_id")
	}
	if e.Prompt == "" {
		missing = append(missing, "prompt")
	}
	if e.SchemaHash == "" {
		missing = append(missing, "schema_hash")
	}
	if e.Provider == "" {
		missing = append(missing, "provider")
	}
	if e.Model == "" {
		missing = append(missing, "model")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: envelope lacks %s", fixpoint.ErrBadJob, strings.Join(missing, ", "))
	}
	switch e.Delivery {
	case "", DeliveryRealtime, DeliveryBatch, DeliveryFlex:
		// A provider without a flex tier is refused at enqueue, and its
		// client refuses a flex request (the job fails bad_request).
	default:
		return fmt.Errorf("%w: delivery %q is not realtime, batch or flex", fixpoint.ErrBadJob, e.Delivery)
	}
	switch e.Mode {
	case fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool:
	case "":
		e.Mode = fixpoint.ModePrompt
	default:
		return fmt.Errorf("%w: mode %q is not prompt, json_schema or tool", fixpoint.ErrBadJob, e.Mode)
	}
	if e.Document != "" && !isHash(e.Document) {
		return fmt.Errorf("%w: document %q is not a document hash (64 lowercase hex digits)", fixpoint.ErrBadJob, textclip.Runes(e.Document, 80))
	}
	if e.MaxTokens < 0 {
		return fmt.Errorf("%w: max_tokens %d is negative", fixpoint.ErrBadJob, e.MaxTokens)
	}
	// The providers take 0..2 (OpenAI) or 0..1 (Anthropic); outside, every
	// call of the job would be refused.
	if t := e.Temp; t != nil && !(*t >= 0 && *t <= 2) {
		return fmt.Errorf("%w: temperature %v is outside 0..2", fixpoint.ErrBadJob, *t)
	}
	lim := e.Limits.WithDefaults()
	if err := lim.Validate(); err != nil {
		return err
	}
	if lim.MergeModel != "" && e.Delivery == DeliveryBatch {
		return fmt.Errorf("%w: %s", fixpoint.ErrBadJob, MergeModelBatchReason)
	}
	return lim.ValidateMode(e.Mode)
}

// isHash reports whether s is a SHA-256 in lowercase hex.
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// EncodeEnvelope is the job message of e, as Publish sends it (the
// version set when it is zero).
func EncodeEnvelope(e *Envelope) ([]byte, error) {
	if e.V == 0 {
		e.V = EnvelopeVersion
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", e.JobID, err)
	}
	return b, nil
}
