package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const docsUsage = `Usage: fixpoint-bench docs [flags]

The long-document bench (issue 39): --docs simulated framework agreements of
about --tokens tokens each (sim.NewDocument: seven planted fields and 500
subsidiaries in lists spread over the text; English, German, French and
Japanese in turn), run under each strategy of --strategies against the
simulator's --preset over HTTP, through the real llm client:

  single      one call over the whole text (strategy conversation, the
              document in the request), the baseline;
  parallel    the document in chunks, extracted at once and merged;
  sequential  the chunks in order, each call extending the value so far;
  agent       the model builds the value through tools;
  parallel+merge
              parallel with the chunks' values merged by a call to
              --merge-model (given --merge-model, this row follows
              parallel's).

Every job runs with the evidence stage on, over the whole document. Each
strategy's row gives: the valid rate; the recall of the planted scalar
fields and of the list items over the valid values, against the
document's truth (a value that differs from the truth is not recalled);
the list items whose key repeats an earlier item's, as a share of the items
listed; the values that differ from the truth and that the evidence stage
graded grounded (exact, normalized or fuzzy); calls, tokens in and out and
cost per valid document at --model's list prices, and the cost against the
single call's; the wall time with --concurrency documents in flight.

Nothing is stored: no Postgres or NATS is needed. Progress goes to stderr,
the table (or with --json, the figures as JSON) to stdout. The bench
reports, it does not fail: it exits 0 whatever the figures, 1 when it could
not run, 2 on bad usage.`

// Defaults of the docs bench.
const (
	docsCountDefault       = 200
	docsTokensDefault      = 30_000
	docsPresetDefault      = "messy"
	docsStrategiesDefault  = "single,parallel,sequential,agent"
	docsConcurrencyDefault = 16
	docsModelDefault       = "gpt-4o-mini"
	// docsMaxTokensDefault is gpt-4o-mini's output ceiling: a sequential
	// step writes back the whole list so far, 500 items near the end.
	docsMaxTokensDefault = 16_384
	// docsLaneCalls is the most calls in flight to the simulator, whatever
	// the strategy (the lane's ceiling, as in the other figures).
	docsLaneCalls = 64
	// docsCallTimeout bounds one call: max tokens at a slow simulated
	// token latency.
	docsCallTimeout = 15 * time.Minute
	// docsTransientMax is how many times a job the provider keeps failing
	// is resumed before it counts as failed.
	docsTransientMax = 3
)

// strategySingle is the baseline's name in --strategies: strategy
// conversation with the whole document in the request.
const strategySingle = "single"

// strategyMergeModel is the row of the parallel strategy with its merge
// made by a call to --merge-model.
const strategyMergeModel = "parallel+merge"

// docsConfig is one run of the docs bench.
type docsConfig struct {
	docs, tokens    int
	preset          string
	strategies      []string
	concurrency     int
	chunkTokens     int
	chunkOverlap    int
	listPasses      int
	seed            uint64
	langs           []string
	model           string
	mergeModel      string
	maxTokens       int
	maxAttempts     int
	evidence        fixpoint.EvidenceMode
	latency, perTok time.Duration
	jsonOut         bool
}

func runDocs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cliflags.NewFlagSet("fixpoint-bench docs", docsUsage, "", stdout)
	var c docsConfig
	fs.IntVar(&c.docs, "docs", docsCountDefault, "documents to run under each strategy")
	fs.IntVar(&c.tokens, "tokens", docsTokensDefault, "about how long each document is, in tokens (chunk.Tokens); a document has at least 50,000 characters")
	fs.StringVar(&c.preset, "preset", docsPresetDefault, "simulator preset (simllm --help lists them)")
	strategies := fs.String("strategies", docsStrategiesDefault, "strategies to run, comma-separated: single, parallel, sequential, agent, parallel+merge")
	fs.IntVar(&c.concurrency, "concurrency", docsConcurrencyDefault, fmt.Sprintf("documents in flight (as worker --concurrency); a document has at most %d calls in flight (pipeline.DocCallsMax), the bench at most %d", pipeline.DocCallsMax, docsLaneCalls))
	fs.IntVar(&c.chunkTokens, "chunk-tokens", fixpoint.ChunkTokensDefault, "chunk size in tokens of parallel, sequential and agent")
	fs.IntVar(&c.chunkOverlap, "chunk-overlap", fixpoint.ChunkOverlapDefault, "tokens each chunk repeats of the one before")
	fs.IntVar(&c.listPasses, "list-passes", fixpoint.ListPassesDefault, "list passes a chunk of parallel and sequential may get over its rest when its list looks cut (0: none)")
	seed := fs.Uint64("seed", 1, "seed of the documents and of the simulator's draws")
	langs := fs.String("langs", strings.Join(sim.DocumentLangs(), ","), "document languages, taken in turn, comma-separated")
	fs.StringVar(&c.model, "model", docsModelDefault, "model the jobs name: its list prices cost the calls (the simulator answers any)")
	fs.StringVar(&c.mergeModel, "merge-model", "", "model that merges the chunks' values in the row parallel+merge, which then follows parallel's (its list prices cost the merge call)")
	fs.IntVar(&c.maxTokens, "max-tokens", docsMaxTokensDefault, "output cap of each call")
	fs.IntVar(&c.maxAttempts, "max-attempts", fixpoint.MaxAttemptsDefault, "calls a job may make that get a reply (the single call's repair turns; see docs/documents.md for the others)")
	evidenceMode := fs.String("evidence", string(fixpoint.EvidenceCheck), "evidence stage over the document: check (grades only) or require (an ungrounded value is fed back)")
	fs.DurationVar(&c.latency, "latency", 0, "simulated latency of every call (0: none, the wall time is then CPU)")
	fs.DurationVar(&c.perTok, "token-latency", 0, "simulated latency of each output token, on top of --latency")
	fs.BoolVar(&c.jsonOut, "json", false, "print the figures as one JSON object instead of the table")
	if err := cliflags.Parse(fs, args); err != nil {
		return err
	}
	if err := cliflags.NoArgs(fs, fs.Args()); err != nil {
		return err
	}
	c.seed = *seed
	c.strategies = splitList(*strategies)
	c.langs = splitList(*langs)
	var err error
	if c.evidence, err = fixpoint.ParseEvidenceMode(*evidenceMode); err != nil {
		return cliflags.Usagef("--evidence: %v", err)
	}
	if err := c.validate(); err != nil {
		return err
	}
	rep, err := benchDocs(ctx, c, stderr)
	if err != nil {
		return err
	}
	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeDocsReport(stdout, rep)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *docsConfig) validate() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"--docs", c.docs}, {"--tokens", c.tokens}, {"--concurrency", c.concurrency}, {"--chunk-tokens", c.chunkTokens},
		{"--max-tokens", c.maxTokens}, {"--max-attempts", c.maxAttempts}} {
		if v.n < 1 {
			return cliflags.Usagef("%s must be at least 1, got %d", v.name, v.n)
		}
	}
	if c.chunkOverlap < 0 || c.chunkOverlap >= c.chunkTokens {
		return cliflags.Usagef("--chunk-overlap %d must be from 0 to below --chunk-tokens %d", c.chunkOverlap, c.chunkTokens)
	}
	if c.listPasses < 0 {
		return cliflags.Usagef("--list-passes %d: want 0 (none) or more", c.listPasses)
	}
	if c.maxAttempts > fixpoint.MaxAttemptsMax {
		return cliflags.Usagef("--max-attempts %d is over %d", c.maxAttempts, fixpoint.MaxAttemptsMax)
	}
	if c.evidence == fixpoint.EvidenceOff {
		return cliflags.Usagef("--evidence off: the bench counts the values the evidence stage grades, so it needs check or require")
	}
	if _, err := sim.Preset(c.preset); err != nil {
		return cliflags.Usagef("--preset: %v", err)
	}
	if len(c.strategies) == 0 {
		return cliflags.Usagef("--strategies is empty: want some of single, parallel, sequential, agent")
	}
	seen := map[string]bool{}
	for _, s := range c.strategies {
		if s != strategySingle && s != strategyMergeModel && !fixpoint.Strategy(s).Document() {
			return cliflags.Usagef("--strategies: %q is not one of single, parallel, sequential, agent, parallel+merge", s)
		}
		if seen[s] {
			return cliflags.Usagef("--strategies names %s twice", s)
		}
		seen[s] = true
	}
	switch {
	case seen[strategyMergeModel] && c.mergeModel == "":
		return cliflags.Usagef("--strategies %s needs --merge-model M", strategyMergeModel)
	case c.mergeModel != "" && !seen[strategyMergeModel]:
		i := slices.Index(c.strategies, string(fixpoint.StrategyParallel))
		if i < 0 {
			return cliflags.Usagef("--merge-model is for the parallel strategy: name parallel or %s in --strategies", strategyMergeModel)
		}
		c.strategies = slices.Insert(c.strategies, i+1, strategyMergeModel)
	}
	if c.mergeModel != "" && repair.DefaultPrices()[c.mergeModel] == (repair.Price{}) {
		return cliflags.Usagef("--merge-model %s has no list price in the price table: its cost would read 0", c.mergeModel)
	}
	if len(c.langs) == 0 {
		return cliflags.Usagef("--langs is empty: want some of %s", strings.Join(sim.DocumentLangs(), ", "))
	}
	for _, l := range c.langs {
		if !slices.Contains(sim.DocumentLangs(), l) {
			return cliflags.Usagef("--langs: %q is not one of %s", l, strings.Join(sim.DocumentLangs(), ", "))
		}
	}
	if repair.DefaultPrices()[c.model] == (repair.Price{}) {
		return cliflags.Usagef("--model %s has no list price in the price table: its cost would read 0", c.model)
	}
	return nil
}

// benchDocument is one document of the bench with what its jobs share.
type benchDocument struct {
	id  string
	doc sim.Document
	// tokens is chunk.Tokens of the text.
	tokens int
}

// docsReport is what the docs bench measured, as --json prints it.
type docsReport struct {
	Date        string    `json:"date"`
	Machine     string    `json:"machine"`
	Load        string    `json:"load"`
	Command     string    `json:"command"`
	Docs        int       `json:"docs"`
	MeanTokens  int       `json:"mean_tokens"`
	MeanChars   int       `json:"mean_chars"`
	Langs       []string  `json:"langs"`
	Preset      string    `json:"preset"`
	Model       string    `json:"model"`
	Concurrency int       `json:"concurrency"`
	LaneCalls   int       `json:"lane_calls"`
	ChunkTokens int       `json:"chunk_tokens"`
	Overlap     int       `json:"chunk_overlap"`
	ListPasses  int       `json:"list_passes"`
	Evidence    string    `json:"evidence"`
	Generated   string    `json:"generated_in"`
	Rows        []docsRow `json:"strategies"`
}

// benchDocs writes the documents and runs each strategy over them.
func benchDocs(ctx context.Context, c docsConfig, progress io.Writer) (*docsReport, error) {
	// The strategies' goroutines report progress at once.
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(progress, "bench docs: "+format+"\n", args...)
	}
	m := readMachine()
	rep := &docsReport{
		Date: time.Now().UTC().Format(time.DateOnly), Machine: m.String(), Load: m.load, Command: docsCommand(c),
		Docs: c.docs, Langs: c.langs, Preset: c.preset, Model: c.model, Concurrency: c.concurrency, LaneCalls: docsLaneCalls,
		ChunkTokens: c.chunkTokens, Overlap: c.chunkOverlap, ListPasses: c.listPasses, Evidence: string(c.evidence),
	}
	start := time.Now()
	docs, err := writeDocuments(c, logf)
	if err != nil {
		return nil, err
	}
	rep.Generated = time.Since(start).Round(time.Millisecond).String()
	var toks, chars int
	for _, d := range docs {
		toks += d.tokens
		chars += len([]rune(d.doc.Text))
	}
	rep.MeanTokens, rep.MeanChars = toks/len(docs), chars/len(docs)
	logf("%d documents, %d tokens and %d characters on average, written in %s", len(docs), rep.MeanTokens, rep.MeanChars, rep.Generated)
	schema, err := docsSchema()
	if err != nil {
		return nil, err
	}
	for _, s := range c.strategies {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, runStrategy(ctx, c, s, docs, schema, logf))
	}
	relativeCost(rep.Rows)
	return rep, nil
}

// docsCommand is the command line that repeats this run.
func docsCommand(c docsConfig) string {
	cmd := fmt.Sprintf("go run ./cmd/fixpoint-bench docs --docs %d --tokens %d --preset %s --strategies %s --concurrency %d --chunk-tokens %d --chunk-overlap %d --seed %d --model %s --evidence %s",
		c.docs, c.tokens, c.preset, strings.Join(c.strategies, ","), c.concurrency, c.chunkTokens, c.chunkOverlap, c.seed, c.model, c.evidence)
	if !slices.Equal(c.langs, sim.DocumentLangs()) {
		cmd += " --langs " + strings.Join(c.langs, ",")
	}
	if c.latency > 0 || c.perTok > 0 {
		cmd += fmt.Sprintf(" --latency %s --token-latency %s", c.latency, c.perTok)
	}
	if c.mergeModel != "" {
		cmd += " --merge-model " + c.mergeModel
	}
	if c.listPasses != fixpoint.ListPassesDefault {
		cmd += fmt.Sprintf(" --list-passes %d", c.listPasses)
	}
	if c.maxTokens != docsMaxTokensDefault || c.maxAttempts != fixpoint.MaxAttemptsDefault {
		cmd += fmt.Sprintf(" --max-tokens %d --max-attempts %d", c.maxTokens, c.maxAttempts)
	}
	return cmd
}

// writeDocuments writes c.docs documents, languages in turn, each sized to
// about c.tokens tokens.
func writeDocuments(c docsConfig, logf func(string, ...any)) ([]benchDocument, error) {
	perLang := map[string]float64{} // characters a token, measured once per language
	docs := make([]benchDocument, c.docs)
	for i := range docs {
		lang := c.langs[i%len(c.langs)]
		ratio, ok := perLang[lang]
		if !ok {
			probe, err := sim.NewDocument(c.seed, 0, lang, sim.DocumentMinChars)
			if err != nil {
				return nil, err
			}
			ratio = float64(len([]rune(probe.Text))) / float64(chunk.Tokens(probe.Text))
			perLang[lang] = ratio
		}
		chars := min(max(int(float64(c.tokens)*ratio), sim.DocumentMinChars), sim.DocumentMaxChars)
		d, err := sim.NewDocument(c.seed, i, lang, chars)
		if err != nil {
			return nil, fmt.Errorf("write document %d: %w", i, err)
		}
		docs[i] = benchDocument{id: fmt.Sprintf("doc-%04d", i), doc: d, tokens: chunk.Tokens(d.Text)}
		if (i+1)%50 == 0 {
			logf("  %d of %d documents written", i+1, c.docs)
		}
	}
	return docs, nil
}

// docsSchemaSet is the document schema compiled once, with its rules and
// evidence exemptions.
type docsSchemaSet struct {
	raw    []byte
	schema *validate.Schema
	rules  *rules.Set
	exempt func(ptr string) bool
}

func docsSchema() (*docsSchemaSet, error) {
	raw := []byte(sim.DocumentSchema)
	sch, err := validate.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("compile the document schema: %w", err)
	}
	rs, err := rules.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("compile the document schema's rules: %w", err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return &docsSchemaSet{raw: raw, schema: sch, rules: rs, exempt: evidence.Exempt(doc)}, nil
}

// docJob is the job of document d under strategy s.
func docJob(c docsConfig, s string, d *benchDocument, set *docsSchemaSet) *repair.Job {
	strategy := fixpoint.Strategy(s)
	switch s {
	case strategySingle:
		strategy = fixpoint.StrategyConversation
	case strategyMergeModel:
		strategy = fixpoint.StrategyParallel
	}
	lim := fixpoint.Limits{Strategy: strategy, MaxAttempts: c.maxAttempts}
	if s == strategyMergeModel {
		lim.MergeModel = c.mergeModel
	}
	if strategy.Document() {
		lim.ChunkTokens, lim.ChunkOverlap = c.chunkTokens, c.chunkOverlap
		if strategy != fixpoint.StrategyAgent {
			lim.ListPasses = c.listPasses
		}
	}
	return &repair.Job{
		ID: d.id, Prompt: strings.ReplaceAll(sim.DocumentTemplate, "{{.id}}", d.id), Document: d.doc.Text,
		Schema: set.schema, SchemaRaw: set.raw, Rules: set.rules, Model: c.model, Mode: fixpoint.ModePrompt,
		MaxTokens: c.maxTokens, Limits: lim,
		Evidence: c.evidence, Source: evidence.New(d.doc.Text), Exempt: set.exempt,
	}
}

// runStrategy runs every document under strategy s against a simulator
// of its own, with c.concurrency documents in flight, and scores the
// results against the documents' truths.
func runStrategy(ctx context.Context, c docsConfig, s string, docs []benchDocument, set *docsSchemaSet, logf func(string, ...any)) docsRow {
	row := docsRow{Strategy: s}
	logf("%s: %d documents, %d in flight, %s preset", s, len(docs), c.concurrency, c.preset)
	cfg, err := sim.Preset(c.preset)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	// The same seed for every strategy, tasks keyed by their text: each
	// document's single call, and each chunk, draws the same replies in
	// every run.
	cfg.Seed, cfg.KeyByPrompt = c.seed, true
	if c.latency > 0 || c.perTok > 0 {
		cfg.Latency = sim.Latency{Dist: sim.DistFixed, RequestP50: c.latency, RequestP99: c.latency, TokenP50: c.perTok, TokenP99: c.perTok}
	}
	srv, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		row.Err = fmt.Sprintf("start simulator: %v", err)
		return row
	}
	defer closeSim()
	// A call's own timeout is sized for the longest reply a simulated
	// latency gives (a sequential step writing 500 items back), not for
	// a short job's: the figures measure the strategies, not retries of
	// calls cut off.
	client, err := llm.New(llm.Config{
		Provider: llm.ProviderOpenAI, BaseURL: url + "/v1", APIKey: "sim-bench", TotalTimeout: docsCallTimeout,
		Retry: llm.RetryConfig{MaxRetries: 4}, Lane: llm.LaneConfig{MaxConcurrency: docsLaneCalls, InitialConcurrency: docsLaneCalls},
	})
	if err != nil {
		row.Err = fmt.Sprintf("configure simulator client: %v", err)
		return row
	}
	loop := pipeline.NewLoop(client, pipeline.LoopConfig{Record: repair.RecordHash})
	results := make([]docOutcome, len(docs))
	var next, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(c.concurrency, len(docs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(docs) || ctx.Err() != nil {
					return
				}
				job := docJob(c, s, &docs[i], set)
				res, err := runDocJob(ctx, loop, job)
				results[i] = docOutcome{res: res, err: err}
				if n := done.Add(1); n%int64(max(1, len(docs)/10)) == 0 {
					logf("  %s: %d of %d documents done, %s", s, n, len(docs), time.Since(start).Round(time.Millisecond))
				}
			}
		})
	}
	wg.Wait()
	row.Wall = time.Since(start)
	row.WallText = row.Wall.Round(time.Millisecond).String()
	row.SimCalls = srv.Stats().Requests
	if err := ctx.Err(); err != nil {
		row.Err = fmt.Sprintf("stopped: %v", err)
		return row
	}
	scoreRow(&row, docs, results, set)
	logf("  %s: valid %s, scalar recall %s, item recall %s, %s a valid document, in %s", s, pct(row.ValidRate), pct2(row.ScalarRecall), pct2(row.ItemRecall), usd(row.CostPerValid), row.WallText)
	return row
}

// docOutcome is one document's run.
type docOutcome struct {
	res *fixpoint.Result
	err error
}

// runDocJob runs job to its end through the pipeline's Loop, as a worker
// does (a document strategy's calls at once, up to
// pipeline.DocCallsMax). A job the provider keeps failing (ErrTransient)
// is resumed a few times, as a worker would run it again.
func runDocJob(ctx context.Context, loop *pipeline.Loop, job *repair.Job) (*fixpoint.Result, error) {
	var prev *fixpoint.Result
	for try := 0; ; try++ {
		res, err := loop.Resume(ctx, job, prev, pipeline.LoopHooks{})
		if err == nil || !errors.Is(err, fixpoint.ErrTransient) || try+1 >= docsTransientMax || ctx.Err() != nil {
			return res, err
		}
		prev = res
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
