package pipeline

import (
	"fmt"
	"strings"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// EnvelopeVersion is the version of the job message this code writes. A
// worker rejects messages of a version it does not know.
const EnvelopeVersion = 1

// Envelope is the job message on the queue. It is small: the schema travels
// by its content hash (schemas are stored once in Postgres), and the worker's
// own configuration decides base URLs and keys, never the message.
type Envelope struct {
	V          int      `json:"v"`
	JobID      string   `json:"job_id"`
	Batch      string   `json:"batch"`
	RowNo      int      `json:"row_no"`
	System     string   `json:"system,omitempty"`
	Prompt     string   `json:"prompt"`
	SchemaHash string   `json:"schema_hash"`
	Provider   string   `json:"provider"`
	Model      string   `json:"model"`
	Mode       llm.Mode `json:"mode"`
	MaxTokens  int      `json:"max_tokens,omitempty"`
	Temp       *float64 `json:"temperature,omitempty"`
	Limits     Limits   `json:"limits"`
	// Run is the batch run the job is in (enqueue requeue starts run 2,
	// 3, ...); 0 means 1. A message of an earlier run than the job's is
	// acked unrun.
	Run int `json:"run,omitempty"`
	// Metadata was the input row. Enqueue no longer sends it (the ledger
	// has it); it is read from messages of older versions.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// RunOrFirst is the envelope's run, 1 when unset.
func (e *Envelope) RunOrFirst() int { return max(e.Run, 1) }

// DecodeEnvelope parses and checks a job message. Every error matches
// ErrBadJob and names what is wrong.
func DecodeEnvelope(data []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: envelope is not valid JSON: %v", ErrBadJob, err)
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
		return fmt.Errorf("%w: envelope version %d, this worker reads version %d", ErrBadJob, e.V, EnvelopeVersion)
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
		return fmt.Errorf("%w: envelope lacks %s", ErrBadJob, strings.Join(missing, ", "))
	}
	switch e.Mode {
	case llm.ModePrompt, llm.ModeJSONSchema, llm.ModeTool:
	case "":
		e.Mode = llm.ModePrompt
	default:
		return fmt.Errorf("%w: mode %q is not prompt, json_schema or tool", ErrBadJob, e.Mode)
	}
	return e.Limits.WithDefaults().Validate()
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
