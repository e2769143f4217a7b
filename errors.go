package fixpoint

import "errors"

// ErrBadJob is matched by errors for jobs that can never succeed as sent:
// an unparseable envelope, an unknown or uncompilable schema, limits out of
// range, a prompt over the size limit. Such a job is recorded as rejected and
// terminated, never retried.
var ErrBadJob = errors.New("bad job")

// ErrTransient is matched by errors after which the job should be tried again
// later: a provider unavailable after its retries, a paused lane, Postgres
// down. The message is negatively acknowledged with a delay.
var ErrTransient = errors.New("transient failure")

// ErrQuotaExhausted is matched (together with ErrTransient) when a provider
// reports its quota or spend limit exhausted: permanent for that lane until
// someone raises the limit, so the worker pauses pulling and delays the job
// instead of burning its deliveries.
var ErrQuotaExhausted = errors.New("provider quota exhausted")

// ErrProviderAuth is matched (together with ErrTransient) when a provider
// refuses the credentials (HTTP 401): wrong for every job of that provider,
// not for this one, so the job is kept for a worker with a good key.
var ErrProviderAuth = errors.New("provider refused the API key")

// ErrModelNotFound is matched (together with ErrTransient) when a provider
// says it has no such model (fixpoint.ClassModelNotFound): wrong for every
// job of that model, not for this one, so the job is kept queued for when
// the model is there (pulled, or the name fixed).
var ErrModelNotFound = errors.New("provider has no such model")

// ErrOverBudget is matched when a job's batch reached its spend cap before
// the job was done: the job ends over_budget, not failed. Raising the cap
// and requeueing runs it again.
var ErrOverBudget = errors.New("batch spend cap reached")

// ErrCancelled is matched when a job's batch was cancelled (enqueue
// cancel) while the job ran: the job ends cancelled before its next call.
var ErrCancelled = errors.New("batch cancelled")
