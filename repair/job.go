package repair

import (
	"encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Job is one unit of work for the repair step.
type Job struct {
	ID string
	// Run is the batch run the job is in (queue.Envelope.Run; 0 means 1).
	// Its requests carry it in their end-user id (fixpoint.RequestUser).
	Run int
	// System is an optional system prompt from the user; the loop adds the
	// schema instructions after it.
	System string
	// Prompt is the task. Messages, when set, is used instead.
	Prompt   string
	Messages []fixpoint.Message
	// Document, when not "", is the job's document (the driver loads it):
	// the first user message holds it, byte for byte, between
	// fixpoint.DocumentOpen and DocumentClose, before the prompt (or the
	// first message of Messages), so a prompt template need not.
	Document string
	// Schema is the compiled schema; SchemaRaw its text.
	Schema    *validate.Schema
	SchemaRaw json.RawMessage
	Model     string
	Mode      fixpoint.Mode
	// Temperature is optional.
	Temperature *float64
	// CacheKey, when set, asks the provider to cache the prompt prefix the
	// job's requests share (the system prompt): each request gets it as
	// fixpoint.Request.CacheKey, with CacheSystem set. Give every job of a batch
	// with the same schema the same key.
	CacheKey string
	// ServiceTier, when fixpoint.ServiceTierFlex, asks every call of the
	// job for the provider's flex tier (a job delivered flex); each
	// attempt is then priced by the tier the provider says it served
	// (fixpoint.BasisOf). "" asks for none.
	ServiceTier string
	// MaxTokens caps output tokens per call. Defaults to 1024.
	MaxTokens int
	Limits    fixpoint.Limits
	// Rules are the schema's rules (package rules, compiled from
	// SchemaRaw), run on a value the schema takes: one of severity error
	// that fails makes the value not valid (class semantic, fed back),
	// one of severity warn is kept on the attempt. nil runs none.
	Rules *rules.Set
	// Evidence is what the evidence stage does with a value the schema
	// takes ("" is off): each string and number is graded against Source
	// (the attempt keeps the grades), and under EvidenceRequire one the
	// source does not ground is an error of class evidence, fed back.
	Evidence fixpoint.EvidenceMode
	// Source is the job's source text, indexed once (evidence.New); nil
	// turns the evidence stage off.
	Source *evidence.Source
	// Exempt says which locations of a value are not graded
	// (evidence.Exempt of the schema: enums, consts and what the schema
	// marks "x-fixpoint-evidence": false); nil grades every leaf.
	Exempt func(ptr string) bool
}

// Checks are the job's stages after the schema.
func (j *Job) Checks() Checks {
	return Checks{Rules: j.Rules, Mode: j.Evidence, Source: j.Source, Exempt: j.Exempt}
}
