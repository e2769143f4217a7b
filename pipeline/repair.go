package pipeline

import (
	"maps"
	"slices"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// The repair step's vocabulary, which the pipeline's drivers, queue and
// ledger code hand around; package repair defines it.
type (
	// Job is one unit of work for the repair step.
	Job = repair.Job
	// Limits bound one job's repair attempts.
	Limits = repair.Limits
	// Strategy is how errors are fed back to the model.
	Strategy = repair.Strategy
	// FeedbackFormat is how errors are written for the model.
	FeedbackFormat = repair.FeedbackFormat
	// Attempt is one provider call of a job, and what came of it.
	Attempt = repair.Attempt
	// Result is a job's outcome.
	Result = repair.Result
	// Status is a job's status (package jobstatus).
	Status = repair.Status
	// Price is what a model costs per million tokens.
	Price = repair.Price
	// Prices maps a model to its price.
	Prices = repair.Prices
	// RequestRecord says how much of each request an attempt keeps.
	RequestRecord = repair.RequestRecord
)

// Strategies, feedback formats, defaults, statuses and outcome classes.
const (
	StrategyConversation = repair.StrategyConversation
	StrategyRepair       = repair.StrategyRepair
	StrategyPatch        = repair.StrategyPatch
	FeedbackText         = repair.FeedbackText
	FeedbackXML          = repair.FeedbackXML
	FeedbackVague        = repair.FeedbackVague
	MaxAttemptsDefault   = repair.MaxAttemptsDefault
	MaxAttemptsMax       = repair.MaxAttemptsMax
	MaxTokensDefault     = repair.MaxTokensDefault
	StrategyDefault      = repair.StrategyDefault
	FeedbackDefault      = repair.FeedbackDefault
	StatusQueued         = repair.StatusQueued
	StatusValid          = repair.StatusValid
	StatusInvalid        = repair.StatusInvalid
	StatusFailed         = repair.StatusFailed
	StatusRejected       = repair.StatusRejected
	StatusDead           = repair.StatusDead
	StatusCancelled      = repair.StatusCancelled
	StatusOverBudget     = repair.StatusOverBudget
	OutcomeTruncated     = repair.OutcomeTruncated
	OutcomeRefusal       = repair.OutcomeRefusal
	OutcomeProvider      = repair.OutcomeProvider
	OutcomeBudget        = repair.OutcomeBudget
	RecordFull           = repair.RecordFull
	RecordHash           = repair.RecordHash
	SchemaMarkerOpen     = repair.SchemaMarkerOpen
	SchemaMarkerClose    = repair.SchemaMarkerClose
	PreviousReplyOpen    = repair.PreviousReplyOpen
	PreviousReplyClose   = repair.PreviousReplyClose
)

// Errors the step and the drivers return; see package repair.
var (
	ErrBadJob         = repair.ErrBadJob
	ErrTransient      = repair.ErrTransient
	ErrQuotaExhausted = repair.ErrQuotaExhausted
	ErrProviderAuth   = repair.ErrProviderAuth
	ErrOverBudget     = repair.ErrOverBudget
	ErrCancelled      = repair.ErrCancelled
)

// DefaultPrices returns the built-in price table.
func DefaultPrices() Prices { return repair.DefaultPrices() }

// ParsePrices reads a JSON object of model -> Price and lays it over base.
func ParsePrices(base Prices, data []byte) (Prices, error) { return repair.ParsePrices(base, data) }

func systemPrompt(job *Job) string { return repair.SystemPrompt(job) }

func estimateTokens(req *llm.Request) int { return repair.EstimateTokens(req) }

// ChargedPrices is the price table as the ledger's model_prices rows: each
// model's rates as charged, defaults applied (Price.Rates), in model order.
func ChargedPrices(p Prices) []store.Price {
	out := make([]store.Price, 0, len(p))
	for _, model := range slices.Sorted(maps.Keys(p)) {
		rt, bt := p[model].Rates(repair.PriceBasisRealtime), p[model].Rates(repair.PriceBasisBatch)
		out = append(out, store.Price{Model: model, InputPerMTok: rt.Input, OutputPerMTok: rt.Output,
			CachedInputPerMTok: rt.CachedInput, CacheWritePerMTok: rt.CacheWrite,
			BatchInputPerMTok: bt.Input, BatchOutputPerMTok: bt.Output, BatchCachedInputPerMTok: bt.CachedInput,
			BatchCacheWritePerMTok: bt.CacheWrite})
	}
	return out
}
