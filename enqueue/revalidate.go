package enqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// RevalidateLedger is what a revalidation needs from the ledger.
type RevalidateLedger interface {
	Batch(ctx context.Context, name string) (*store.Batch, error)
	RunSettings(ctx context.Context, batch string) (map[int]json.RawMessage, error)
	PutSchema(ctx context.Context, schema []byte) (string, error)
	RevalidationJobs(ctx context.Context, batch string, afterRow int, afterID string, limit int, replies bool) ([]store.RevalidationJob, error)
	SaveRevalidation(ctx context.Context, p store.RevalidationParams, next func() (*store.RevalidationOutcome, error)) (run, jobs int, err error)
	LockBatch(ctx context.Context, batch, action string) (release func(), err error)
}

var _ RevalidateLedger = (*store.Store)(nil)

// RevalidateConfig says what to check a batch's stored values against.
type RevalidateConfig struct {
	// Batch names the batch; required.
	Batch string
	// Schema is the JSON Schema (with its rules) to check against;
	// required.
	Schema []byte
	// Replies checks every stored reply of a job (the newest first) when
	// its value fails: the job passes with the first that does.
	Replies bool
	// Evidence and EvidenceSource are the evidence stage's; "" keeps the
	// batch's.
	Evidence       fixpoint.EvidenceMode
	EvidenceSource string
	// DryRun checks and reports, and records nothing.
	DryRun bool
	// Chunk is how many jobs are read at once; defaults to
	// RevalidateChunkDefault.
	Chunk int
	// ProgressFunc, when set, is called after each chunk with the jobs
	// checked so far.
	ProgressFunc func(checked int)
}

// RevalidateReport is what a revalidation found.
type RevalidateReport struct {
	// Run is the run the outcome was recorded as (0 for a dry run).
	Run int
	// Checked counts the jobs checked; Pass those that still pass, Fail
	// the others. FromReplies counts the passes found in a stored reply
	// (with Replies) rather than the value.
	Checked, Pass, Fail, FromReplies int
	// Classes counts the failures by class; Paths the failures' errors by
	// path (array indexes folded to *) and keyword, as "path keyword".
	Classes map[string]int
	Paths   map[string]int
	// SchemaHash is the schema checked against.
	SchemaHash string
}

// revalidator checks one job's value (and replies) against the new schema
// and its checks.
type revalidator struct {
	schema   *validate.Schema
	rules    *rules.Set
	exempt   func(string) bool
	evidence fixpoint.EvidenceMode
	source   string
	opt      validate.CheckOptions
}

// Revalidate checks the stored values of a batch's final jobs (valid or
// invalid), and with cfg.Replies their stored replies, against another
// schema, its rules and the evidence stage, making no provider call, and
// records the outcome as a new run of the batch: each job valid or invalid
// in it, its earlier run kept. enqueue requeue --status invalid then runs
// the jobs that fail, going on from the reply checked with its errors as
// feedback. The batch must be done (no job queued).
func Revalidate(ctx context.Context, ledger RevalidateLedger, cfg RevalidateConfig) (RevalidateReport, error) {
	rep := RevalidateReport{Classes: map[string]int{}, Paths: map[string]int{}}
	b, err := ledger.Batch(ctx, cfg.Batch)
	if errors.Is(err, store.ErrNotFound) {
		return rep, fmt.Errorf("%w: %s", ErrNoBatch, cfg.Batch)
	}
	if err != nil {
		return rep, err
	}
	settings, err := revalidateSettings(ctx, ledger, b, &cfg)
	if err != nil {
		return rep, err
	}
	rv, err := newRevalidator(cfg, settings)
	if err != nil {
		return rep, err
	}
	if rep.SchemaHash, err = ledger.PutSchema(ctx, cfg.Schema); err != nil {
		return rep, err
	}
	settings.SchemaHash = rep.SchemaHash
	if !cfg.DryRun {
		release, err := ledger.LockBatch(ctx, cfg.Batch, "revalidate")
		if err != nil {
			return rep, err
		}
		defer release()
	}
	next := rv.outcomes(ctx, ledger, cfg, &rep)
	if cfg.DryRun {
		for o, err := next(); o != nil || err != nil; o, err = next() {
			if err != nil {
				return rep, err
			}
		}
		return rep, nil
	}
	raw, _ := json.Marshal(settings)
	request, _ := json.Marshal(map[string]any{"revalidate": map[string]any{"schema_hash": rep.SchemaHash, "replies": cfg.Replies}})
	rep.Run, _, err = ledger.SaveRevalidation(ctx, store.RevalidationParams{Batch: cfg.Batch, SchemaHash: rep.SchemaHash,
		Settings: raw, Request: request}, next)
	return rep, err
}

// revalidateSettings are the new run's settings: the batch's latest, with
// the evidence settings cfg gives (cfg then holds the ones in force).
func revalidateSettings(ctx context.Context, ledger RevalidateLedger, b *store.Batch, cfg *RevalidateConfig) (BatchSettings, error) {
	if len(cfg.Schema) == 0 {
		return BatchSettings{}, fmt.Errorf("%w: revalidate: missing schema", ErrBadConfig)
	}
	settings, err := ParseBatchSettings(b)
	if err != nil {
		return settings, err
	}
	runs, err := ledger.RunSettings(ctx, b.Name)
	if err != nil {
		return settings, err
	}
	if len(runs) > 0 {
		last := slices.Max(slices.Collect(maps.Keys(runs)))
		if err := json.Unmarshal(runs[last], &settings); err != nil {
			return settings, fmt.Errorf("batch %s run %d settings: %w", b.Name, last, err)
		}
	}
	if cfg.Evidence != "" {
		settings.Evidence = cfg.Evidence
	}
	if cfg.EvidenceSource != "" {
		settings.EvidenceSource = cfg.EvidenceSource
	}
	if settings.Evidence, err = fixpoint.ParseEvidenceMode(string(settings.Evidence)); err != nil {
		return settings, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	settings.EvidenceSource = cmp.Or(settings.EvidenceSource, fixpoint.EvidenceSourceRow)
	if settings.EvidenceSource == fixpoint.EvidenceSourceDocument && settings.Evidence != fixpoint.EvidenceOff {
		return settings, fmt.Errorf("%w: batch %s checks its values against the jobs' documents, which revalidate does not read yet: give --evidence off, or --evidence-source row, prompt or field:NAME", ErrBadConfig, b.Name)
	}
	if err := CheckEvidenceSource(settings.EvidenceSource, false); err != nil {
		return settings, err
	}
	cfg.Evidence, cfg.EvidenceSource = settings.Evidence, settings.EvidenceSource
	return settings, nil
}

func newRevalidator(cfg RevalidateConfig, settings BatchSettings) (*revalidator, error) {
	schema, err := validate.Compile(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	if err := schema.Satisfiable(); err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	set, err := rules.Compile(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	rv := &revalidator{schema: schema, rules: set, evidence: settings.Evidence, source: settings.EvidenceSource,
		opt: validate.CheckOptions{Coerce: repair.Coercer(settings.Limits.WithDefaults().Coerce)}}
	var doc any
	if json.Unmarshal(cfg.Schema, &doc) == nil {
		rv.exempt = evidence.Exempt(doc)
	}
	return rv, nil
}

// RevalidateChunkDefault is how many jobs a revalidation reads at once:
// each with its reply, larger than an enqueued row.
const RevalidateChunkDefault = 500

// outcomes returns the revalidation's outcomes one by one, reading the
// batch's jobs a chunk at a time and counting them into rep; nil, nil
// after the last.
func (rv *revalidator) outcomes(ctx context.Context, ledger RevalidateLedger, cfg RevalidateConfig, rep *RevalidateReport) func() (*store.RevalidationOutcome, error) {
	chunk := cmp.Or(cfg.Chunk, RevalidateChunkDefault)
	var page []store.RevalidationJob
	afterRow, afterID, done := 0, "", false
	return func() (*store.RevalidationOutcome, error) {
		if len(page) == 0 && !done {
			var err error
			if page, err = ledger.RevalidationJobs(ctx, cfg.Batch, afterRow, afterID, chunk, cfg.Replies); err != nil {
				return nil, err
			}
			done = len(page) < chunk
			if len(page) > 0 {
				afterRow, afterID = page[len(page)-1].RowNo, page[len(page)-1].ID
			}
			if cfg.ProgressFunc != nil && rep.Checked > 0 {
				cfg.ProgressFunc(rep.Checked)
			}
		}
		if len(page) == 0 {
			return nil, nil
		}
		j := page[0]
		page = page[1:]
		o := rv.check(&j)
		rep.count(o)
		return o, nil
	}
}

// check checks a job's value, then, when it fails and the job has stored
// replies, each reply from the newest: the job passes with the first that
// does, else fails as its value (or, without one, its newest reply) does.
func (rv *revalidator) check(j *store.RevalidationJob) *store.RevalidationOutcome {
	source := rv.sourceOf(j)
	var first *store.RevalidationOutcome
	if len(j.Value) > 0 {
		first = rv.checkText(j, string(j.Value), 0, source)
		if first.Valid {
			return first
		}
	}
	for _, r := range j.Replies {
		o := rv.checkText(j, r.Raw, r.No, source)
		if o.Valid {
			return o
		}
		if first == nil {
			first = o
		}
	}
	if first == nil {
		first = &store.RevalidationOutcome{JobID: j.ID, PriorRun: j.Run, Class: string(fixpoint.ClassSyntax), Error: "no value and no reply to check",
			Errors: json.RawMessage(`[]`)}
	}
	return first
}

func (rv *revalidator) sourceOf(j *store.RevalidationJob) *evidence.Source {
	if rv.evidence == fixpoint.EvidenceOff {
		return nil
	}
	text, err := evidence.JobSource(j.Metadata, j.Prompt, rv.source)
	if err != nil {
		return evidence.New("") // the row lacks the field: nothing grounds its values
	}
	return evidence.New(text)
}

// checkText checks one text (a value, or a reply) as a worker checks a
// reply: extraction, the schema with the batch's coercion, the rules and
// the evidence stage.
func (rv *revalidator) checkText(j *store.RevalidationJob, text string, attempt int, source *evidence.Source) *store.RevalidationOutcome {
	res := validate.CheckWith(rv.schema, text, rv.opt)
	o := &store.RevalidationOutcome{JobID: j.ID, PriorRun: j.Run, AttemptNo: attempt, Valid: res.Valid}
	errs := res.Errors
	var truth repair.Truth
	if res.Valid {
		checks := repair.Checks{Rules: rv.rules, Mode: rv.evidence, Source: source, Exempt: rv.exempt}
		truth = checks.Check(res.Value)
		errs = truth.Errors
		o.Valid = len(errs) == 0
	}
	if res.Value != nil {
		o.Value, _ = json.Marshal(res.Value)
	}
	a := fixpoint.Attempt{Errors: errs, Warnings: truth.Warnings, Evidence: truth.Evidence}
	row := ledgerrow.Attempt(&a)
	o.Errors, o.Warnings, o.Evidence = row.Errors, row.Warnings, row.Evidence
	if !o.Valid {
		o.Class = string(validate.ClassOf(errs))
		if len(errs) > 0 {
			o.Error = errs[0].Message
			if len(errs) > 1 {
				o.Error += fmt.Sprintf(" (and %d more)", len(errs)-1)
			}
		}
	}
	return o
}

// count adds an outcome to the report.
func (rep *RevalidateReport) count(o *store.RevalidationOutcome) {
	rep.Checked++
	if o.Valid {
		rep.Pass++
		if o.AttemptNo != 0 {
			rep.FromReplies++
		}
		return
	}
	rep.Fail++
	rep.Classes[o.Class]++
	var errs []fixpoint.ValidationError
	_ = json.Unmarshal(o.Errors, &errs)
	for _, e := range errs {
		rep.Paths[foldIndexes(e.Path)+" "+e.Keyword]++
	}
}

var indexRE = regexp.MustCompile(`/[0-9]+(/|$)`)

// foldIndexes writes a pointer's array indexes as *, as error_paths does.
func foldIndexes(p string) string {
	for {
		q := indexRE.ReplaceAllString(p, "/*$1")
		if q == p {
			return cmp.Or(p, "/")
		}
		p = q
	}
}

// TopPaths are the report's failing paths, the most frequent first, at
// most n.
func (rep *RevalidateReport) TopPaths(n int) []string {
	keys := slices.Collect(maps.Keys(rep.Paths))
	slices.SortFunc(keys, func(a, b string) int {
		if c := rep.Paths[b] - rep.Paths[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys[:min(n, len(keys))]
}
