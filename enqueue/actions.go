package enqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// ActionLedger is what the batch actions need from the ledger. *store.Store
// satisfies it.
type ActionLedger interface {
	Ledger
	Requeue(ctx context.Context, p store.RequeueParams) (store.RequeueResult, error)
	Cancel(ctx context.Context, batch string) (int, error)
	CancelJobs(ctx context.Context, batch string, jobs []string) (int, error)
	SetCap(ctx context.Context, batch string, c store.Cap) error
	// LockBatch holds the batch for one action at a time (see
	// store.Store.LockBatch); release frees it.
	LockBatch(ctx context.Context, batch, action string) (release func(), err error)
}

var _ ActionLedger = (*store.Store)(nil)

// RequeueStatusesDefault are the statuses requeue runs again unless told
// otherwise: every job that did not end valid, but cancelled ones (cancel
// was asked for) and over_budget ones (raise the cap first).
var RequeueStatusesDefault = []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusFailed, fixpoint.StatusRejected, fixpoint.StatusDead}

// RequeueConfig chooses the jobs of a batch to run again and how.
type RequeueConfig struct {
	// Batch names the batch; required.
	Batch string
	// Statuses default to RequeueStatusesDefault.
	Statuses []fixpoint.Status
	// Class, when set, keeps only jobs whose final class is Class
	// (syntax, shape, semantic, truncated, refusal, provider, budget...).
	Class string
	// Jobs, when set, keeps only these jobs of the batch (at most
	// store.RequeueJobsMax): one job, or a selection. Statuses then
	// default to every final status.
	Jobs []string
	// Provider, Model, Strategy and MaxAttempts, when set, change the
	// settings the jobs run with; the rest are the batch's latest run's.
	Provider, Model string
	Strategy        fixpoint.Strategy
	MaxAttempts     int
	// MergeModel, when set, is the merge model of the new run
	// (fixpoint.Limits.MergeModel): its strategy must be parallel. A
	// requeue to another strategy drops the batch's merge model.
	MergeModel string
	// DryRun counts the jobs and changes nothing.
	DryRun bool
	// Queue is where the jobs are published.
	Queue queue.Config
}

// RequeueReport says what Requeue did (or, with DryRun, would do).
type RequeueReport struct {
	// Run is the new run's number; 0 when no job matched.
	Run int
	// Jobs counts the jobs requeued, by the status they had.
	Jobs map[string]int
	// Settings are the new run's settings.
	Settings BatchSettings
	// Published counts the messages published (the requeued jobs, and any
	// an interrupted earlier requeue left unpublished).
	Published int
	// Warnings are things the operator should know, one sentence each.
	Warnings []string
}

// Requeue runs chosen jobs of a batch again as a new run: their outcome so
// far stays in the ledger (job_runs, and the attempts keep their run), the
// job row shows the new run's outcome when it ends. Repeating it requeues
// nothing new until the jobs have ended again, and publishes what an
// interrupted earlier requeue left unpublished. It holds the batch while it
// runs: another requeue or cancel of it at the same time fails with
// store.ErrActionInProgress, saying which holds it (one found no job, then
// published the other's jobs as if left unpublished).
func Requeue(ctx context.Context, js jetstream.JetStream, ledger ActionLedger, cfg RequeueConfig) (RequeueReport, error) {
	var rep RequeueReport
	if cfg.Batch == "" {
		return rep, fmt.Errorf("%w: requeue: missing batch", ErrBadConfig)
	}
	switch {
	case len(cfg.Statuses) > 0:
	case len(cfg.Jobs) > 0:
		cfg.Statuses = finalStatuses()
	default:
		cfg.Statuses = RequeueStatusesDefault
	}
	if err := cfg.check(); err != nil {
		return rep, err
	}
	b, err := ledger.Batch(ctx, cfg.Batch)
	if errors.Is(err, store.ErrNotFound) {
		return rep, fmt.Errorf("%w: %s", ErrNoBatch, cfg.Batch)
	}
	if err != nil {
		return rep, err
	}
	if !cfg.DryRun {
		release, err := ledger.LockBatch(ctx, cfg.Batch, "requeue")
		if err != nil {
			return rep, err
		}
		defer release()
	}
	settings, warnings, err := requeueSettings(ctx, ledger, b, cfg)
	if err != nil {
		return rep, err
	}
	rep.Warnings = append(rep.Warnings, warnings...)
	rep.Settings = settings
	raw, _ := json.Marshal(settings)
	req := map[string]any{"statuses": cfg.Statuses, "class": cfg.Class, "provider": cfg.Provider,
		"model": cfg.Model, "strategy": cfg.Strategy, "max_attempts": cfg.MaxAttempts}
	if cfg.MergeModel != "" {
		req["merge_model"] = cfg.MergeModel
	}
	if len(cfg.Jobs) > 0 {
		req["jobs"] = cfg.Jobs
	}
	request, _ := json.Marshal(req)
	res, err := ledger.Requeue(ctx, store.RequeueParams{Batch: cfg.Batch, Statuses: cfg.Statuses, Class: cfg.Class, Jobs: cfg.Jobs,
		Settings: raw, Request: request, Provider: cfg.Provider, Model: cfg.Model, Strategy: string(cfg.Strategy),
		DryRun: cfg.DryRun})
	if err != nil {
		return rep, err
	}
	rep.Run, rep.Jobs = res.Run, res.Jobs
	if cfg.DryRun {
		return rep, nil
	}
	first, err := ParseBatchSettings(b)
	if err != nil {
		return rep, err
	}
	cfg.Queue = first.queue(cfg.Queue) // the stream its jobs went to first
	if _, _, err := queue.EnsureStream(ctx, js, cfg.Queue); err != nil {
		return rep, queueErr(err)
	}
	var prog Progress
	ecfg := Config{Batch: cfg.Batch, Queue: cfg.Queue, Chunk: ChunkDefault}
	if err := publishUnpublished(ctx, js, ledger, ecfg, newRunBases(ctx, ledger, cfg.Batch, first.envelope(cfg.Batch)), &prog); err != nil {
		return rep, fmt.Errorf("publish the requeued jobs (run the same requeue again to finish): %w", err)
	}
	rep.Published = prog.Published + prog.Duplicates
	return rep, nil
}

// check refuses a requeue whose statuses, class, strategy or attempts no
// worker could run.
func (cfg RequeueConfig) check() error {
	for _, st := range cfg.Statuses {
		if !st.Final() {
			return fmt.Errorf("%w: requeue: %q is not a final status (valid, invalid, failed, rejected, dead, cancelled, over_budget)", ErrBadConfig, st)
		}
	}
	if len(cfg.Jobs) > store.RequeueJobsMax {
		return fmt.Errorf("%w: requeue: %d jobs chosen, at most %d at once", ErrBadConfig, len(cfg.Jobs), store.RequeueJobsMax)
	}
	if slices.Contains(cfg.Jobs, "") {
		return fmt.Errorf("%w: requeue: an empty job id", ErrBadConfig)
	}
	if cfg.Class != "" && !slices.Contains(fixpoint.FinalClasses, cfg.Class) {
		return fmt.Errorf("%w: requeue: class %q is not one of %s", ErrBadConfig, cfg.Class, strings.Join(fixpoint.FinalClasses, ", "))
	}
	if cfg.Strategy != "" || cfg.MaxAttempts != 0 {
		// A typo is a usage error whatever the ledger holds.
		lim := fixpoint.Limits{Strategy: cmp.Or(cfg.Strategy, fixpoint.StrategyConversation), MaxAttempts: cmp.Or(cfg.MaxAttempts, 1)}.WithDefaults()
		if err := lim.Validate(); err != nil {
			return fmt.Errorf("%w: requeue: %w", ErrBadConfig, err)
		}
	}
	return nil
}

// requeueSettings are the settings of the new run: the batch's latest
// run's, with what the requeue changes.
func requeueSettings(ctx context.Context, ledger ActionLedger, b *store.Batch, cfg RequeueConfig) (settings BatchSettings, warnings []string, err error) {
	settings, err = latestSettings(ctx, ledger, b)
	if err != nil {
		return settings, nil, err
	}
	if cfg.Provider != "" {
		if !slices.Contains(knownProviders, cfg.Provider) {
			return settings, nil, fmt.Errorf("%w: requeue: provider %q is not one of %s", ErrBadConfig, cfg.Provider, strings.Join(knownProviders, ", "))
		}
		settings.Provider = cfg.Provider
	}
	if cfg.Model != "" {
		settings.Model = cfg.Model
	}
	if cfg.Strategy != "" {
		settings.Limits.Strategy = cfg.Strategy
	}
	switch {
	case cfg.MergeModel != "":
		settings.Limits.MergeModel = cfg.MergeModel
	case settings.Limits.MergeModel != "" && settings.Limits.Strategy != fixpoint.StrategyParallel:
		warnings = append(warnings, fmt.Sprintf("the batch's merge model %s is for strategy parallel: the requeued jobs run %s without it", settings.Limits.MergeModel, settings.Limits.Strategy))
		settings.Limits.MergeModel = ""
	}
	if cfg.MaxAttempts != 0 {
		settings.Limits.MaxAttempts = cfg.MaxAttempts
	}
	if err := settings.Limits.Validate(); err != nil {
		return settings, nil, fmt.Errorf("%w: requeue: %w", ErrBadConfig, err)
	}
	if err := settings.Limits.ValidateMode(settings.Mode); err != nil {
		// Every requeued job would be rejected by the workers (exit 0 here).
		return settings, nil, fmt.Errorf("%w: requeue: %w", ErrBadConfig, err)
	}
	if settings.Limits.Strategy.Document() && settings.DocumentField == "" && settings.DocumentFileField == "" {
		return settings, nil, fmt.Errorf("%w: requeue: strategy %s runs over each job's document, and batch %s's jobs have none (it was enqueued without --document-field or --document-file-field)",
			ErrBadConfig, settings.Limits.Strategy, b.Name)
	}
	if err := CheckDocumentStrategy(settings.Limits, true); err != nil {
		return settings, nil, fmt.Errorf("requeue: %w", err)
	}
	if settings.Delivery == queue.DeliveryBatch && settings.Limits.MergeModel != "" {
		return settings, nil, fmt.Errorf("%w: requeue: batch %s is delivered in batch waves: %s", ErrBadConfig, b.Name, queue.MergeModelBatchReason)
	}
	if settings.Delivery == queue.DeliveryBatch {
		// A new run has its own deadline, as long as the batch's.
		settings.DeadlineAt = time.Now().Add(time.Duration(settings.DeadlineSeconds) * time.Second).Unix()
		if !llm.HasBatchAPI(settings.Provider) {
			settings.Delivery, settings.DeadlineSeconds, settings.DeadlineAt = "", 0, 0 // no batch API: realtime
			warnings = append(warnings, fmt.Sprintf("%s has no batch API: the requeued jobs run realtime, at the realtime price", settings.Provider))
		}
	}
	return settings, warnings, nil
}

// latestSettings are the settings of the batch's latest run.
func latestSettings(ctx context.Context, ledger ActionLedger, b *store.Batch) (BatchSettings, error) {
	s, err := ParseBatchSettings(b)
	if err != nil {
		return s, err
	}
	if !s.recorded() {
		return s, fmt.Errorf("batch %s has no recorded settings (a worker made it, for job messages enqueue did not record)", b.Name)
	}
	runs, err := ledger.RunSettings(ctx, b.Name)
	if err != nil {
		return s, err
	}
	latest := 0
	for n := range runs {
		latest = max(latest, n)
	}
	if latest > 0 {
		var r BatchSettings
		if err := json.Unmarshal(runs[latest], &r); err != nil {
			return s, fmt.Errorf("batch %s run %d settings: %w", b.Name, latest, err)
		}
		s = r
	}
	if s.Mode == "" {
		s.Mode = fixpoint.ModePrompt
	}
	s.Limits = s.Limits.WithDefaults()
	return s, nil
}

// Cancel ends every job of the batch not yet final as cancelled: a worker
// that pulls one acks it without a call, and the result of a job in flight
// loses to the cancellation (its calls are kept). It returns how many jobs
// it ended; repeating it ends none. A requeue of the batch in progress makes
// it fail with store.ErrActionInProgress: run it again once that has ended.
func Cancel(ctx context.Context, ledger ActionLedger, batch string) (int, error) {
	release, err := ledger.LockBatch(ctx, batch, "cancel")
	if err != nil {
		return 0, err
	}
	defer release()
	n, err := ledger.Cancel(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%w: %s", ErrNoBatch, batch)
	}
	return n, err
}

// CancelJobs ends the chosen jobs of the batch (at most
// store.RequeueJobsMax) that are not final yet as cancelled, as Cancel does
// for all of them, the batch and its other jobs going on. It returns how
// many it ended: jobs final already, or not of the batch, are left as they
// are. It holds the batch as Cancel does.
func CancelJobs(ctx context.Context, ledger ActionLedger, batch string, jobs []string) (int, error) {
	if len(jobs) == 0 || len(jobs) > store.RequeueJobsMax || slices.Contains(jobs, "") {
		return 0, fmt.Errorf("%w: cancel: give 1 to %d job ids, none empty (%d given)", ErrBadConfig, store.RequeueJobsMax, len(jobs))
	}
	release, err := ledger.LockBatch(ctx, batch, "cancel")
	if err != nil {
		return 0, err
	}
	defer release()
	n, err := ledger.CancelJobs(ctx, batch, jobs)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%w: %s", ErrNoBatch, batch)
	}
	return n, err
}

// finalStatuses are the statuses a job can end with.
func finalStatuses() []fixpoint.Status {
	var out []fixpoint.Status
	for _, st := range fixpoint.Statuses() {
		if st.Final() {
			out = append(out, st)
		}
	}
	return out
}

// SetCap sets or changes the batch's spend cap (a Cap capping nothing
// removes it). Workers see it within seconds; jobs left when it is reached
// end over_budget, and raising it and requeueing them runs them again.
func SetCap(ctx context.Context, ledger ActionLedger, batch string, c store.Cap) (store.Spend, error) {
	if (c.MaxCostUSD != nil && *c.MaxCostUSD < 0) || (c.MaxTotalTokens != nil && *c.MaxTotalTokens < 0) {
		return store.Spend{}, fmt.Errorf("%w: a spend cap must not be negative", ErrBadConfig)
	}
	if c.Capped() {
		b, err := ledger.Batch(ctx, batch)
		if errors.Is(err, store.ErrNotFound) {
			return store.Spend{}, fmt.Errorf("%w: %s", ErrNoBatch, batch)
		}
		if err != nil {
			return store.Spend{}, err
		}
		if s, err := latestSettings(ctx, ledger, b); err == nil && s.Delivery == queue.DeliveryBatch {
			return store.Spend{}, fmt.Errorf("%w: batch %s is delivered in provider batches, and a spend cap holds realtime calls only", ErrBadConfig, batch)
		}
	}
	err := ledger.SetCap(ctx, batch, c)
	if errors.Is(err, store.ErrNotFound) {
		return store.Spend{}, fmt.Errorf("%w: %s", ErrNoBatch, batch)
	}
	if err != nil {
		return store.Spend{}, err
	}
	return ledger.BatchSpend(ctx, batch)
}
