package enqueue

import (
	"cmp"
	"context"
	"errors"
	"io"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// DryRunLedger is what a dry run reads of the ledger: what earlier batches
// of a schema and model did, and the batch and its jobs when it exists.
// *store.Store satisfies it.
type DryRunLedger interface {
	Measure(ctx context.Context, schemaHash, model string) (store.Measured, error)
	Batch(ctx context.Context, name string) (*store.Batch, error)
	HeldJobs(ctx context.Context, jobs []store.NewJob) ([]store.HeldJob, error)
}

var _ DryRunLedger = (*store.Store)(nil)

// DryRunReport is what a dry run of an enqueue found and estimates.
type DryRunReport struct {
	// Rows counts the rows read; Limited says the dry run stopped at its
	// limit before the end of the dataset.
	Rows    int
	Limited bool
	// Bad and Repeated are the bad and repeated rows among them; Jobs the
	// rows that would become jobs; Existing those the batch holds already.
	Bad      []BadRow
	Repeated int
	Jobs     int
	Existing int
	// Warnings are what the real run would warn of (rows that look like
	// rows folded into one field by a stray quote).
	Warnings []string
	// System is the system prompt every attempt starts with; Prompt the
	// first job's own prompt, from line PromptLine.
	System, Prompt string
	PromptLine     int
	// InputTokens is the mean estimated input of a first attempt (system
	// prompt, task and, outside prompt mode, the schema sent as a tool or
	// format), OutputTokens the estimated output of an attempt.
	InputTokens, OutputTokens float64
	// Attempts is the expected attempts per job; Measured says what it
	// and OutputTokens come from (Jobs == 0: no earlier batch).
	Attempts float64
	Measured store.Measured
	// Tokens and CostUSD estimate the jobs' total; PriceKnown is false when
	// the price table does not list the model (cost 0).
	Tokens     float64
	CostUSD    float64
	PriceKnown bool
	// PriceBasis is the price the cost is at: batch for batch delivery,
	// flex for flex delivery (batch rates, every call taken as served on
	// the tier) (cache reads, which lower it further, are not estimated).
	PriceBasis fixpoint.PriceBasis
	// Documents counts the distinct documents of the jobs (a document
	// shared by many rows once), DocumentBytes their text and
	// DocumentTokens its estimate, a quarter of the bytes. Each job's
	// InputTokens count its document: every call sends it whole.
	Documents      int
	DocumentBytes  int64
	DocumentTokens float64
	// Chunked is set under a document strategy: then Attempts is the mean
	// chunk calls a job makes, one per chunk of its document (sized from
	// its bytes, as DocumentTokens), InputTokens the mean input of one of
	// them, and the estimate is a lower bound: the repairs of a merged
	// value, a sequential call's value so far and an agent's further turns
	// are not counted.
	Chunked bool
	// MergeCalls counts the merge calls of a parallel batch with a merge
	// model (Limits.MergeModel): one a job of two or more chunks.
	// MergeTokens and MergeCostUSD estimate them (each sends the task and
	// a chunk value a chunk, and writes a value), at the merge model's
	// price; Tokens and CostUSD include them, and PriceKnown is false
	// when either model has no price.
	MergeCalls   int
	MergeTokens  float64
	MergeCostUSD float64
}

// DryRun renders and checks the first limit rows of the dataset (0: every
// row) with the first pass of Enqueue, and estimates what the batch would
// cost; it records and publishes nothing and needs no queue. When the
// batch exists it refuses other settings as Enqueue does, names the rows
// whose id the batch holds with other content, and counts those it holds
// as given apart from the new jobs. The estimate takes the attempts per
// job and the output per attempt from the finished jobs of earlier batches
// with the same schema and model when there are any, else one attempt per
// job and an output the size of a value the schema describes. ledger may
// be nil: no batch, no history.
func DryRun(ctx context.Context, ledger DryRunLedger, cfg Config, data io.Reader, limit int, prices repair.Prices) (DryRunReport, error) {
	var rep DryRunReport
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, fixpoint.MaxTokensDefault)
	tmpl, hash, err := cfg.prepare()
	if err != nil {
		return rep, err
	}
	// A delivery the run would refuse (a provider with no batch API, a
	// cap with batch delivery) the dry run refuses too; it asks no server.
	cfg.ProbeBatch = nil
	if err := checkDelivery(ctx, &cfg, &Progress{}); err != nil {
		return rep, err
	}
	canonical, _ := store.Canonical(cfg.Schema)
	sch, _ := validate.Compile(canonical)
	settings := cfg.settings(hash)
	r := &renderer{cfg: &cfg, tmpl: tmpl, base: settings.envelope(cfg.Batch), maxMsg: int(cfg.Queue.WithDefaults().MaxMsgSize)}
	rep.System = repair.SystemPrompt(&repair.Job{System: cfg.System, Mode: cfg.Mode, Schema: sch, SchemaRaw: canonical})
	schemaTokens := 0
	if cfg.Mode != fixpoint.ModePrompt {
		schemaTokens = len(canonical) / 4
	}

	if ledger != nil {
		switch b, err := ledger.Batch(ctx, cfg.Batch); {
		case err == nil:
			// What the real run would refuse, the dry run refuses; rows the
			// batch holds are counted, not estimated.
			if was, err := ParseBatchSettings(b); err == nil && was.recorded() {
				if d := was.diff(settings); len(d) > 0 {
					return rep, settingsChanged(cfg.Batch, d)
				}
			}
			r.ledger = ledger
		case !errors.Is(err, store.ErrNotFound):
			return rep, err
		}
	}

	var inSum, callSum float64
	var mergeIn, mergeValues float64 // the merge calls' input besides the values, and their values
	var prog Progress
	docSeen := map[string]bool{}
	chk, err := r.check(ctx, data, &prog, checkOpts{limit: limit, onJob: func(p *lineJob, held bool) error {
		if held {
			rep.Existing++
			return nil
		}
		if rep.Jobs == 0 {
			rep.Prompt, rep.PromptLine = p.job.Prompt, p.line
		}
		rep.Jobs++
		if h := p.job.DocumentHash; h != "" && !docSeen[h] {
			docSeen[h] = true
			rep.Documents++
			rep.DocumentBytes += int64(p.doc.size())
		}
		if cfg.Limits.Strategy.Document() {
			base := (len(rep.System)+len(p.job.Prompt)+3)/4 + schemaTokens
			calls, in := chunkCalls(cfg.Limits, base, (p.doc.size()+3)/4)
			callSum += float64(calls)
			inSum += float64(in)
			if cfg.Limits.MergeModel != "" && calls >= 2 {
				rep.MergeCalls++
				mergeIn += float64(base)
				mergeValues += float64(calls)
			}
			return nil
		}
		callSum++
		inSum += float64((len(rep.System)+len(p.job.Prompt)+p.doc.size()+3)/4 + schemaTokens)
		return nil
	}})
	if err != nil {
		return rep, err
	}
	rep.Limited = chk.limited
	rep.DocumentTokens = float64(rep.DocumentBytes) / 4
	if err := chk.unknownFields(&cfg); err != nil {
		return rep, err
	}
	rep.Rows, rep.Bad, rep.Repeated, rep.Warnings = prog.Rows, prog.Bad, prog.Repeated, prog.Warnings
	if prog.Rows == 0 {
		return rep, ErrNoRows // as the real run says (the dry run printed "0 would be jobs", exit 0)
	}
	if rep.Jobs == 0 {
		return rep, nil
	}
	rep.InputTokens = inSum / callSum
	// Without history: one attempt, and an output the size of a value the
	// schema describes (a sixth of its bytes, within the job's max tokens).
	rep.Attempts = callSum / float64(rep.Jobs)
	rep.OutputTokens = float64(min(cfg.MaxTokens, max(16, len(canonical)/6)))
	rep.Chunked = cfg.Limits.Strategy.Document()
	// The history measures whole jobs of any strategy: a document
	// strategy's chunk calls are counted instead.
	if ledger != nil && !rep.Chunked {
		m, err := ledger.Measure(ctx, hash, cfg.Model)
		if err != nil {
			return rep, err
		}
		rep.Measured = m
		if m.Jobs > 0 && m.MeanAttempts > 0 {
			rep.Attempts = m.MeanAttempts
			rep.OutputTokens = m.MeanTokensOut / m.MeanAttempts
		}
	}
	rep.price(cfg, prices, mergeIn, mergeValues)
	return rep, nil
}

// price estimates the report's tokens and cost from its per-attempt
// figures, at the delivery's price basis, with the merge calls (mergeIn:
// their input besides the values, mergeValues: the chunk values they
// read) at the merge model's price.
func (rep *DryRunReport) price(cfg Config, prices repair.Prices, mergeIn, mergeValues float64) {
	if prices == nil {
		prices = repair.DefaultPrices()
	}
	in := rep.InputTokens * rep.Attempts * float64(rep.Jobs)
	out := rep.OutputTokens * rep.Attempts * float64(rep.Jobs)
	rep.Tokens = in + out
	_, rep.PriceKnown = prices.Lookup(cfg.Model)
	basis := fixpoint.PriceBasisRealtime
	switch cfg.Delivery {
	case queue.DeliveryBatch:
		basis = fixpoint.PriceBasisBatch
	case queue.DeliveryFlex:
		// Every call served on the flex tier: one that falls back to the
		// default tier costs twice as much, which no estimate can know.
		basis = fixpoint.PriceBasisFlex
	}
	rep.PriceBasis = basis
	rep.CostUSD = prices.CostOn(cfg.Model, basis, int(in), int(out), 0, 0)
	if rep.MergeCalls > 0 {
		// Each chunk's value is about an attempt's output; so is the
		// merged value.
		mIn, mOut := mergeIn+mergeValues*rep.OutputTokens, float64(rep.MergeCalls)*rep.OutputTokens
		rep.MergeTokens = mIn + mOut
		rep.MergeCostUSD = prices.CostOn(cfg.Limits.MergeModel, basis, int(mIn), int(mOut), 0, 0)
		_, priced := prices.Lookup(cfg.Limits.MergeModel)
		rep.PriceKnown = rep.PriceKnown && priced
		rep.Tokens += rep.MergeTokens
		rep.CostUSD += rep.MergeCostUSD
	}
}

// chunkCalls estimates the calls of a job under a document strategy whose
// document is docTokens long, each call carrying base tokens besides its
// chunk: one call per chunk, the chunks of lim's size each repeating its
// overlap of the one before. It returns the calls and their input tokens.
func chunkCalls(lim fixpoint.Limits, base, docTokens int) (calls, input int) {
	lim = lim.WithDefaults()
	size, step := lim.ChunkTokens, lim.ChunkTokens-lim.ChunkOverlap
	calls = 1
	if docTokens > size && step > 0 {
		calls += (docTokens - size + step - 1) / step
	}
	return calls, calls*base + docTokens + (calls-1)*lim.ChunkOverlap
}
