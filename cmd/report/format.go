package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

// The JSON of summary, failures and job (--format json) is documented
// field by field in docs/report.md: fields are added, never renamed or
// removed, and a figure with nothing to divide by is null, not 0.

// formatFlag adds --format text|json to the flag set of a command.
func formatFlag(fs *flag.FlagSet) *string {
	return fs.String("format", "text", "output format: text (a table for people) or json (one object, its fields in docs/report.md)")
}

// checkFormat says a --format the command does not write.
func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return usageError{Err: fmt.Errorf("--format %q: want text or json", format)}
	}
	return nil
}

// writeJSON writes v as indented JSON, HTML characters as they are.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ptr[T any](v T) *T { return &v }

// timeOrNil is t in UTC, nil when zero.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// rawOr is b, or def when empty.
func rawOr(b json.RawMessage, def string) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(def)
	}
	return b
}

// summaryJSON is report summary --format json.
type summaryJSON struct {
	Batches []batchJSON `json:"batches"`
}

// batchJSON is one batch of summaryJSON.
type batchJSON struct {
	Batch      string `json:"batch"`
	Jobs       int64  `json:"jobs"`
	Valid      int64  `json:"valid"`
	Invalid    int64  `json:"invalid"`
	Failed     int64  `json:"failed"`
	Rejected   int64  `json:"rejected"`
	Dead       int64  `json:"dead"`
	Queued     int64  `json:"queued"`
	Cancelled  int64  `json:"cancelled"`
	OverBudget int64  `json:"over_budget"`
	Finished   int64  `json:"finished"`
	Runs       int64  `json:"runs"`

	FirstAttemptValid int64    `json:"first_attempt_valid"`
	Repaired          int64    `json:"repaired"`
	ValidRate         *float64 `json:"valid_rate"`
	FirstAttemptRate  *float64 `json:"first_attempt_valid_rate"`
	RepairRate        *float64 `json:"repair_rate"`
	MeanAttempts      *float64 `json:"mean_attempts"`

	TokensIn          int64    `json:"tokens_in"`
	TokensOut         int64    `json:"tokens_out"`
	TokensCached      int64    `json:"tokens_cached"`
	CostUSD           float64  `json:"cost_usd"`
	TokensPerValidJob *float64 `json:"tokens_per_valid_job"`
	CostPerValidJob   *float64 `json:"cost_per_valid_job_usd"`
	P50WallMS         *float64 `json:"p50_wall_ms"`
	P95WallMS         *float64 `json:"p95_wall_ms"`

	Cost costJSON `json:"cost"`
	// CostUnpriced marks the cost figures of a batch with attempts on a
	// model with no price (listed in Unpriced): they count them $0.
	CostUnpriced bool           `json:"cost_unpriced"`
	Unpriced     []unpricedJSON `json:"unpriced"`
	// MissingModels are the batch's lanes whose provider has no such
	// model: a set-up error, their jobs held queued.
	MissingModels []missingModelJSON `json:"missing_models"`
	Cap           *capJSON           `json:"cap"`
	Notes         []string           `json:"notes"`
	Cache         cacheJSON          `json:"cache"`
	Waves         []waveJSON         `json:"waves"`
}

type unpricedJSON struct {
	Model    string `json:"model"`
	Attempts int64  `json:"attempts"`
}

// missingModelJSON is a lane whose provider answered model_not_found.
type missingModelJSON struct {
	Provider   string     `json:"provider"`
	Model      string     `json:"model"`
	Calls      int64      `json:"calls"`
	Queued     int64      `json:"queued"`
	LastCallAt *time.Time `json:"last_call_at"`
}

type capJSON struct {
	MaxCostUSD     *float64 `json:"max_cost_usd"`
	MaxTotalTokens *int64   `json:"max_total_tokens"`
	SpentUSD       float64  `json:"spent_usd"`
	SpentTokens    int64    `json:"spent_tokens"`
}

type cacheJSON struct {
	PromptTokens     int64    `json:"prompt_tokens"`
	CachedTokens     int64    `json:"cached_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	HitRate          *float64 `json:"hit_rate"`
	RealtimeAttempts int64    `json:"realtime_attempts"`
	RealtimeCostUSD  float64  `json:"realtime_cost_usd"`
	BatchAttempts    int64    `json:"batch_attempts"`
	BatchCostUSD     float64  `json:"batch_cost_usd"`
}

type waveJSON struct {
	Number      int        `json:"number"`
	Run         int        `json:"run"`
	Provider    string     `json:"provider"`
	Model       string     `json:"model"`
	Status      string     `json:"status"`
	Requests    int        `json:"requests"`
	Succeeded   int        `json:"succeeded"`
	Errored     int        `json:"errored"`
	Expired     int        `json:"expired"`
	Cancelled   int        `json:"cancelled"`
	Error       string     `json:"error"`
	SubmittedAt *time.Time `json:"submitted_at"`
	EndedAt     *time.Time `json:"ended_at"`
}

// summaryData gathers report summary of rows (batch "" for every batch).
func summaryData(ctx context.Context, st summaryLedger, batch string, rows []store.BatchSummary) (summaryJSON, error) {
	out := summaryJSON{Batches: []batchJSON{}}
	costs, err := batchCosts(ctx, st, batch, rows)
	if err != nil {
		return out, err
	}
	unpriced, err := st.UnpricedAttempts(ctx, batch)
	if err != nil {
		return out, err
	}
	missing, err := st.MissingModels(ctx, batch)
	if err != nil {
		return out, err
	}
	for i, r := range rows {
		b := batchJSON{Batch: r.Batch, Jobs: r.Jobs, Valid: r.Valid, Invalid: r.Invalid, Failed: r.Failed, Rejected: r.Rejected,
			Dead: r.Dead, Queued: r.Queued, Cancelled: r.Cancelled, OverBudget: r.OverBudget, Finished: r.Finished, Runs: r.Runs,
			FirstAttemptValid: r.FirstAttemptValid, Repaired: r.Repaired,
			TokensIn: r.TokensIn, TokensOut: r.TokensOut, TokensCached: r.TokensCached, CostUSD: r.CostUSD,
			Cost: costs[i], Unpriced: []unpricedJSON{}, MissingModels: []missingModelJSON{}, Notes: []string{}, Waves: []waveJSON{}}
		if r.Finished > 0 {
			b.ValidRate, b.FirstAttemptRate = ptr(r.ValidRate), ptr(r.FirstAttemptValidRate)
		}
		if r.Valid > 0 {
			b.RepairRate, b.TokensPerValidJob, b.CostPerValidJob = ptr(r.RepairRate), ptr(r.TokensPerValidJob), ptr(r.CostPerValidJob)
		}
		if r.Valid+r.Invalid+r.Failed > 0 {
			b.MeanAttempts = ptr(r.MeanAttempts)
		}
		if r.HasWall {
			b.P50WallMS, b.P95WallMS = ptr(r.P50WallMS), ptr(r.P95WallMS)
		}
		for _, u := range unpriced {
			if u.Batch == r.Batch {
				b.Unpriced = append(b.Unpriced, unpricedJSON{Model: u.Model, Attempts: u.Attempts})
				b.CostUnpriced = true
			}
		}
		for _, m := range missing {
			if m.Batch == r.Batch {
				b.MissingModels = append(b.MissingModels, missingModelJSON{Provider: m.Provider, Model: m.Model, Calls: m.Calls,
					Queued: m.Queued, LastCallAt: timeOrNil(m.LastCall)})
			}
		}
		sp, err := st.BatchSpend(ctx, r.Batch)
		if err != nil {
			return out, err
		}
		if sp.Capped() {
			b.Cap = &capJSON{MaxCostUSD: sp.MaxCostUSD, MaxTotalTokens: sp.MaxTotalTokens, SpentUSD: sp.CostUSD, SpentTokens: sp.Tokens}
		}
		notes, err := missingRows(ctx, st, r.Batch)
		if err != nil {
			return out, err
		}
		b.Notes = append(b.Notes, notes...)
		if r.Batch != "" {
			d, err := st.CacheDelivery(ctx, r.Batch)
			if err != nil {
				return out, err
			}
			b.Cache = cacheJSON{PromptTokens: d.PromptTokens, CachedTokens: d.CachedTokens, CacheWriteTokens: d.CacheWriteTokens,
				RealtimeAttempts: d.Realtime.Attempts, RealtimeCostUSD: d.Realtime.CostUSD, BatchAttempts: d.Batch.Attempts, BatchCostUSD: d.Batch.CostUSD}
			if d.PromptTokens > 0 {
				b.Cache.HitRate = ptr(d.CacheHitRate)
			}
			waves, err := st.Waves(ctx, r.Batch)
			if err != nil {
				return out, err
			}
			for _, v := range waves {
				b.Waves = append(b.Waves, waveJSON{Number: v.Number, Run: v.Run, Provider: v.Provider, Model: v.Model, Status: v.Status,
					Requests: v.Requests, Succeeded: v.Succeeded, Errored: v.Errored, Expired: v.Expired, Cancelled: v.Cancelled,
					Error: v.Error, SubmittedAt: timeOrNil(v.SubmittedAt), EndedAt: timeOrNil(v.EndedAt)})
			}
		}
		out.Batches = append(out.Batches, b)
	}
	return out, nil
}

// failuresJSON is report failures --format json: every row, where the
// text shows the most frequent.
type failuresJSON struct {
	Batch               string            `json:"batch"`
	FailureClasses      []classJSON       `json:"failure_classes"`
	RepairEffectiveness []repairStepJSON  `json:"repair_effectiveness"`
	ErrorPaths          []errorPathJSON   `json:"error_paths"`
	EndReasons          []endReasonJSON   `json:"end_reasons"`
	RuleFailures        []ruleFailureJSON `json:"rule_failures"`
	Grounding           []groundingJSON   `json:"grounding"`
}

type ruleFailureJSON struct {
	Rule      string `json:"rule"`
	Path      string `json:"path"`
	Severity  string `json:"severity"`
	Failures  int64  `json:"failures"`
	Jobs      int64  `json:"jobs"`
	FinalJobs int64  `json:"final_jobs"`
}

type groundingJSON struct {
	Path            string  `json:"path"`
	Leaves          int64   `json:"leaves"`
	Exact           int64   `json:"exact"`
	Normalized      int64   `json:"normalized"`
	Fuzzy           int64   `json:"fuzzy"`
	None            int64   `json:"none"`
	ExactShare      float64 `json:"exact_share"`
	NormalizedShare float64 `json:"normalized_share"`
	FuzzyShare      float64 `json:"fuzzy_share"`
	NoneShare       float64 `json:"none_share"`
}

type classJSON struct {
	Model    string  `json:"model"`
	Attempt  int     `json:"attempt"`
	Class    string  `json:"class"`
	Attempts int64   `json:"attempts"`
	Share    float64 `json:"share"`
}

type repairStepJSON struct {
	Attempt   int      `json:"attempt"`
	Class     string   `json:"class"`
	Failed    int64    `json:"failed"`
	Retried   int64    `json:"retried"`
	ValidNext int64    `json:"valid_next"`
	Rate      *float64 `json:"rate"`
}

type errorPathJSON struct {
	Path    string `json:"path"`
	Keyword string `json:"keyword"`
	Class   string `json:"class"`
	Errors  int64  `json:"errors"`
	Jobs    int64  `json:"jobs"`
}

type endReasonJSON struct {
	Status string `json:"status"`
	Jobs   int64  `json:"jobs"`
	Reason string `json:"reason"`
}

// failuresData gathers report failures of batch.
func failuresData(ctx context.Context, st cli.ReportLedger, batch string) (failuresJSON, error) {
	out := failuresJSON{Batch: batch, FailureClasses: []classJSON{}, RepairEffectiveness: []repairStepJSON{},
		ErrorPaths: []errorPathJSON{}, EndReasons: []endReasonJSON{}, RuleFailures: []ruleFailureJSON{}, Grounding: []groundingJSON{}}
	classes, err := st.FailureClasses(ctx, batch)
	if err != nil {
		return out, err
	}
	for _, c := range classes {
		out.FailureClasses = append(out.FailureClasses, classJSON{Model: c.Model, Attempt: c.AttemptNo, Class: c.Class, Attempts: c.Attempts, Share: c.Share})
	}
	steps, err := st.RepairEffectiveness(ctx, batch)
	if err != nil {
		return out, err
	}
	for _, s := range steps {
		out.RepairEffectiveness = append(out.RepairEffectiveness, repairStepJSON{Attempt: s.AttemptNo, Class: s.Class, Failed: s.Failed,
			Retried: s.Retried, ValidNext: s.ValidNext, Rate: s.Rate})
	}
	paths, err := st.TopErrorPaths(ctx, batch, 0)
	if err != nil {
		return out, err
	}
	for _, p := range paths {
		out.ErrorPaths = append(out.ErrorPaths, errorPathJSON{Path: p.Path, Keyword: p.Keyword, Class: p.Class, Errors: p.Errors, Jobs: p.Jobs})
	}
	reasons, err := st.EndReasons(ctx, batch, math.MaxInt32)
	if err != nil {
		return out, err
	}
	for _, r := range reasons {
		out.EndReasons = append(out.EndReasons, endReasonJSON{Status: r.Status, Jobs: r.Jobs, Reason: r.Error})
	}
	return out, truthData(ctx, st, batch, &out)
}

// truthData adds the rule failures and the grounding by field of batch to
// out.
func truthData(ctx context.Context, st cli.ReportLedger, batch string, out *failuresJSON) error {
	rf, err := st.RuleFailures(ctx, batch, 0)
	if err != nil {
		return err
	}
	for _, f := range rf {
		out.RuleFailures = append(out.RuleFailures, ruleFailureJSON{Rule: f.Rule, Path: f.Path, Severity: f.Severity,
			Failures: f.Failures, Jobs: f.Jobs, FinalJobs: f.FinalJobs})
	}
	fields, err := st.Grounding(ctx, batch, 0)
	if err != nil {
		return err
	}
	for _, g := range fields {
		out.Grounding = append(out.Grounding, groundingJSON{Path: g.Path, Leaves: g.Leaves, Exact: g.Exact, Normalized: g.Normalized,
			Fuzzy: g.Fuzzy, None: g.None, ExactShare: g.Share(g.Exact), NormalizedShare: g.Share(g.Normalized),
			FuzzyShare: g.Share(g.Fuzzy), NoneShare: g.Share(g.None)})
	}
	return nil
}

// jobJSON is report job --format json.
type jobJSON struct {
	ID                string          `json:"id"`
	Batch             string          `json:"batch"`
	Row               int             `json:"row"`
	Run               int             `json:"run"`
	Status            string          `json:"status"`
	Provider          string          `json:"provider"`
	Model             string          `json:"model"`
	Mode              string          `json:"mode"`
	Strategy          string          `json:"strategy"`
	Input             json.RawMessage `json:"input"`
	Value             json.RawMessage `json:"value"`
	Error             string          `json:"error"`
	FinalClass        string          `json:"final_class"`
	Attempts          int             `json:"attempts"`
	Calls             int             `json:"calls"`
	FirstAttemptValid bool            `json:"first_attempt_valid"`
	RepairedLocally   bool            `json:"repaired_locally"`
	TokensIn          int64           `json:"tokens_in"`
	TokensOut         int64           `json:"tokens_out"`
	TokensCached      int64           `json:"tokens_cached"`
	CostUSD           float64         `json:"cost_usd"`
	WallMS            *int64          `json:"wall_ms"`
	Deliveries        int             `json:"deliveries"`
	StartedAt         *time.Time      `json:"started_at"`
	FinishedAt        *time.Time      `json:"finished_at"`
	AttemptList       []attemptJSON   `json:"attempt_list"`
	Interrupted       []interruptJSON `json:"interrupted"`
	// Purged is set when report purge deleted the job's attempts: an
	// empty attempt_list is then no sign that none were made.
	Purged *purgeJSON `json:"purged,omitempty"`
}

type purgeJSON struct {
	At          time.Time `json:"at"`
	Attempts    int       `json:"attempts"`
	Interrupted int       `json:"interrupted"`
}

type attemptJSON struct {
	No              int             `json:"no"`
	Valid           bool            `json:"valid"`
	Class           string          `json:"class"`
	Model           string          `json:"model"`
	FinishReason    string          `json:"finish_reason"`
	Raw             string          `json:"raw"`
	Source          string          `json:"source"`
	Repairs         json.RawMessage `json:"repairs"`
	Errors          json.RawMessage `json:"errors"`
	Feedback        string          `json:"feedback"`
	RepairedLocally bool            `json:"repaired_locally"`
	TokensIn        int64           `json:"tokens_in"`
	TokensOut       int64           `json:"tokens_out"`
	TokensCached    int64           `json:"tokens_cached"`
	CostUSD         float64         `json:"cost_usd"`
	Unpriced        bool            `json:"unpriced"`
	PriceBasis      string          `json:"price_basis"`
	// ServiceTier is the tier the provider served a call asked for flex
	// on ("flex", "default"), left out for the others.
	ServiceTier      string     `json:"service_tier,omitempty"`
	LatencyMS        int64      `json:"latency_ms"`
	TransportRetries int        `json:"transport_retries"`
	ProviderStatus   int        `json:"provider_status"`
	ProviderError    string     `json:"provider_error"`
	StartedAt        *time.Time `json:"started_at"`
	// A document job's step ("" for the other strategies): its kind, the
	// chunk it read, the fields its value held, its tool calls and a
	// merge's conflicts.
	Step      string             `json:"step"`
	Chunk     *fixpoint.ChunkRef `json:"chunk"`
	Fields    *int               `json:"fields"`
	ToolCalls json.RawMessage    `json:"tool_calls"`
	Conflicts json.RawMessage    `json:"conflicts"`
}

type interruptJSON struct {
	Run       int     `json:"run"`
	Delivery  int     `json:"delivery"`
	Hold      int     `json:"hold"`
	Reason    string  `json:"reason"`
	Calls     int     `json:"calls"`
	Paid      int     `json:"paid"`
	CostUSD   float64 `json:"cost_usd"`
	LastError string  `json:"last_error"`
}

// jobData is report job of job and its attempts and interrupted calls.
func jobData(job *store.JobRecord, attempts []store.Attempt, kept []store.InterruptedCalls) jobJSON {
	out := jobJSON{ID: job.ID, Batch: job.Batch, Row: job.RowNo, Run: job.Run, Status: string(job.Status), Provider: job.Provider,
		Model: job.Model, Mode: job.Mode, Strategy: job.Strategy, Input: rawOr(job.Metadata, "{}"), Value: rawOr(job.Value, "null"),
		Error: job.Error, FinalClass: job.FinalClass, Attempts: job.Attempts, Calls: job.Calls, FirstAttemptValid: job.FirstAttemptValid,
		RepairedLocally: job.RepairedLocally, TokensIn: job.TokensIn, TokensOut: job.TokensOut, TokensCached: job.TokensCached,
		CostUSD: job.CostUSD, Deliveries: job.Deliveries, StartedAt: timeOrNil(job.StartedAt), FinishedAt: timeOrNil(job.FinishedAt),
		AttemptList: []attemptJSON{}, Interrupted: []interruptJSON{}}
	if !job.FinishedAt.IsZero() {
		out.WallMS = ptr(job.WallMS)
	}
	for _, a := range attempts {
		out.AttemptList = append(out.AttemptList, attemptJSON{No: a.No, Valid: a.Valid, Class: a.Class, Model: a.Model, FinishReason: a.FinishReason,
			Raw: a.Raw, Source: a.Source, Repairs: rawOr(a.Repairs, "[]"), Errors: rawOr(a.Errors, "[]"), Feedback: a.Feedback,
			RepairedLocally: a.RepairedLocally, TokensIn: a.TokensIn, TokensOut: a.TokensOut, TokensCached: a.TokensCached,
			CostUSD: a.CostUSD, Unpriced: a.Unpriced, PriceBasis: cmp.Or(a.PriceBasis, "realtime"), ServiceTier: a.ServiceTier, LatencyMS: a.LatencyMS, TransportRetries: a.TransportRetries,
			ProviderStatus: a.ProviderStatus, ProviderError: a.ProviderError, StartedAt: timeOrNil(a.StartedAt),
			Step: a.Step, Chunk: a.Chunk, Fields: a.Fields, ToolCalls: rawOr(a.ToolCalls, "[]"), Conflicts: rawOr(a.Conflicts, "[]")})
	}
	if p := job.Purged; p != nil {
		out.Purged = &purgeJSON{At: p.At.UTC(), Attempts: p.Attempts, Interrupted: p.Interrupted}
	}
	for _, c := range kept {
		out.Interrupted = append(out.Interrupted, interruptJSON{Run: c.Run, Delivery: c.Delivery, Hold: c.Hold, Reason: c.Reason,
			Calls: c.Calls, Paid: c.Paid, CostUSD: c.CostUSD, LastError: c.LastError})
	}
	return out
}
