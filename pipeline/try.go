package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// TrySpec is one job run outside a batch, through the same repair step
// as a worker's: `worker try` and the dashboard's Try playground build it
// from what they were given.
type TrySpec struct {
	// Provider is the provider the job is for, a row of the provider
	// table (llm.Providers): some modes need a schema a provider accepts.
	Provider string
	Model    string
	// System is an optional system prompt placed before the schema
	// instructions; Prompt the task.
	System, Prompt string
	// Schema is the JSON Schema's text. Compiled, when set, is that text
	// compiled already (and checked satisfiable) by the caller.
	Schema   []byte
	Compiled *validate.Schema
	Mode     fixpoint.Mode
	// MaxTokens caps the output of each call (0: the default).
	MaxTokens int
	Limits    fixpoint.Limits
	// Evidence is what the evidence stage does with a valid value ("" is
	// fixpoint.EvidenceDefault), and Source what it checks the value
	// against ("": the prompt). The schema's rules always run.
	Evidence fixpoint.EvidenceMode
	Source   string
	// Document is the job's document, "" for none: sent whole beside the
	// prompt, or split and read in several calls under a document
	// strategy (Limits.Strategy.Document), which needs one.
	Document string
	// Nonce, when not empty, is folded into the job's id: a simulator draws
	// a job's replies from its id, so another nonce gives other draws for
	// the same input (the playground's seed).
	Nonce string
}

// TryJobID is the id a tried job gets: "try-" and a hash of its system
// prompt, prompt, schema and nonce. A simulator keys its draws (the ground
// truth and the faults of each reply) on the job's id: with one fixed id,
// every prompt tried got the same first reply. With this one, each input
// gets its own draws, the same ones each time it is tried (for a given
// simulator seed and nonce), and trying one input under another mode,
// strategy or coercion sees the same first reply.
func TryJobID(spec TrySpec) string {
	h := sha256.New()
	parts := [][]byte{[]byte(spec.System), []byte(spec.Prompt), spec.Schema, []byte(spec.Nonce)}
	if spec.Document != "" {
		// Only then: the ids of the inputs tried without one stay as
		// they were.
		parts = append(parts, []byte(spec.Document))
	}
	for _, part := range parts {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return "try-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// TryJob checks spec as a batch's job is checked at enqueue and in the
// worker, and returns the job to run. Its errors match fixpoint.ErrBadJob
// and say what is wrong with the input.
func TryJob(spec TrySpec) (*repair.Job, error) {
	switch {
	case strings.TrimSpace(spec.Prompt) == "":
		return nil, fmt.Errorf("%w: the prompt is empty", fixpoint.ErrBadJob)
	case !utf8.ValidString(spec.Prompt) || !utf8.ValidString(spec.System):
		return nil, fmt.Errorf("%w: the prompt is not UTF-8 text", fixpoint.ErrBadJob)
	case len(spec.Prompt)+len(spec.System) > MaxPromptBytesDefault:
		return nil, fmt.Errorf("%w: the prompt is %d bytes, over the workers' limit of %d", fixpoint.ErrBadJob, len(spec.Prompt)+len(spec.System), MaxPromptBytesDefault)
	case spec.Model == "":
		return nil, fmt.Errorf("%w: no model given", fixpoint.ErrBadJob)
	}
	if err := tryDocument(spec); err != nil {
		return nil, err
	}
	schema := spec.Compiled
	if schema == nil {
		if len(bytes.TrimSpace(spec.Schema)) == 0 {
			return nil, fmt.Errorf("%w: the schema is empty", fixpoint.ErrBadJob)
		}
		var err error
		if schema, err = validate.Compile(spec.Schema); err != nil {
			return nil, fmt.Errorf("%w: schema: %w", fixpoint.ErrBadJob, err)
		}
		if err := schema.Satisfiable(); err != nil {
			return nil, fmt.Errorf("%w: schema: %w", fixpoint.ErrBadJob, err)
		}
	}
	job := &repair.Job{
		ID: TryJobID(spec), System: spec.System, Prompt: spec.Prompt, Schema: schema, SchemaRaw: spec.Schema,
		Model: spec.Model, Mode: spec.Mode, MaxTokens: spec.MaxTokens, Limits: spec.Limits, Document: spec.Document,
	}
	if err := tryChecks(job, spec); err != nil {
		return nil, err
	}
	if err := job.Limits.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if err := llm.CheckSchemaMode(spec.Provider, job.Mode, spec.Schema); err != nil {
		return nil, fmt.Errorf("%w: %w", fixpoint.ErrBadJob, err)
	}
	env := queue.Envelope{V: queue.EnvelopeVersion, JobID: job.ID, Prompt: "x", SchemaHash: "x", Provider: spec.Provider,
		Model: spec.Model, Mode: job.Mode, Limits: job.Limits, MaxTokens: job.MaxTokens}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	return job, nil
}

// Try runs job to its end through the repair step, calling client as a
// worker's realtime driver does (Loop), with hooks told of each call as it
// goes out (SentFunc) and of each attempt as it is recorded (AttemptFunc).
// The result holds every attempt made; the error is Loop.Resume's.
func Try(ctx context.Context, client Completer, job *repair.Job, hooks LoopHooks) (*fixpoint.Result, error) {
	return NewLoop(client, LoopConfig{}).Resume(ctx, job, nil, hooks)
}

// TryDocumentBytesMax bounds a tried job's document, as enqueue's
// --max-document-bytes default bounds a batch's.
const TryDocumentBytesMax = 8 << 20

// tryDocument checks spec's document: UTF-8 text within
// TryDocumentBytesMax, and there when the strategy reads one.
func tryDocument(spec TrySpec) error {
	switch d := spec.Document; {
	case d == "" && spec.Limits.Strategy.Document():
		return fmt.Errorf("%w: strategy %s runs over a document, and none was given", fixpoint.ErrBadJob, spec.Limits.Strategy)
	case len(d) > TryDocumentBytesMax:
		return fmt.Errorf("%w: the document is %d bytes, over the limit of %d", fixpoint.ErrBadJob, len(d), TryDocumentBytesMax)
	case !utf8.ValidString(d):
		return fmt.Errorf("%w: the document is not UTF-8 text", fixpoint.ErrBadJob)
	}
	return nil
}

// tryChecks gives a tried job the stages after the schema a batch's job
// has: the schema's rules and the evidence stage, against the document,
// else the prompt, when no source is given.
func tryChecks(job *repair.Job, spec TrySpec) error {
	var err error
	if job.Rules, err = rules.Compile(spec.Schema); err != nil {
		return fmt.Errorf("%w: schema: %w", fixpoint.ErrBadJob, err)
	}
	if job.Evidence, err = fixpoint.ParseEvidenceMode(string(spec.Evidence)); err != nil {
		return fmt.Errorf("%w: %w", fixpoint.ErrBadJob, err)
	}
	if job.Evidence == fixpoint.EvidenceOff {
		return nil
	}
	job.Source = evidence.New(cmp.Or(spec.Source, spec.Document, spec.Prompt))
	var doc any
	if json.Unmarshal(spec.Schema, &doc) == nil {
		job.Exempt = evidence.Exempt(doc)
	}
	return nil
}
