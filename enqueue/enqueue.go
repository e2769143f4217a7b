package enqueue

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// Dataset formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// ChunkDefault is how many rows are recorded and published together. The
// ledger's cost of a chunk beyond its rows (the rollup triggers' statements,
// the commit) is paid once per chunk: copying 2,000 rows a chunk took two
// thirds of the time a row that 500 did (BenchmarkCopyPublish).
const ChunkDefault = 2000

// IDMaxBytes bounds a row's id (the --id-field value).
const IDMaxBytes = 512

// Ledger is what enqueueing needs from the ledger. *store.Store
// satisfies it.
type Ledger interface {
	PutSchema(ctx context.Context, body []byte) (string, error)
	CreateBatch(ctx context.Context, p store.BatchParams) (bool, *store.Batch, error)
	PutBatch(ctx context.Context, p store.BatchParams) error
	Batch(ctx context.Context, name string) (*store.Batch, error)
	RefreshBatchTotal(ctx context.Context, name string) (int, error)
	StartRecording(ctx context.Context, batch, datasetSHA256 string) (string, error)
	BeatRecording(ctx context.Context, token string) error
	StopRecording(ctx context.Context, token string) error
	FinishRecording(ctx context.Context, batch, token, datasetSHA256 string, rows int, bad []string) (int, error)
	InsertJobs(ctx context.Context, jobs []store.NewJob) (int, error)
	PutDocuments(ctx context.Context, docs []store.Document) (int, error)
	InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error)
	SettlePublishing(ctx context.Context, chunk store.PublishingChunk, unpublished []string) error
	ReclaimPublishing(ctx context.Context, batch, token, dataset string) (int, error)
	MarkPublished(ctx context.Context, ids []string) error
	HeldJobs(ctx context.Context, jobs []store.NewJob) ([]store.HeldJob, error)
	Unpublished(ctx context.Context, batch string, limit int) ([]store.NewJob, error)
	PublishedQueued(ctx context.Context, batch, after string, limit int) ([]store.NewJob, error)
	RunSettings(ctx context.Context, batch string) (map[int]json.RawMessage, error)
	Reject(ctx context.Context, r store.Rejection) (bool, error)
	BatchSpend(ctx context.Context, batch string) (store.Spend, error)
}

// runBases gives the envelope of each run of a batch: run 1 from the
// batch's settings, later runs (enqueue requeue) from theirs, read once.
type runBases struct {
	ctx    context.Context
	ledger Ledger
	batch  string
	first  queue.Envelope
	later  map[int]queue.Envelope
}

func newRunBases(ctx context.Context, ledger Ledger, batch string, first queue.Envelope) *runBases {
	return &runBases{ctx: ctx, ledger: ledger, batch: batch, first: first}
}

func (r *runBases) base(run int) (queue.Envelope, error) {
	if run <= 1 {
		return r.first, nil
	}
	if r.later == nil {
		raw, err := r.ledger.RunSettings(r.ctx, r.batch)
		if err != nil {
			return queue.Envelope{}, err
		}
		r.later = map[int]queue.Envelope{}
		for n, js := range raw {
			var s BatchSettings
			if err := json.Unmarshal(js, &s); err != nil {
				return queue.Envelope{}, fmt.Errorf("batch %s run %d settings: %w", r.batch, n, err)
			}
			s.Limits = s.Limits.WithDefaults()
			env := s.envelope(r.batch)
			env.Run = n
			r.later[n] = env
		}
	}
	env, ok := r.later[run]
	if !ok {
		return queue.Envelope{}, fmt.Errorf("batch %s: no settings recorded for run %d", r.batch, run)
	}
	return env, nil
}

var _ Ledger = (*store.Store)(nil)

// Config describes one enqueue run.
type Config struct {
	// Batch names the batch; required.
	Batch string
	// Schema is the JSON Schema text; required unless Resume.
	Schema []byte
	// Template is a Go text/template rendered over each row's fields;
	// required unless Resume. A field the row lacks is an error for that row.
	Template string
	// System is an optional system prompt for every job.
	System string
	// IDField names the row field whose value makes the job id stable;
	// when empty the id is the batch and the row number. The value must be
	// a string or a number; 1 and "1" are the same id.
	IDField string
	// Format is jsonl or csv.
	Format string
	// Provider, Model and Mode are stored on each job. Mode defaults to
	// prompt.
	Provider  string
	Model     string
	Mode      fixpoint.Mode
	MaxTokens int
	Temp      *float64
	Limits    fixpoint.Limits
	// Cap is the batch's spend cap, set when the batch is created; a
	// re-run must give the same (enqueue cap changes it).
	Cap store.Cap
	// MaxBadRows is how many bad rows may be reported and skipped; with
	// more, nothing of the run is recorded or published. 0 allows none, -1
	// any number.
	MaxBadRows int
	// MaxPromptBytes makes a row whose prompt, with the system prompt and
	// the schema (which every request carries), is larger a bad row:
	// workers reject such jobs. A schema that leaves no room is refused.
	// Defaults to pipeline.MaxPromptBytesDefault, the workers' default.
	MaxPromptBytes int

	// schemaBytes is the size of the schema as stored (compacted), which
	// the workers send in every request's system prompt; set by prepare.
	schemaBytes int
	// Resume publishes the batch's jobs recorded but not yet published (a
	// run cut short) and republishes those the ledger says are published
	// and still queued but the stream no longer holds (a lost NATS data
	// directory), instead of reading a dataset. Every setting is taken from
	// the batch as recorded; only Batch and Queue are read.
	Resume bool
	// Chunk defaults to ChunkDefault.
	Chunk int
	Queue queue.Config
	// ProgressFunc, when set, is called after each chunk of each phase.
	ProgressFunc func(p Progress)
	// Delivery is how the batch's calls are made: queue.DeliveryRealtime
	// (the default), queue.DeliveryBatch, in provider batch waves at half
	// the price, or queue.DeliveryFlex, realtime calls on the provider's
	// flex tier at batch rates (refused for a provider without one). A batch that cannot have it (Ollama, which has no
	// batch API, or a server the probe finds without the endpoints) is
	// refused, unless BatchFallback says to run it realtime.
	Delivery string
	// BatchFallback is what a batch-delivery batch that cannot have it
	// becomes: "" refuses it (ErrBadConfig), BatchFallbackRealtime runs it
	// realtime at the full price, with a warning in Progress.Warnings.
	BatchFallback string
	// Deadline is how long after the batch is first enqueued its jobs must
	// be final, with batch delivery: near it, they run realtime. Defaults
	// to DeadlineDefault.
	Deadline time.Duration
	// PromptCache gives the batch's requests a stable prompt-cache key (per
	// batch and schema) and marks long system prompts cacheable, so the
	// providers' prompt caches hit.
	PromptCache bool
	// Evidence is what the workers' evidence stage does with each valid
	// value (fixpoint.EvidenceMode): "" is fixpoint.EvidenceDefault.
	Evidence fixpoint.EvidenceMode
	// EvidenceSource is the text a job's values are checked against:
	// fixpoint.EvidenceSourceRow ("" too), EvidenceSourcePrompt, or
	// "field:NAME" (see evidence.JobSource).
	EvidenceSource string
	// DocumentField names the row field holding the job's document, its
	// text; DocumentFileField the row field holding the path of a text or
	// Markdown file that is (relative to DatasetDir; an absolute path as
	// given), read by the first pass, and by the second once for each
	// document, which must not have changed. At most one is set.
	// The document is stored once in the ledger by its hash and goes into
	// each request in a block of its own, after the system prompt and
	// before the prompt; it is never in a job message. With DocumentField
	// the row recorded is the row without that field.
	DocumentField     string
	DocumentFileField string
	// MaxDocumentBytes makes a row whose document is larger a bad row.
	// Defaults to MaxDocumentBytesDefault.
	MaxDocumentBytes int
	// DatasetDir is the directory of the dataset, which DocumentFileField's
	// relative paths start from; "" is the working directory.
	DatasetDir string
	// ProbeBatch, when set, asks the provider's server whether it serves
	// the batch endpoints (llm.Client.ProbeBatch); an error wrapping
	// llm.ErrBatchUnsupported makes a batch-delivery batch realtime, with a
	// warning.
	ProbeBatch func(ctx context.Context) error
}

// BatchFallbackRealtime is the one fallback of a batch-delivery batch
// that cannot have it.
const BatchFallbackRealtime = "realtime"

// DeadlineDefault is the deadline of a batch-delivery batch: the providers
// promise their batches within 24 hours.
const DeadlineDefault = 24 * time.Hour

// BadRow is a dataset row that could not become a job.
type BadRow struct {
	Line int
	Err  error
	// JobID is the id the row's job would have had, "" when the row was
	// not read that far: the batch is short of it until a later run
	// records it.
	JobID string
}

func (b BadRow) Error() string { return fmt.Sprintf("line %d: %v", b.Line, b.Err) }

// Phases of an enqueue run, as Progress reports them.
const (
	// PhaseCheck reads and renders every row, recording and publishing
	// nothing.
	PhaseCheck = "check"
	// PhasePublish records the rows that passed and publishes them.
	PhasePublish = "publish"
)

// Progress counts an enqueue run so far.
type Progress struct {
	Phase       string   // PhaseCheck, then PhasePublish
	Rows        int      // rows read in the current phase
	Warnings    []string // what the run changed of what it was asked, and why
	Recorded    int      // new jobs recorded in the ledger
	Published   int      // jobs published to the queue
	Duplicates  int      // publishes the queue dropped as already present
	Existing    int      // rows whose job was already recorded by an earlier run
	Repeated    int      // rows repeating an earlier row of the run (same id, same content), skipped
	Republished int      // jobs the stream had lost, published again (Resume)
	Bad         []BadRow // rows skipped
}

// Enqueue errors. ErrBadSchema, ErrBadTemplate and ErrSettingsChanged also
// match ErrBadConfig: the run was asked for something it cannot do, and
// nothing was recorded.
var (
	// ErrBadConfig is matched by every error about the run's settings.
	ErrBadConfig = errors.New("bad enqueue settings")
	// ErrBadSchema is returned when the schema does not compile or no value
	// can satisfy it.
	ErrBadSchema = errors.New("bad schema")
	// ErrBadTemplate is returned when the template does not parse.
	ErrBadTemplate = errors.New("bad template")
	// ErrSettingsChanged is returned when a batch is enqueued again with
	// settings other than the ones it was recorded with.
	ErrSettingsChanged = errors.New("the batch was recorded with other settings")
	// ErrTooManyBadRows is returned when bad rows exceed MaxBadRows; nothing
	// of the run was recorded or published.
	ErrTooManyBadRows = errors.New("too many bad rows")
	// ErrNoRows is returned for a dataset without a single row.
	ErrNoRows = errors.New("the dataset has no rows")
	// ErrUnreadable is matched by the error of a dataset that cannot be
	// read on from a line (a compressed or UTF-16 file, a CSV header it
	// cannot use, a CSV quote left open across rows): nothing is recorded.
	ErrUnreadable = errors.New("the dataset cannot be read")
	// ErrEmptyBatch is returned by Resume for a batch that holds no job.
	ErrEmptyBatch = errors.New("the batch holds no job")
	// ErrPartlyRecorded is returned by Resume for a batch whose enqueue
	// stopped before it had recorded every row of its dataset.
	ErrPartlyRecorded = errors.New("the batch's rows are only partly recorded")
	// ErrNoBatch is returned by Resume for a batch the ledger does not hold.
	ErrNoBatch = errors.New("no such batch in the ledger")
)

func badConfig(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrBadConfig, kind, fmt.Sprintf(format, args...))
}

// knownProviders are the providers a worker can be configured with: the
// provider table's.
var knownProviders = llm.ProviderNames()

// Check reports what is wrong with cfg's settings, template or schema, as
// Run and DryRun would before they read a row or reach the ledger or the
// queue (an error matching ErrBadConfig): a command calls it first, so that
// a typo is a usage error even when Postgres or NATS is down.
func Check(cfg Config) error {
	_, _, err := cfg.prepare()
	return err
}

// prepare fills in cfg's defaults and checks its settings, parses its
// template and hashes its schema.
func (cfg *Config) prepare() (*template.Template, string, error) {
	cfg.Chunk = cmp.Or(cfg.Chunk, ChunkDefault)
	cfg.MaxPromptBytes = cmp.Or(cfg.MaxPromptBytes, pipeline.MaxPromptBytesDefault)
	cfg.Mode = cmp.Or(cfg.Mode, fixpoint.ModePrompt)
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, "", err
	}
	tmpl, err := template.New("prompt").Option("missingkey=error").Funcs(templateFuncs).Parse(cfg.Template)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadTemplate, err)
	}
	if f := cfg.DocumentField; f != "" && templateUsesField(tmpl.Tree.Root, f) {
		return nil, "", fmt.Errorf("%w: %w: the template uses .%s, the --document-field: every request gives the document in a block of its own, so leave it out of the template", ErrBadConfig, ErrBadTemplate, f)
	}
	if name := undefinedTemplate(tmpl, tmpl.Tree.Root); name != "" {
		// It failed on every row: a dataset of bad rows, exit 1.
		return nil, "", fmt.Errorf("%w: %w: the template calls {{template %q}}, which it does not define", ErrBadConfig, ErrBadTemplate, name)
	}
	schemaHash, err := store.SchemaHash(cfg.Schema)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	canonical, _ := store.Canonical(cfg.Schema)
	cfg.schemaBytes = len(canonical)
	if n := cfg.schemaBytes + len(cfg.System); n >= cfg.MaxPromptBytes {
		// A 200,000-value enum made a 1.3 MB system prompt for every call.
		return nil, "", fmt.Errorf("%w: %w: the schema is %d bytes compacted (with the system prompt, %d): the workers send it with every request, and it leaves no room for a prompt under their limit of %d bytes (--max-prompt-bytes)",
			ErrBadConfig, ErrBadSchema, cfg.schemaBytes, n, cfg.MaxPromptBytes)
	}
	return tmpl, schemaHash, nil
}

// MaxBatchName is the longest batch name, in bytes.
const MaxBatchName = 128

// CheckBatchName returns an error naming what is wrong with a new batch's
// name: it is 1 to MaxBatchName ASCII letters, digits, '.', '_' and '-'. A
// job's id is the batch name, ':' and the row's id, so a ':' in a name
// would let two batches claim one id ("a:b" + "c" and "a" + "b:c"); spaces,
// control characters and very long names break output lines and indexes.
func CheckBatchName(name string) error {
	if name == "" || len(name) > MaxBatchName {
		return fmt.Errorf("%w: batch name %q: want 1 to %d characters", ErrBadConfig, name, MaxBatchName)
	}
	if name[0] == '-' || name[0] == '.' {
		// "-x" reads as a flag to report and worker.
		return fmt.Errorf("%w: batch name %q: start it with a letter, digit or '_'", ErrBadConfig, name)
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: batch name %q has %q: use letters, digits, '.', '_' and '-' only (a job id is the batch name, ':' and the row's id)", ErrBadConfig, name, r)
		}
	}
	return nil
}

func (c *Config) validate() error {
	if c.Batch != "" {
		if err := CheckBatchName(c.Batch); err != nil {
			return err
		}
	}
	var missing []string
	if c.Batch == "" {
		missing = append(missing, "batch")
	}
	if len(c.Schema) == 0 {
		missing = append(missing, "schema")
	}
	if c.Template == "" {
		missing = append(missing, "template")
	}
	if c.Provider == "" {
		missing = append(missing, "provider")
	}
	if c.Model == "" {
		missing = append(missing, "model")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrBadConfig, strings.Join(missing, ", "))
	}
	if c.Format != FormatJSONL && c.Format != FormatCSV {
		return fmt.Errorf("%w: format %q is not jsonl or csv", ErrBadConfig, c.Format)
	}
	if !slices.Contains(knownProviders, c.Provider) {
		return fmt.Errorf("%w: provider %q is not one of %s", ErrBadConfig, c.Provider, strings.Join(knownProviders, ", "))
	}
	sch, err := validate.Compile(c.Schema)
	if err != nil {
		return fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	// A rule that does not compile would fail every value: said before any
	// call, naming the rule.
	if _, err := rules.Compile(c.Schema); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	if _, err := fixpoint.ParseEvidenceMode(string(c.Evidence)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if err := c.checkDocuments(); err != nil {
		return err
	}
	if err := CheckEvidenceSource(c.evidenceSource(), c.documentInput()); err != nil {
		return err
	}
	// A schema no value satisfies would be paid for MaxAttempts times per
	// row and never be valid.
	if err := sch.Satisfiable(); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	if err := llm.CheckSchemaMode(c.Provider, c.Mode, c.Schema); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrBadConfig, ErrBadSchema, err)
	}
	if c.MaxPromptBytes < 0 {
		return fmt.Errorf("%w: max prompt bytes %d is negative", ErrBadConfig, c.MaxPromptBytes)
	}
	if c.MaxBadRows < -1 {
		return fmt.Errorf("%w: max bad rows %d: want -1 (no limit) or more", ErrBadConfig, c.MaxBadRows)
	}
	// Each attempt reserves its prompt and its max tokens of output against
	// the token budget before it is sent: a budget no bigger than the
	// output alone fails every job before its first call.
	if b, m := c.Limits.TokenBudget, cmp.Or(c.MaxTokens, fixpoint.MaxTokensDefault); b > 0 && b <= m {
		return fmt.Errorf("%w: token budget %d is not above max tokens %d: each attempt reserves its max tokens of output and its prompt against the budget, so no job could make a call", ErrBadConfig, b, m)
	}
	e := queue.Envelope{V: queue.EnvelopeVersion, JobID: "x", Prompt: "x", SchemaHash: "x", Provider: c.Provider, Model: c.Model, Mode: c.Mode, Limits: c.Limits,
		MaxTokens: c.MaxTokens, Temp: c.Temp, Delivery: c.Delivery}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return nil
}

// BatchSettings are the settings a batch is recorded with (batches.settings)
// and every job of it runs with: enqueue --resume takes them from the
// ledger, and a re-run must give the same ones.
type BatchSettings struct {
	Provider  string          `json:"provider"`
	Model     string          `json:"model"`
	Mode      fixpoint.Mode   `json:"mode"`
	MaxTokens int             `json:"max_tokens"`
	Temp      *float64        `json:"temperature,omitempty"`
	Limits    fixpoint.Limits `json:"limits"`
	// System is the user's system prompt, "" for none.
	System string `json:"system,omitempty"`
	// SchemaHash is the hash of the schema's canonical form.
	SchemaHash string `json:"schema_hash,omitempty"`
	// TemplateSHA256 is the SHA-256 (hex) of the prompt template.
	TemplateSHA256 string `json:"template_sha256,omitempty"`
	// IDField and Format say how rows became jobs.
	IDField string `json:"id_field,omitempty"`
	Format  string `json:"format,omitempty"`
	// Delivery is "batch" for batch delivery, "flex" for the flex tier,
	// "" for realtime.
	Delivery string `json:"delivery,omitempty"`
	// DeadlineSeconds is the deadline asked for (batch delivery), and
	// DeadlineAt (unix seconds) the deadline it set when the batch was
	// first enqueued.
	DeadlineSeconds int64 `json:"deadline_seconds,omitempty"`
	DeadlineAt      int64 `json:"deadline_at,omitempty"`
	// CacheKey is the prompt-cache key of the batch's requests, "" when
	// prompt caching is off.
	CacheKey string `json:"cache_key,omitempty"`
	// Stream and Subject are where the batch's jobs are published, ""
	// for the defaults: --resume and requeue publish there.
	Stream  string `json:"stream,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Evidence and EvidenceSource say how the workers check a job's values
	// against its source.
	Evidence       fixpoint.EvidenceMode `json:"evidence,omitempty"`
	EvidenceSource string                `json:"evidence_source,omitempty"`
	// DocumentField and DocumentFileField say where the jobs' documents
	// came from, "" for jobs of none.
	DocumentField     string `json:"document_field,omitempty"`
	DocumentFileField string `json:"document_file_field,omitempty"`
}

func (c *Config) settings(schemaHash string) BatchSettings {
	sum := sha256.Sum256([]byte(c.Template))
	s := BatchSettings{Provider: c.Provider, Model: c.Model, Mode: c.Mode, MaxTokens: c.MaxTokens, Temp: c.Temp,
		Limits: c.Limits, System: c.System, SchemaHash: schemaHash, TemplateSHA256: hex.EncodeToString(sum[:]),
		IDField: c.IDField, Format: c.Format}
	s.Evidence, _ = fixpoint.ParseEvidenceMode(string(c.Evidence))
	s.EvidenceSource = c.evidenceSource()
	s.DocumentField, s.DocumentFileField = c.DocumentField, c.DocumentFileField
	switch c.Delivery {
	case queue.DeliveryBatch:
		d := cmp.Or(c.Deadline, DeadlineDefault)
		s.Delivery, s.DeadlineSeconds, s.DeadlineAt = queue.DeliveryBatch, int64(d/time.Second), time.Now().Add(d).Unix()
	case queue.DeliveryFlex:
		s.Delivery = queue.DeliveryFlex
	}
	if c.PromptCache {
		s.CacheKey = CacheKey(c.Batch, schemaHash)
	}
	if q, def := c.Queue.WithDefaults(), (queue.Config{}).WithDefaults(); q.Stream != def.Stream || q.Subject != def.Subject {
		s.Stream, s.Subject = q.Stream, q.Subject
	}
	return s
}

// queue is q with the stream and subject the batch was enqueued on, when
// it recorded them.
func (s BatchSettings) queue(q queue.Config) queue.Config {
	if s.Stream != "" {
		q.Stream, q.Subject = s.Stream, s.Subject
	}
	return q
}

// CacheKey is the prompt-cache key of a batch's requests: stable per batch
// and schema (OpenAI routes requests with the same key and prefix to the
// same cache), and within its 64 characters.
func CacheKey(batch, schemaHash string) string {
	sum := sha256.Sum256([]byte(batch + "\x00" + schemaHash))
	return "fixpoint-" + hex.EncodeToString(sum[:12])
}

// checkDelivery checks the delivery asked for. Where the provider has no
// batch API, it refuses, or falls back to realtime with a warning when
// cfg.BatchFallback asks: realtime costs twice as much, which nobody should
// learn from a warning after the batch ran.
func checkDelivery(ctx context.Context, cfg *Config, prog *Progress) error {
	switch cfg.BatchFallback {
	case "", BatchFallbackRealtime:
	default:
		return fmt.Errorf("%w: batch fallback %q: want realtime, or none", ErrBadConfig, cfg.BatchFallback)
	}
	cannot := func(why string) error {
		if cfg.BatchFallback != BatchFallbackRealtime {
			return fmt.Errorf("%w: %s, so the batch cannot be delivered in provider batches: enqueue it with --delivery realtime, or add --batch-fallback realtime to run it realtime at the full price", ErrBadConfig, why)
		}
		prog.Warnings = append(prog.Warnings, why+": the batch is delivered realtime (--batch-fallback realtime), at the full price")
		cfg.Delivery = queue.DeliveryRealtime
		return nil
	}
	switch cfg.Delivery {
	case "", queue.DeliveryRealtime:
		cfg.Delivery = queue.DeliveryRealtime
		return nil
	case queue.DeliveryFlex:
		if !llm.HasFlex(cfg.Provider) {
			return fmt.Errorf("%w: delivery flex: provider %s has no flex tier", ErrBadConfig, cfg.Provider)
		}
		return nil
	case queue.DeliveryBatch:
	default:
		return fmt.Errorf("%w: delivery %q is not realtime, batch or flex", ErrBadConfig, cfg.Delivery)
	}
	if cfg.Deadline < 0 {
		return fmt.Errorf("%w: deadline %s is negative", ErrBadConfig, cfg.Deadline)
	}
	if cfg.Cap.Capped() {
		// A cap reserves each call before it is sent; a provider batch's
		// requests are sent together and priced when they come back.
		return fmt.Errorf("%w: a spend cap (--max-cost-usd, --max-total-tokens) holds realtime calls only: enqueue the batch with --delivery realtime, or without a cap", ErrBadConfig)
	}
	if cfg.Deadline > 0 && cfg.Deadline <= wave.DeadlineMarginDefault {
		// Workers start no wave within their margin of the deadline.
		prog.Warnings = append(prog.Warnings, fmt.Sprintf("--deadline %s is within the workers' default --wave-deadline-margin (%s): unless they run with a smaller one, no wave starts and every job runs realtime at the full price",
			cfg.Deadline, wave.DeadlineMarginDefault))
	}
	if !llm.HasBatchAPI(cfg.Provider) {
		return cannot(fmt.Sprintf("%s has no batch API", cfg.Provider))
	}
	if cfg.ProbeBatch != nil {
		if err := cfg.ProbeBatch(ctx); errors.Is(err, llm.ErrBatchUnsupported) {
			return cannot(fmt.Sprintf("the %s server has no batch endpoints (%v)", cfg.Provider, err))
		} else if err != nil {
			prog.Warnings = append(prog.Warnings, fmt.Sprintf("could not check the %s server's batch endpoints (%v): if it has none, workers run the batch realtime", cfg.Provider, err))
		}
	}
	return nil
}

// SchemaWarnings says, one line each, what of a schema that Check accepts
// no reply can satisfy: a declared property or the items of an array whose
// schema no value satisfies. The schema as a whole is satisfiable (the
// property may be left out), but a model fills in what a schema declares,
// and each such reply fails every attempt. A schema that does not compile
// has none (Check refuses it).
func SchemaWarnings(schema []byte) []string {
	sch, err := validate.Compile(schema)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range sch.UnsatisfiableParts() {
		var se *validate.SchemaError
		if errors.As(e, &se) {
			out = append(out, fmt.Sprintf("the schema at %s: %v, and every repair attempt is paid for: fix that part, or remove it", se.Location, se.Err))
		}
	}
	return out
}

// recorded reports whether s holds the settings enqueue records. A batch a
// worker made, for a job message of a batch the ledger did not hold (its
// rejection or result), has none.
func (s BatchSettings) recorded() bool {
	return s.Provider != "" && s.Model != "" && s.TemplateSHA256 != "" && s.SchemaHash != ""
}

// envelope is the part of every job message the settings decide.
func (s BatchSettings) envelope(batch string) queue.Envelope {
	return queue.Envelope{V: queue.EnvelopeVersion, Batch: batch, System: s.System, SchemaHash: s.SchemaHash,
		Provider: s.Provider, Model: s.Model, Mode: s.Mode, MaxTokens: s.MaxTokens, Temp: s.Temp, Limits: s.Limits,
		Delivery: s.Delivery, Deadline: s.DeadlineAt, CacheKey: s.CacheKey, Evidence: s.Evidence, EvidenceSource: s.EvidenceSource}
}

// diff lists, one per line, how now differs from the recorded settings s.
func (s BatchSettings) diff(now BatchSettings) []string {
	var out []string
	add := func(name, was, is string) {
		if was != is {
			out = append(out, fmt.Sprintf("%s: recorded %s, now %s", name, was, is))
		}
	}
	temp := func(t *float64) string {
		if t == nil {
			return "(provider default)"
		}
		return fmt.Sprint(*t)
	}
	short := func(h string) string {
		if len(h) > 12 {
			return h[:12]
		}
		return cmp.Or(h, "(none)")
	}
	add("provider", s.Provider, now.Provider)
	add("model", s.Model, now.Model)
	add("mode", string(s.Mode), string(now.Mode))
	add("max tokens", fmt.Sprint(s.MaxTokens), fmt.Sprint(now.MaxTokens))
	add("temperature", temp(s.Temp), temp(now.Temp))
	l, n := s.Limits.WithDefaults(), now.Limits.WithDefaults()
	add("max attempts", fmt.Sprint(l.MaxAttempts), fmt.Sprint(n.MaxAttempts))
	add("strategy", string(l.Strategy), string(n.Strategy))
	add("feedback", string(l.Feedback), string(n.Feedback))
	add("token budget", fmt.Sprint(l.TokenBudget), fmt.Sprint(n.TokenBudget))
	add("retry budget", fmt.Sprint(l.RetryBudget), fmt.Sprint(n.RetryBudget))
	add("truncation max tokens", fmt.Sprint(l.TruncationMaxTokens), fmt.Sprint(n.TruncationMaxTokens))
	add("coerce", string(l.Coerce), string(n.Coerce))
	add("merge model", cmp.Or(l.MergeModel, "(none)"), cmp.Or(n.MergeModel, "(none)"))
	evidenceOf := func(m fixpoint.EvidenceMode) string { e, _ := fixpoint.ParseEvidenceMode(string(m)); return string(e) }
	add("evidence", evidenceOf(s.Evidence), evidenceOf(now.Evidence))
	add("evidence source", cmp.Or(s.EvidenceSource, fixpoint.EvidenceSourceRow), cmp.Or(now.EvidenceSource, fixpoint.EvidenceSourceRow))
	add("document field", cmp.Or(s.DocumentField, "(none)"), cmp.Or(now.DocumentField, "(none)"))
	add("document file field", cmp.Or(s.DocumentFileField, "(none)"), cmp.Or(now.DocumentFileField, "(none)"))
	add("system prompt (sha256)", short(hashText(s.System)), short(hashText(now.System)))
	add("schema (hash)", short(s.SchemaHash), short(now.SchemaHash))
	add("template (sha256)", short(s.TemplateSHA256), short(now.TemplateSHA256))
	add("id field", cmp.Or(s.IDField, "(line number)"), cmp.Or(now.IDField, "(line number)"))
	if s.IDField == "" || now.IDField == "" {
		// Ids are line numbers, which a CSV header shifts: the same
		// rows in another format are other jobs. With an id field the
		// format is only how the rows were read, and each row is
		// compared with its job.
		add("format", s.Format, now.Format)
	}
	def := (queue.Config{}).WithDefaults()
	add("stream", cmp.Or(s.Stream, def.Stream), cmp.Or(now.Stream, def.Stream))
	add("subject", cmp.Or(s.Subject, def.Subject), cmp.Or(now.Subject, def.Subject))
	add("delivery", cmp.Or(s.Delivery, queue.DeliveryRealtime), cmp.Or(now.Delivery, queue.DeliveryRealtime))
	if s.Delivery == queue.DeliveryBatch && now.Delivery == queue.DeliveryBatch {
		add("deadline", (time.Duration(s.DeadlineSeconds) * time.Second).String(), (time.Duration(now.DeadlineSeconds) * time.Second).String())
	}
	onOff := func(k string) string {
		if k == "" {
			return "off"
		}
		return "on"
	}
	add("prompt cache", onOff(s.CacheKey), onOff(now.CacheKey))
	return out
}

// capDiff says how the cap asked for differs from the batch's, "" when
// it does not.
func capDiff(was, now store.Cap) string {
	f := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprintf("$%g", *p)
	}
	i := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	var d []string
	if f(was.MaxCostUSD) != f(now.MaxCostUSD) {
		d = append(d, fmt.Sprintf("max cost: recorded %s, now %s", f(was.MaxCostUSD), f(now.MaxCostUSD)))
	}
	if i(was.MaxTotalTokens) != i(now.MaxTotalTokens) {
		d = append(d, fmt.Sprintf("max total tokens: recorded %s, now %s", i(was.MaxTotalTokens), i(now.MaxTotalTokens)))
	}
	return strings.Join(d, "; ")
}

// undefinedTemplate returns the name of a template node calls that t does
// not define, or "".
func undefinedTemplate(t *template.Template, node parse.Node) string {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return ""
		}
		for _, c := range n.Nodes {
			if name := undefinedTemplate(t, c); name != "" {
				return name
			}
		}
	case *parse.TemplateNode:
		if t.Lookup(n.Name) == nil {
			return n.Name
		}
	case *parse.IfNode:
		return cmp.Or(undefinedTemplate(t, n.List), undefinedTemplate(t, n.ElseList))
	case *parse.RangeNode:
		return cmp.Or(undefinedTemplate(t, n.List), undefinedTemplate(t, n.ElseList))
	case *parse.WithNode:
		return cmp.Or(undefinedTemplate(t, n.List), undefinedTemplate(t, n.ElseList))
	}
	return ""
}

func hashText(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ParseBatchSettings reads a batch's recorded settings.
func ParseBatchSettings(b *store.Batch) (BatchSettings, error) {
	var s BatchSettings
	if len(b.Settings) > 0 {
		if err := json.Unmarshal(b.Settings, &s); err != nil {
			return s, fmt.Errorf("batch %s settings: %w", b.Name, err)
		}
	}
	if s.Mode == "" {
		s.Mode = fixpoint.ModePrompt
	}
	s.Limits = s.Limits.WithDefaults()
	return s, nil
}

// Enqueue reads a dataset, renders each row through the template, records
// the schema, the batch and every job in the ledger, then publishes the jobs.
//
// It works in two passes and reads the dataset once. The first pass
// renders and checks every row (parse errors, template errors, ids missing
// or repeated with other content, messages over the queue's size limit,
// prompts over the workers' limit) and records nothing: with more bad rows
// than MaxBadRows it returns ErrTooManyBadRows and nothing of the run is in
// the ledger or the queue. It keeps the jobs that passed in a temporary
// file (in $TMPDIR, two to three times the dataset's size), and the
// second pass records and publishes them from there, in chunks.
// repair.Job ids are stable, so running it twice records and publishes nothing
// new; a run cut short is finished by running it again or with Resume. A
// batch enqueued again must be given the settings it was recorded with
// (ErrSettingsChanged names the differences).
func Run(ctx context.Context, js jetstream.JetStream, ledger Ledger, cfg Config, data io.Reader) (Progress, error) {
	var prog Progress
	if cfg.Resume {
		cfg.Chunk = cmp.Or(cfg.Chunk, ChunkDefault)
		cfg.MaxPromptBytes = cmp.Or(cfg.MaxPromptBytes, pipeline.MaxPromptBytesDefault)
		return prog, resume(ctx, js, ledger, cfg, &prog)
	}
	run := &enqueueRun{js: js, ledger: ledger, cfg: &cfg, prog: &prog}
	if err := run.open(ctx, data); err != nil {
		return prog, err
	}
	if err := run.compareRecorded(ctx); err != nil {
		return prog, err
	}
	// Pass 1: check every row; record and publish nothing.
	chk, datasetSHA, err := run.checkRows(ctx, data)
	if err != nil {
		return prog, err
	}
	defer chk.jobs.close()
	if err := run.recordBatch(ctx, chk); err != nil {
		return prog, err
	}
	// Pass 2: record and publish the rows that passed.
	if err := run.recordRows(ctx, chk, datasetSHA); err != nil {
		return prog, err
	}
	return prog, nil
}

// enqueueRun is what the steps of one Run share.
type enqueueRun struct {
	js         jetstream.JetStream
	ledger     Ledger
	cfg        *Config
	prog       *Progress
	schemaHash string
	settings   BatchSettings
	r          *renderer
}

// open prepares the template and schema, makes sure the stream exists,
// checks the delivery, and builds the renderer of the rows.
func (run *enqueueRun) open(ctx context.Context, data io.Reader) error {
	cfg, prog := run.cfg, run.prog
	tmpl, schemaHash, err := cfg.prepare()
	if err != nil {
		return err
	}
	if data == nil {
		return fmt.Errorf("%w: no dataset", ErrBadConfig)
	}
	stream, created, err := queue.EnsureStream(ctx, run.js, cfg.Queue)
	if err != nil {
		return queueErr(err)
	}
	if q, def := cfg.Queue.WithDefaults(), (queue.Config{}).WithDefaults(); created && (q.Stream != def.Stream || q.Subject != def.Subject) {
		prog.Warnings = append(prog.Warnings, fmt.Sprintf("stream %s did not exist: this run created it, and no worker reads it unless started with --stream %s --subject %s", q.Stream, q.Stream, q.Subject))
	}
	if err := checkDelivery(ctx, cfg, prog); err != nil {
		return err
	}
	run.schemaHash = schemaHash
	run.settings = cfg.settings(schemaHash)
	base := run.settings.envelope(cfg.Batch)
	run.r = &renderer{cfg: cfg, tmpl: tmpl, base: base, maxMsg: messageLimit(run.js, stream, cfg.Queue)}
	return nil
}

// compareRecorded, when the batch was enqueued before, has the first pass
// compare each row with its recorded job, and refuses settings other than
// those the batch was recorded with.
func (run *enqueueRun) compareRecorded(ctx context.Context) error {
	cfg, ledger := run.cfg, run.ledger
	b, err := ledger.Batch(ctx, cfg.Batch)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	run.r.ledger = ledger
	// Other settings are said before the rows are read: with another
	// template every row's prompt differs from the one recorded, and
	// the rows' errors hid the settings that caused them.
	was, err := ParseBatchSettings(b)
	if err != nil || !was.recorded() {
		return nil
	}
	d := was.diff(run.settings)
	if len(d) == 0 {
		return nil
	}
	// A cap asked for that differs is listed too: said alone later, it
	// came as a second refusal once these were fixed.
	if cfg.Cap.Capped() {
		sp, err := ledger.BatchSpend(ctx, cfg.Batch)
		if err != nil {
			return err
		}
		if cd := capDiff(sp.Cap, cfg.Cap); cd != "" {
			d = append(d, cd+" (change a cap with enqueue cap)")
		}
	}
	return settingsChanged(cfg.Batch, d)
}

// checkRows is the first pass: it checks every row and records and
// publishes nothing. It refuses a dataset with more bad rows than
// MaxBadRows allows, with no rows, or with no good row. datasetSHA is
// the digest of the whole dataset, which names it: a later run of the
// same dataset can clear the mark of a killed one (see recordRows). The
// jobs that passed are kept in chk.jobs, for the second pass; the
// caller closes it.
func (run *enqueueRun) checkRows(ctx context.Context, data io.Reader) (chk *checkResult, datasetSHA string, err error) {
	cfg, prog := run.cfg, run.prog
	prog.Phase = PhaseCheck
	digest := sha256.New()
	jobs, err := newCheckedJobs()
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if err != nil {
			jobs.close()
		}
	}()
	// A document's text, or the file to read it from, is kept with the
	// first job that names it; the jobs after name it by its hash.
	kept := map[string]bool{}
	keep := func(p *lineJob, _ bool) error {
		c := checkedJob{line: p.line, rows: p.rows, id: p.job.ID, prompt: p.job.Prompt, source: p.source, metadata: p.job.Metadata}
		if h := p.job.DocumentHash; h != "" {
			c.docHash = h
			if !kept[h] {
				kept[h] = true
				c.docText, c.docPath = p.doc.text, p.doc.path
			}
		}
		return jobs.add(&c)
	}
	chk, err = run.r.check(ctx, io.TeeReader(data, digest), prog, checkOpts{onJob: keep})
	if err != nil {
		return nil, "", err
	}
	chk.jobs = jobs
	if err := chk.unknownFields(cfg); err != nil {
		return nil, "", err
	}
	if cfg.MaxBadRows >= 0 && len(prog.Bad) > cfg.MaxBadRows {
		return nil, "", fmt.Errorf("%w: %s, first: %v; nothing was recorded or published",
			ErrTooManyBadRows, overMaxBadRows(len(prog.Bad), cfg.MaxBadRows), prog.Bad[0])
	}
	if prog.Rows == 0 {
		return nil, "", ErrNoRows
	}
	if len(prog.Bad) == prog.Rows {
		// --max-bad-rows allowed them all: a batch of no job would pass
		// every check after it (report wait, worker --drain --batch).
		return nil, "", fmt.Errorf("%w: %s, first: %v; nothing was recorded or published", ErrTooManyBadRows, everyRowBad(prog.Rows), prog.Bad[0])
	}
	return chk, hex.EncodeToString(digest.Sum(nil)), nil
}

// recordBatch records the schema and the batch, or checks the recorded
// batch's cap and settings (adopting them for a batch a worker made).
func (run *enqueueRun) recordBatch(ctx context.Context, chk *checkResult) error {
	cfg, ledger := run.cfg, run.ledger
	if _, err := ledger.PutSchema(ctx, cfg.Schema); err != nil {
		return err
	}
	raw, _ := json.Marshal(run.settings)
	// The cap goes in with the batch: a batch recorded without the cap
	// asked for would refuse the same command run again.
	params := store.BatchParams{Name: cfg.Batch, Settings: raw, InputColumns: chk.columns, SchemaHash: run.schemaHash, Cap: cfg.Cap}
	created, b, err := ledger.CreateBatch(ctx, params)
	if err != nil || created {
		return err
	}
	if cfg.Cap.Capped() {
		sp, err := ledger.BatchSpend(ctx, cfg.Batch)
		if err != nil {
			return err
		}
		if d := capDiff(sp.Cap, cfg.Cap); d != "" {
			return fmt.Errorf("%w: %w: batch %s: %s (change a cap with enqueue cap)", ErrBadConfig, ErrSettingsChanged, cfg.Batch, d)
		}
	}
	was, err := ParseBatchSettings(b)
	if err != nil {
		return err
	}
	if !was.recorded() {
		// Made by a worker, not by enqueue: adopt the settings.
		params.TotalJobs = b.TotalJobs
		return ledger.PutBatch(ctx, params)
	}
	if d := was.diff(run.settings); len(d) > 0 {
		return settingsChanged(cfg.Batch, d)
	}
	// The deadline was set when the batch was first enqueued.
	run.settings.DeadlineAt = was.DeadlineAt
	run.r.base.Deadline = was.DeadlineAt
	return nil
}

// recordRows is the second pass: it records and publishes the rows that
// passed. The run says so, and that it is alive, until every row is
// recorded: a run killed in between leaves its mark, and --resume and the
// batch's verdict refuse a batch that holds only part of its dataset.
func (run *enqueueRun) recordRows(ctx context.Context, chk *checkResult, datasetSHA string) error {
	cfg, ledger, prog := run.cfg, run.ledger, run.prog
	token, err := ledger.StartRecording(ctx, cfg.Batch, datasetSHA)
	if err != nil {
		return err
	}
	stopBeat := beatRecording(ctx, ledger, token)
	finished := false
	defer func() {
		stopBeat()
		if !finished {
			// Failed or interrupted: partly recorded now, not once the
			// heartbeat has been missed a minute.
			_ = ledger.StopRecording(context.WithoutCancel(ctx), token)
		}
	}()
	bad := len(prog.Bad)
	prog.Phase, prog.Rows = PhasePublish, 0
	if err := run.r.publish(ctx, run.js, ledger, chk.jobs, chk.rowsRead, recordingRun{token, datasetSHA}, prog); err != nil {
		return err
	}
	if len(prog.Bad) > bad && cfg.MaxBadRows >= 0 && len(prog.Bad) > cfg.MaxBadRows {
		return fmt.Errorf("%w: %s were refused by the queue while publishing, and the dataset has %s: %v",
			ErrTooManyBadRows, plural(len(prog.Bad)-bad, "row"), overMaxBadRows(len(prog.Bad), cfg.MaxBadRows), prog.Bad[bad])
	}
	stopBeat()
	badIDs := make([]string, bad)
	for i, b := range prog.Bad[:bad] {
		badIDs[i] = b.JobID
	}
	if _, err := ledger.FinishRecording(ctx, cfg.Batch, token, datasetSHA, prog.Rows, badIDs); err != nil {
		return err
	}
	finished = true
	return nil
}

// beatRecording says every store.RecordingBeat that the run of token is
// alive, until the returned stop is called (more than once is fine). A
// beat that fails is tried again at the next.
func beatRecording(ctx context.Context, ledger Ledger, token string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(store.RecordingBeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = ledger.BeatRecording(ctx, token)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// settingsChanged refuses a run of batch with settings other than those
// it was recorded with, listing the differences.
func settingsChanged(batch string, diff []string) error {
	return fmt.Errorf("%w: %w: batch %s:\n  %s\n(enqueue the changed jobs as a new batch, or use enqueue requeue to run them again with other settings)",
		ErrBadConfig, ErrSettingsChanged, batch, strings.Join(diff, "\n  "))
}

// queueErr makes a queue setting that cannot work (a subject the stream
// does not take, a name NATS refuses) a configuration error: the command's
// usage, not the queue's failure.
func queueErr(err error) error {
	var se *fixpoint.SettingError
	if errors.Is(err, queue.ErrSubjectNotInStream) || errors.As(err, &se) {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return err
}

// resume publishes what an interrupted run left unpublished and republishes
// the jobs the stream lost, with the batch's recorded settings.
func resume(ctx context.Context, js jetstream.JetStream, ledger Ledger, cfg Config, prog *Progress) error {
	if cfg.Batch == "" {
		return fmt.Errorf("%w: missing batch", ErrBadConfig)
	}
	b, err := ledger.Batch(ctx, cfg.Batch)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNoBatch, cfg.Batch)
	}
	if err != nil {
		return err
	}
	settings, err := ParseBatchSettings(b)
	if err != nil {
		return err
	}
	if !settings.recorded() {
		return fmt.Errorf("batch %s has no recorded settings (a worker made it, for job messages enqueue did not record): run the original enqueue command again instead of --resume", cfg.Batch)
	}
	if rec := b.Recording; rec != nil {
		// --resume publishes what is recorded: it would have called a
		// batch holding 1,000 of its 3,000 rows done.
		if rec.Live {
			return fmt.Errorf("%w: batch %s: an enqueue is recording its rows now (since %s; or it was killed less than a minute ago): let it finish, it publishes them itself",
				ErrPartlyRecorded, cfg.Batch, rec.Since.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("%w: batch %s: the enqueue that began recording its rows at %s stopped before it had recorded them all; run that enqueue command again with its dataset (rows already recorded are skipped), not --resume",
			ErrPartlyRecorded, cfg.Batch, rec.Since.UTC().Format(time.RFC3339))
	}
	// A batch whose first run failed before it recorded a job (its insert
	// refused) has nothing to resume: saying "0 jobs" and exiting 0 let a
	// nightly chain carry on as if it were done.
	if n, err := ledger.RefreshBatchTotal(ctx, cfg.Batch); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("%w: %s: the run that created it recorded none; run the original enqueue command again, without --resume", ErrEmptyBatch, cfg.Batch)
	}
	cfg.Queue = settings.queue(cfg.Queue) // where its jobs went first
	stream, _, err := queue.EnsureStream(ctx, js, cfg.Queue)
	if err != nil {
		return queueErr(err)
	}
	prog.Phase = PhasePublish
	bases := newRunBases(ctx, ledger, cfg.Batch, settings.envelope(cfg.Batch))
	if _, err := ledger.ReclaimPublishing(ctx, cfg.Batch, "", ""); err != nil {
		return err
	}
	if err := publishUnpublished(ctx, js, ledger, cfg, bases, prog); err != nil {
		return err
	}
	return republishLost(ctx, js, stream, ledger, cfg, bases, prog)
}

// republishLost publishes again the jobs the ledger says are published and
// still queued but the stream does not hold: its data directory was lost,
// or it was purged. A job finished meanwhile is acked unpaid by the worker
// that gets it, so a job published twice costs nothing.
func republishLost(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, ledger Ledger, cfg Config, bases *runBases, prog *Progress) error {
	held, err := heldJobs(ctx, stream, cfg.Queue.WithDefaults().Subject, cfg.Batch)
	if err != nil {
		return err
	}
	after := ""
	for {
		jobs, err := ledger.PublishedQueued(ctx, cfg.Batch, after, cfg.Chunk)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		for i := range jobs {
			if held[jobs[i].ID] == max(jobs[i].Run, 1) {
				continue
			}
			base, err := bases.base(jobs[i].Run)
			if err != nil {
				return err
			}
			env := jobEnvelope(base, &jobs[i])
			if err := queue.Republish(ctx, js, cfg.Queue, &env); err != nil {
				return err
			}
			prog.Republished++
		}
		after = jobs[len(jobs)-1].ID
		if cfg.ProgressFunc != nil {
			cfg.ProgressFunc(*prog)
		}
	}
}

// heldJobs returns the jobs of batch the stream holds a message for, with
// the run of that message, reading every message it holds on subject
// (headers and body) one request at a time: a work-queue stream allows no
// second consumer to scan it with. Only enqueue --resume calls it.
func heldJobs(ctx context.Context, stream jetstream.Stream, subject, batch string) (map[string]int, error) {
	held := map[string]int{}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return held, nil
	}
	wantBatch := queue.MsgID(batch)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read stream message %d: %w", seq, err)
		}
		seq = m.Sequence + 1
		if hb := m.Header.Get(queue.BatchHeader); hb != "" && hb != wantBatch {
			continue
		}
		id, run := "", 1
		if env, _ := queue.DecodeEnvelope(m.Data); env != nil && env.JobID != "" {
			if env.Batch != batch {
				continue
			}
			id, run = env.JobID, env.RunOrFirst()
		} else if hid, ok := queue.JobIDFromMsgID(m.Header.Get(jetstream.MsgIDHeader)); ok {
			id = hid
		}
		if id != "" && run > held[id] {
			held[id] = run
		}
	}
	return held, nil
}

// messageLimit is the largest job message the queue takes: the stream's
// max message size, and the server's max payload less room for headers.
func messageLimit(js jetstream.JetStream, stream jetstream.Stream, q queue.Config) int {
	limit := int(q.WithDefaults().MaxMsgSize)
	if info := stream.CachedInfo(); info != nil && info.Config.MaxMsgSize > 0 {
		limit = int(info.Config.MaxMsgSize)
	}
	if nc := js.Conn(); nc != nil {
		if mp := int(nc.MaxPayload()); mp > 0 {
			limit = min(limit, mp)
		}
	}
	return limit
}

// renderer turns rows into jobs, the same in both passes.
type renderer struct {
	cfg    *Config
	tmpl   *template.Template
	base   queue.Envelope
	maxMsg int
	// ledger is set when the batch was enqueued before: the first pass
	// then compares each row with the job the ledger holds under its id.
	ledger jobHolder
}

// jobHolder tells which of some jobs the ledger holds, and how they differ.
type jobHolder interface {
	HeldJobs(ctx context.Context, jobs []store.NewJob) ([]store.HeldJob, error)
}

// checkResult is what the first pass learned.
type checkResult struct {
	// jobs are the jobs that passed, when the caller keeps them
	// (checkRows).
	jobs *checkedJobs
	// rowsRead counts the rows read, bad ones too.
	rowsRead int
	// columns are the dataset's columns in file order.
	columns []string
	// missing counts the rows the template failed on for want of a field,
	// by field.
	missing map[string]int
	// missingPath counts the rows the template failed on for want of a
	// nested field, by its path (".customer.nmae"); rows counts the rows
	// read.
	missingPath map[string]int
	rows        int
	// rendered counts the rows the template rendered.
	rendered int
	// limited: the pass stopped at its limit before the end of the data.
	limited bool
}

// noEntry is text/template's error for a field a row does not have, with
// missingkey=error: "at <.customer.name>: map has no entry for key "name"".
var noEntry = regexp.MustCompile(`(?:at <([^>]*)>: )?map has no entry for key ("(?:[^"\\]|\\.)*")`)

// missingFieldOf returns the top-level field a template execution error
// says a row lacks, or "" (also for a nil error). A key missing deeper
// ({{.customer.name}} on a row whose customer is {}) is not a field of the
// dataset: such a row is a bad row, but other rows may well have it.
func missingFieldOf(err error) string {
	if err == nil {
		return ""
	}
	m := noEntry.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	f, uerr := strconv.Unquote(m[2])
	if uerr != nil {
		return ""
	}
	// The key missing must be the path's first: .customer.name with no
	// customer is a field of the dataset missing; with no name, not.
	if m[1] != "" && m[1] != "."+f && !strings.HasPrefix(m[1], "."+f+".") {
		return ""
	}
	return f
}

// unknownFields reports a field the template, --id-field,
// --document-field or --document-file-field names that no row of the
// dataset has: a typo or the wrong dataset, not bad rows.
func (c *checkResult) unknownFields(cfg *Config) error {
	idField := cfg.IDField
	has := map[string]bool{}
	for _, col := range c.columns {
		has[col] = true
	}
	quoted := make([]string, len(c.columns))
	for i, col := range c.columns {
		quoted[i] = strconv.Quote(col) // a name " text" shows its space
	}
	cols := strings.Join(quoted, ", ")
	if len(c.columns) == 1 && strings.ContainsAny(c.columns[0], ";\t|") {
		cols += " (one column: the CSV is read with ',' between fields; is this file separated by ';', '|' or tabs?)"
	}
	if idField != "" && !has[idField] && len(c.columns) > 0 {
		return fmt.Errorf("%w: --id-field %q: no row of the dataset has it (its fields: %s)", ErrBadConfig, idField, cols)
	}
	for _, f := range []struct{ flag, name string }{{"--document-field", cfg.DocumentField}, {"--document-file-field", cfg.DocumentFileField}} {
		if f.name != "" && !has[f.name] && len(c.columns) > 0 {
			return fmt.Errorf("%w: %s %q: no row of the dataset has it (its fields: %s)", ErrBadConfig, f.flag, f.name, cols)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(c.missing)) {
		if !has[f] && len(c.columns) > 0 {
			hint := ""
			for _, col := range c.columns {
				if strings.HasPrefix(col, f+".") {
					// A CSV header "customer.name" is one field: the
					// template's dots read nested fields.
					hint = fmt.Sprintf("; a field named %q is written {{index . %q}}", col, col)
					break
				}
			}
			return fmt.Errorf("%w: %w: the template uses .%s, which no row of the dataset has (its fields: %s%s)", ErrBadConfig, ErrBadTemplate, f, cols, hint)
		}
	}
	// A nested field no row has: a typo too ({{.customer.nmae}} made
	// every row a bad row). No row rendered, and rows failed for want of
	// it (others may lack its parent); a pass cut short by --limit has not
	// seen every row.
	if c.rendered == 0 && !c.limited && len(c.missingPath) > 0 {
		paths := slices.Sorted(maps.Keys(c.missingPath))
		p := slices.MaxFunc(paths, func(a, b string) int { return c.missingPath[a] - c.missingPath[b] })
		return fmt.Errorf("%w: %w: the template uses %s, which no row of the dataset has (a typo? its fields: %s)", ErrBadConfig, ErrBadTemplate, p, cols)
	}
	return nil
}

// missingPathOf returns the path of the nested field a template execution
// error says a row lacks (".customer.nmae"), or "".
func missingPathOf(err error) string {
	if err == nil {
		return ""
	}
	m := noEntry.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return ""
	}
	return m[1]
}

// numID is the first numeric id of a value: its line and how it was
// written.
type numID struct {
	line int
	text string
}

// idSeen is what the first pass keeps of each id: the line that used it
// first and a digest of that row's content.
type idSeen struct {
	line    int
	content [16]byte
}

// unreadableError is a dataset that cannot be read on from line.
type unreadableError struct {
	line int
	err  error
}

func (e unreadableError) Error() string        { return fmt.Sprintf("read line %d: %v", e.line, e.err) }
func (e unreadableError) Unwrap() error        { return e.err }
func (e unreadableError) Is(target error) bool { return target == ErrUnreadable }

// checkOpts are what a caller of check adds to the first pass: limit stops
// it after that many rows (0: every row); onJob is called, in line order,
// for every row that would become a job or is one already (held: the
// ledger has it as given), and its error ends the pass.
type checkOpts struct {
	limit int
	onJob func(p *lineJob, held bool) error
}

// check is the first pass: it reads every row (up to opts.limit), renders
// it, and marks bad the rows that cannot be jobs: unreadable, failing the
// template, an id repeated with other content, too big for the queue or
// the workers, or (r.ledger set: the batch exists) an id the ledger holds
// with other content.
func (r *renderer) check(ctx context.Context, data io.Reader, prog *Progress, opts checkOpts) (*checkResult, error) {
	res := &checkResult{missing: map[string]int{}, missingPath: map[string]int{}}
	seen := idIndex{ids: map[[16]byte]idSeen{}, numIDs: map[string]numID{}}
	var pending []lineJob
	pendingDocs := 0 // the bytes of the documents' text in pending
	rows := newRowReader(r.cfg.Format, data)
	folded := 0 // rows that look like rows folded into a field
	badJob := func(line int, id string, err error) {
		prog.Bad = append(prog.Bad, BadRow{Line: line, Err: err, JobID: id})
	}
	bad := func(line int, err error) { badJob(line, "", err) }
	stopped := func(line int, err error) error {
		return fmt.Errorf("stopped while checking the rows (at line %d): nothing of the batch was recorded or published: %w", line, err)
	}
	line := 0 // the last read
	limited, err := r.renderRows(ctx, rows, opts.limit, func(p *renderedRow) error {
		prog.Rows++
		line = p.line
		if p.readErr != nil {
			bad(p.line, p.readErr)
			return nil
		}
		res.rows++
		if p.suspect != "" {
			if folded++; folded <= 5 {
				prog.Warnings = append(prog.Warnings, fmt.Sprintf("line %d: %s", p.line, p.suspect))
			}
		}
		if err := p.renderErr; err != nil {
			if f := missingFieldOf(err); f != "" {
				res.missing[f]++
			} else if path := missingPathOf(err); path != "" {
				res.missingPath[path]++
			}
			// The id it would have had, if it has one: a later run of
			// a fixed file may record it.
			badJob(p.line, r.jobID(p.row, p.line), err)
			return nil
		}
		res.rendered++
		if r.cfg.IDField != "" {
			repeat, err := seen.see(p.row[r.cfg.IDField], p.job.ID, p.key, p.content, p.line, r.cfg.Batch)
			switch {
			case err != nil:
				bad(p.line, err)
				return nil
			case repeat:
				prog.Repeated++
				return nil
			}
		}
		if p.fitErr != nil {
			badJob(p.line, p.job.ID, p.fitErr)
			return nil
		}
		if r.ledger != nil || opts.onJob != nil {
			pending = append(pending, lineJob{line: p.line, rows: prog.Rows, job: p.job, source: p.source, doc: p.doc})
			// The documents' text waiting with them is bounded as the
			// second pass bounds a chunk's.
			if p.doc != nil {
				pendingDocs += len(p.doc.text)
			}
			if len(pending) == r.cfg.Chunk || pendingDocs >= DocumentChunkBytes {
				if err := r.settle(ctx, pending, bad, opts.onJob); err != nil {
					return err
				}
				if pendingDocs > 0 {
					clear(pending)
				}
				pending, pendingDocs = pending[:0], 0
			}
		}
		if prog.Rows%r.cfg.Chunk == 0 {
			if err := ctx.Err(); err != nil {
				return stopped(p.line, err)
			}
			if r.cfg.ProgressFunc != nil {
				r.cfg.ProgressFunc(*prog)
			}
		}
		return nil
	})
	if err == nil && ctx.Err() != nil {
		// The reader stopped at it.
		err = stopped(line, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	res.limited = limited
	if folded > 5 {
		prog.Warnings = append(prog.Warnings, moreFolded(folded-5))
	}
	if err := r.settle(ctx, pending, bad, opts.onJob); err != nil {
		return nil, err
	}
	// Rows compared with the ledger in chunks are reported in line order.
	slices.SortStableFunc(prog.Bad, func(a, b BadRow) int { return a.Line - b.Line })
	res.columns = rows.columns()
	res.rowsRead = prog.Rows
	if r.cfg.ProgressFunc != nil {
		r.cfg.ProgressFunc(*prog)
	}
	return res, nil
}

// moreFolded is the warning of the n rows past the first five that look
// like rows folded into a field.
func moreFolded(n int) string {
	holds := plural(n, "more row") + " hold"
	if n == 1 {
		holds += "s"
	}
	return holds + " lines that read as rows of the file"
}

// idIndex holds the ids of the file's rows so far: each id's first line
// and content digest, and the first spelling of each numeric id.
type idIndex struct {
	ids    map[[16]byte]idSeen
	numIDs map[string]numID // numeric ids by value
}

// see records the job id (its row's id field holds idValue; key is
// idKey's digest of it, content contentDigest's of the job) and says
// whether the row repeats an earlier one exactly; a repeat with other
// content, or a numeric id written another way, is an error naming the
// first line.
func (x *idIndex) see(idValue any, id string, key, content [16]byte, line int, batch string) (repeat bool, err error) {
	// 5 and 5.0 (a float column, as pandas writes one) are one id, but
	// written two ways in one file they are a mistake worth naming.
	if n, ok := idValue.(json.Number); ok {
		if v, ok := new(big.Rat).SetString(string(n)); ok {
			canon := v.RatString()
			if first, ok := x.numIDs[canon]; ok && first.text != string(n) {
				return false, fmt.Errorf("id %s is the number of line %d's id %s, written another way: write the ids one way (they are one id)", n, first.line, first.text)
			}
			if _, ok := x.numIDs[canon]; !ok {
				x.numIDs[canon] = numID{line: line, text: string(n)}
			}
		}
	}
	if first, ok := x.ids[key]; ok {
		if first.content != content {
			return false, fmt.Errorf("id %q repeats line %d with different content", strings.TrimPrefix(id, batch+":"), first.line)
		}
		return true, nil
	}
	x.ids[key] = idSeen{line: line, content: content}
	return false, nil
}

// idKey is the digest of a job id that idIndex keeps.
func idKey(id string) [16]byte {
	sum := sha256.Sum256([]byte(id))
	var k [16]byte
	copy(k[:], sum[:16])
	return k
}

// lineJob is a row's job, its line, how many rows the pass had read at
// it, and its evidence source and document (render's).
type lineJob struct {
	line, rows int
	job        store.NewJob
	source     string
	doc        *rowDocument
}

// settle decides the pending rows against the ledger, when the batch
// exists: a row whose id the ledger holds with other content is bad (a
// batch keeps the rows it was first given, and the second pass would skip
// it in silence); the others go to onJob.
func (r *renderer) settle(ctx context.Context, pending []lineJob, bad func(int, error), onJob func(*lineJob, bool) error) error {
	if len(pending) == 0 {
		return nil
	}
	held := map[string]store.HeldJob{}
	if r.ledger != nil {
		jobs := make([]store.NewJob, 0, len(pending))
		for _, p := range pending {
			jobs = append(jobs, p.job)
		}
		found, err := r.ledger.HeldJobs(ctx, jobs)
		if err != nil {
			return err
		}
		for _, h := range found {
			held[h.ID] = h
		}
	}
	for i := range pending {
		p := &pending[i]
		h, isHeld := held[p.job.ID]
		if isHeld && h.Metadata && !h.Prompt && sameAsText(h.HeldMetadata, p.job.Metadata) {
			// The same row read from another format: a CSV gives
			// every value as text.
			h.Metadata = false
		}
		if isHeld && h.Differs(r.cfg.Batch) {
			bad(p.line, r.heldError(h))
			continue
		}
		if onJob != nil {
			if err := onJob(p, isHeld); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameAsText reports whether two input rows hold the same values once
// each is written as a CSV cell would hold it: a number as written, a
// boolean as true or false, null or a field left out as empty, an object or
// array as JSON. A row enqueued from JSONL and again from CSV is then the
// same row, and a changed value is still a change.
func sameAsText(a, b json.RawMessage) bool {
	var ma, mb map[string]any
	if decodeNumbers(a, &ma) != nil || decodeNumbers(b, &mb) != nil {
		return false
	}
	for k, v := range ma {
		if cellText(v) != cellText(mb[k]) {
			return false
		}
	}
	for k, v := range mb {
		if _, ok := ma[k]; !ok && cellText(v) != "" {
			return false
		}
	}
	return true
}

func decodeNumbers(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// cellText is v as a CSV cell holds it.
func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// heldError says how the job the ledger holds under a row's id differs.
func (r *renderer) heldError(h store.HeldJob) error {
	id := strings.TrimPrefix(h.ID, r.cfg.Batch+":")
	var differ []string
	if h.Prompt {
		differ = append(differ, "prompt")
	}
	if h.Metadata || !h.Prompt && !h.Document {
		differ = append(differ, "input row")
	}
	if h.Document {
		differ = append(differ, "document")
	}
	what := strings.Join(differ, " and ")
	switch {
	case h.Batch != r.cfg.Batch:
		return fmt.Errorf("job id %q is taken by batch %q", h.ID, h.Batch)
	case r.cfg.IDField == "":
		return fmt.Errorf("the %s differs from line %s as batch %s first had it (without --id-field a row's id is its line number, so a line inserted or removed shifts the rows after it; enqueue the file as a new batch)", what, id, r.cfg.Batch)
	default:
		return fmt.Errorf("id %q was enqueued in batch %s before with another %s (a batch keeps the rows it was first given; enqueue changed rows as a new batch)", id, r.cfg.Batch, what)
	}
}

// fits checks that a job's message, with its evidence source (render's),
// fits the queue and its prompt the workers' limit.
func (r *renderer) fits(job *store.NewJob, source string, docBytes int) error {
	n := len(job.Prompt) + len(r.base.System) + r.cfg.schemaBytes
	if n > r.cfg.MaxPromptBytes {
		return fmt.Errorf("prompt is %d bytes with the system prompt and the %d-byte schema, over the workers' limit of %d (--max-prompt-bytes)", n, r.cfg.schemaBytes, r.cfg.MaxPromptBytes)
	}
	// At least what the worker reserves for the first attempt (a quarter
	// of its bytes, and the output allowance; repair.EstimateTokens).
	// Every call sends the job's document too.
	in, what := n, "prompt, system prompt and schema"
	if job.DocumentHash != "" {
		in, what = n+docBytes, "prompt, document, system prompt and schema"
	}
	if b, m := r.cfg.Limits.TokenBudget, cmp.Or(r.cfg.MaxTokens, fixpoint.MaxTokensDefault); b > 0 && (in+3)/4+m > b {
		return fmt.Errorf("its first attempt needs about %d tokens (%s about %d, max tokens %d), over the token budget of %d: the job would fail before its first call",
			(in+3)/4+m, what, (in+3)/4, m, b)
	}
	env := envelopeWith(r.base, job, source)
	data, err := queue.EncodeEnvelope(&env)
	if err != nil {
		return err
	}
	// Headers: Nats-Msg-Id and the batch, with room for their names.
	size := len(data) + len(queue.MsgID(job.ID)) + len(queue.MsgID(job.Batch)) + 64
	if size > r.maxMsg {
		return fmt.Errorf("job is %d bytes as a queue message (prompt %d bytes), over the queue's limit of %d bytes", size, len(job.Prompt), r.maxMsg)
	}
	return nil
}

func contentDigest(job *store.NewJob) [16]byte {
	h := sha256.New()
	h.Write([]byte(job.Prompt))
	h.Write([]byte{0})
	h.Write(job.Metadata)
	if job.DocumentHash != "" {
		h.Write([]byte{0})
		h.Write([]byte(job.DocumentHash))
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// recordingRun is the recording mark of the run that calls publish: its
// token and its dataset's digest.
type recordingRun struct {
	token, dataset string
}

// publish is the second pass: it reads back the jobs the first kept
// (checked, of a pass that read rows rows), records them a chunk at a
// time, and publishes each chunk once it is recorded. A chunk is published
// in the background while the next is read and recorded, so that the
// ledger and the queue work at once; a chunk is never published before its
// rows are committed.
// A chunk of new jobs is recorded as published (store.InsertJobsPublishing)
// and the jobs the queue did not take marked unpublished after: no update
// of every job. Before it ends, it publishes what the ledger holds
// unpublished, with the jobs of the chunks that runs gone, or replaced by
// this one, left unsettled.
func (r *renderer) publish(ctx context.Context, js jetstream.JetStream, ledger Ledger, checked *checkedJobs, rows int, rec recordingRun, prog *Progress) (err error) {
	if err := checked.rewind(); err != nil {
		return err
	}
	chunk := make([]store.NewJob, 0, r.cfg.Chunk)
	sources := make([]string, 0, r.cfg.Chunk) // each job's evidence source
	// docs are the documents the chunk's jobs name first (the first pass
	// kept each with the first job), docBytes their text.
	var docs []store.Document
	docBytes := 0
	bases := newRunBases(ctx, ledger, r.cfg.Batch, r.base)
	var bg backgroundPublish
	var copying []*backgroundRecord // the chunks being recorded, oldest first
	defer func() {
		// A chunk recorded as published that this run will not publish
		// is marked unpublished; one still on its way to the queue is
		// waited for: what the queue took of it is marked published
		// before the run returns.
		for _, c := range copying {
			c.abandon(ctx, ledger)
		}
		if werr := bg.wait(r.cfg, prog); err == nil {
			err = werr
		}
	}()
	// recorded hands the oldest chunk being recorded to published.
	recorded := func() error {
		if len(copying) == 0 {
			return nil
		}
		c := copying[0]
		copying = copying[1:]
		return r.published(ctx, js, ledger, c, &bg, bases, prog)
	}
	// flush records the chunk in the background, beside the one before
	// (copiesAtOnce): the next is rendered meanwhile.
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if len(copying) == copiesAtOnce {
			if err := recorded(); err != nil {
				return err
			}
		}
		// A job names a document that a chunk before it may hold: its
		// chunk is recorded once those before have stored theirs.
		var after *backgroundRecord
		if r.cfg.documentInput() && len(copying) > 0 {
			after = copying[len(copying)-1]
		}
		copying = append(copying, startRecord(ctx, ledger, rec.token, chunk, sources, docs, after))
		chunk, sources = make([]store.NewJob, 0, r.cfg.Chunk), make([]string, 0, r.cfg.Chunk)
		docs, docBytes = nil, 0
		return nil
	}
	for {
		c, err := checked.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		prog.Rows = c.rows
		job := r.job(c.id, c.line, c.prompt, c.metadata)
		job.DocumentHash = c.docHash
		chunk, sources = append(chunk, job), append(sources, c.source)
		if c.docHash != "" && (c.docText != "" || c.docPath != "") {
			doc, err := r.keptDocument(&c)
			if err != nil {
				return err
			}
			docs = append(docs, doc)
			docBytes += len(doc.Body)
		}
		if len(chunk) == r.cfg.Chunk || docBytes >= DocumentChunkBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	prog.Rows = rows
	if err := flush(); err != nil {
		return err
	}
	for len(copying) > 0 {
		if err := recorded(); err != nil {
			return err
		}
	}
	if err := bg.wait(r.cfg, prog); err != nil {
		return err
	}
	if _, err := ledger.ReclaimPublishing(ctx, r.cfg.Batch, rec.token, rec.dataset); err != nil {
		return err
	}
	// Jobs an interrupted run left unpublished whose rows were in no
	// chunk read back above.
	return publishUnpublished(ctx, js, ledger, *r.cfg, bases, prog)
}

// published takes over chunk c of publish once it is recorded: it starts
// its publishing (on bg) when every job of it is new, as it is, without
// reading it back; a chunk with jobs recorded before has what the ledger
// holds unpublished published instead.
func (r *renderer) published(ctx context.Context, js jetstream.JetStream, ledger Ledger, c *backgroundRecord, bg *backgroundPublish, bases *runBases, prog *Progress) error {
	<-c.done
	if c.err != nil {
		return c.err
	}
	prog.Recorded += c.n
	prog.Existing += len(c.jobs) - c.n
	if err := bg.wait(r.cfg, prog); err != nil {
		// The chunk is recorded and will not be published by this
		// run: it is recorded unpublished.
		return errors.Join(err, ledger.SettlePublishing(context.WithoutCancel(ctx), c.pc, jobIDs(c.jobs)))
	}
	if c.n < len(c.jobs) {
		// Some were recorded before: publish what the ledger holds
		// unpublished, this chunk's new jobs and any an interrupted
		// run left.
		if err := publishUnpublished(ctx, js, ledger, *r.cfg, bases, prog); err != nil {
			return err
		}
		if r.cfg.ProgressFunc != nil {
			r.cfg.ProgressFunc(*prog)
		}
		return nil
	}
	bg.start(ctx, js, ledger, *r.cfg, bases, c.pc, c.jobs, c.sources)
	return nil
}

// copiesAtOnce is how many chunks the second pass records at once, each
// on a connection of its own: two copied 1.35 times the rows a second of
// one (BenchmarkCopyPublish/copy2), the ledger's work of a row being
// mostly its own (indexes, foreign keys), not the batch's rollup row
// that the two take turns to update.
const copiesAtOnce = 2

// backgroundRecord is a chunk being recorded (Ledger.InsertJobsPublishing)
// in a goroutine of its own; done is closed once n, pc and err are set.
// stored is closed once its documents, and those of the chunk it was
// recorded after, are stored (docsErr nil) or will not be.
type backgroundRecord struct {
	jobs    []store.NewJob
	sources []string
	done    chan struct{}
	n       int
	pc      store.PublishingChunk
	err     error
	stored  chan struct{}
	docsErr error
}

// startRecord records jobs, the chunk of the run of token, in the
// background: docs first (those the ledger does not hold), then the jobs,
// once after, the chunk started before it (nil: none), has stored its
// documents and those of the chunks before. A document comes with the
// first job that names it, and so in one chunk only: a job is never
// recorded naming a document the ledger lacks, even with two chunks
// recorded at once.
func startRecord(ctx context.Context, ledger Ledger, token string, jobs []store.NewJob, sources []string, docs []store.Document, after *backgroundRecord) *backgroundRecord {
	c := &backgroundRecord{jobs: jobs, sources: sources, done: make(chan struct{}), stored: make(chan struct{})}
	go func() {
		defer close(c.done)
		_, c.docsErr = ledger.PutDocuments(ctx, docs)
		if c.docsErr == nil && after != nil {
			<-after.stored
			if after.docsErr != nil {
				c.docsErr = errors.New("the chunk before it did not store its documents")
			}
		}
		close(c.stored)
		if c.err = c.docsErr; c.err != nil {
			return
		}
		c.n, c.pc, c.err = ledger.InsertJobsPublishing(ctx, token, jobs)
	}()
	return c
}

// abandon waits for the chunk, which the run stops before publishing, to
// be recorded, and marks it unpublished: the same command run again, or
// --resume, publishes it.
func (c *backgroundRecord) abandon(ctx context.Context, ledger Ledger) {
	<-c.done
	if c.err == nil && c.pc != 0 {
		// A failure leaves the chunk unsettled, which the next run
		// reclaims.
		_ = ledger.SettlePublishing(context.WithoutCancel(ctx), c.pc, jobIDs(c.jobs))
	}
}

// backgroundPublish publishes one recorded chunk at a time in a goroutine
// of its own, counting into a Progress of its own that wait adds to the
// run's.
type backgroundPublish struct {
	done chan publishedChunk
}

type publishedChunk struct {
	prog Progress
	err  error
}

// start publishes jobs in the background; the previous chunk must have
// been waited for. bases is only read for jobs of the first run, which
// every chunk read from the dataset holds.
func (b *backgroundPublish) start(ctx context.Context, js jetstream.JetStream, ledger Ledger, cfg Config, bases *runBases, pc store.PublishingChunk, jobs []store.NewJob, sources []string) {
	done := make(chan publishedChunk, 1)
	b.done = done
	go func() {
		var p Progress
		err := publishJobs(ctx, js, ledger, cfg, bases, pc, jobs, sources, &p)
		done <- publishedChunk{p, err}
	}()
}

// wait waits for the chunk being published, if any, adds its counts to
// prog and reports the progress.
func (b *backgroundPublish) wait(cfg *Config, prog *Progress) error {
	if b.done == nil {
		return nil
	}
	res := <-b.done
	b.done = nil
	prog.Published += res.prog.Published
	prog.Duplicates += res.prog.Duplicates
	prog.Bad = append(prog.Bad, res.prog.Bad...)
	if cfg.ProgressFunc != nil {
		cfg.ProgressFunc(*prog)
	}
	return res.err
}

// publishUnpublished publishes every job of the batch the ledger holds as
// recorded but not published. A job the queue refuses for its size is
// recorded rejected with the reason, so it never blocks a later run.
func publishUnpublished(ctx context.Context, js jetstream.JetStream, ledger Ledger, cfg Config, bases *runBases, prog *Progress) error {
	for {
		jobs, err := ledger.Unpublished(ctx, cfg.Batch, cfg.Chunk)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		if err := publishJobs(ctx, js, ledger, cfg, bases, 0, jobs, nil, prog); err != nil {
			return err
		}
	}
}

// publishJobs publishes jobs, recorded and not yet published, with their
// acknowledgements awaited a window at a time (queue.PublishAll), and marks
// published those the stream took; or, for the jobs of pc (recorded as
// published), marks unpublished those it did not take and settles pc. A
// job the queue refuses for its size is recorded rejected. sources, when
// not nil, are the jobs' evidence sources (render's). Any other job the
// queue did not take stays recorded and unpublished, and the error says
// how many: running the same command again, or enqueue --resume,
// publishes them.
func publishJobs(ctx context.Context, js jetstream.JetStream, ledger Ledger, cfg Config, bases *runBases, pc store.PublishingChunk, jobs []store.NewJob, sources []string, prog *Progress) error {
	envs := make([]queue.Envelope, len(jobs))
	for i := range jobs {
		base, err := bases.base(jobs[i].Run)
		if err != nil {
			return err
		}
		if sources != nil {
			envs[i] = envelopeWith(base, &jobs[i], sources[i])
		} else {
			envs[i] = jobEnvelope(base, &jobs[i])
		}
	}
	res, perr := queue.PublishAll(ctx, js, cfg.Queue, envs)
	var ids, unpublished []string // taken by the stream, not taken
	var failed []error
	for i, r := range res {
		if r.Err != nil {
			unpublished = append(unpublished, jobs[i].ID)
		}
		switch {
		case errors.Is(r.Err, fixpoint.ErrBadJob):
			if _, err := ledger.Reject(ctx, store.Rejection{JobID: jobs[i].ID, Batch: cfg.Batch, Reason: r.Err.Error()}); err != nil {
				// pc stays unsettled: the next run reclaims it whole.
				return err
			}
			prog.Bad = append(prog.Bad, BadRow{Line: jobs[i].RowNo, Err: r.Err})
		case r.Err != nil:
			failed = append(failed, r.Err)
		case r.Duplicate:
			prog.Duplicates++
			ids = append(ids, jobs[i].ID)
		default:
			prog.Published++
			ids = append(ids, jobs[i].ID)
		}
	}
	// What the stream took is marked even when the context ended: a job
	// marked is never published again by --resume.
	if pc != 0 {
		if err := ledger.SettlePublishing(context.WithoutCancel(ctx), pc, unpublished); err != nil {
			return err
		}
	} else if err := ledger.MarkPublished(context.WithoutCancel(ctx), ids); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if len(failed) > 0 {
		return fmt.Errorf("batch %s: %s recorded but not published: the queue did not take %s (a full stream takes more once workers drain it); they stay in the ledger unpublished, and running the same command again publishes them; first: %w",
			cfg.Batch, plural(len(failed), "job"), pronoun(len(failed)), failed[0])
	}
	return nil
}

// jobIDs are the ids of jobs.
func jobIDs(jobs []store.NewJob) []string {
	ids := make([]string, len(jobs))
	for i := range jobs {
		ids[i] = jobs[i].ID
	}
	return ids
}

// jobEnvelope is the message of one job: the batch's settings, and the
// job's own id, prompt, schema and (when its row has them) provider, model
// and mode. The input row is not sent: the ledger has it.
func jobEnvelope(base queue.Envelope, job *store.NewJob) queue.Envelope {
	var source string
	if rowEvidence(base) {
		// render refused a row its source cannot be made of.
		source, _ = evidence.JobSource(job.Metadata, job.Prompt, base.EvidenceSource)
	}
	return envelopeWith(base, job, source)
}

// evidenceOn reports whether the jobs of base check evidence, and their
// messages carry a source.
func evidenceOn(base queue.Envelope) bool {
	return base.Evidence != "" && base.Evidence != fixpoint.EvidenceOff
}

// rowEvidence reports whether the jobs of base check evidence against a
// source made of their row and prompt, which their messages carry (a
// document is loaded by the workers).
func rowEvidence(base queue.Envelope) bool {
	return evidenceOn(base) && base.EvidenceSource != fixpoint.EvidenceSourceDocument
}

// envelopeWith is jobEnvelope with the job's evidence source computed
// already (render's).
func envelopeWith(base queue.Envelope, job *store.NewJob, source string) queue.Envelope {
	env := base
	env.JobID = job.ID
	env.RowNo = job.RowNo
	env.Prompt = job.Prompt
	env.SchemaHash = cmp.Or(job.SchemaHash, base.SchemaHash)
	env.Provider = cmp.Or(job.Provider, base.Provider)
	env.Model = cmp.Or(job.Model, base.Model)
	env.Mode = cmp.Or(fixpoint.Mode(job.Mode), base.Mode)
	if job.Strategy != "" {
		env.Limits.Strategy = fixpoint.Strategy(job.Strategy)
	}
	if job.Run > 1 {
		env.Run = job.Run
	}
	if rowEvidence(env) {
		env.Source = source
	}
	env.Document = job.DocumentHash
	if c := job.Continue; c != nil && c.Reply != "" {
		var errs []fixpoint.ValidationError
		_ = json.Unmarshal(c.Errors, &errs)
		env.Messages = []fixpoint.Message{{Role: fixpoint.RoleUser, Content: job.Prompt}, {Role: fixpoint.RoleAssistant, Content: c.Reply},
			{Role: fixpoint.RoleUser, Content: repair.Feedback(env.Limits.WithDefaults().Feedback, c.Class, errs)}}
	}
	return env
}

// render renders a row's job, and its evidence source when the batch
// checks evidence ("" when not): the message carries it, and what the
// first pass keeps of its document (nil for a job of none). The first
// pass runs it on several goroutines at once (renderRows): it changes
// nothing of r, and what must see the rows one after another goes in
// check.
func (r *renderer) render(row map[string]any, line int) (job store.NewJob, source string, doc *rowDocument, err error) {
	var docHash string
	if r.cfg.documentInput() {
		var text, path string
		if row, text, path, err = r.document(row); err != nil {
			return store.NewJob{}, "", nil, err
		}
		docHash, doc = store.DocumentHash(text), &rowDocument{bytes: len(text), path: path}
		if path == "" {
			doc.text = text
		}
	}
	// The output is capped: a small template can loop ({{range 300000000}})
	// into more memory than the machine has, and a prompt over the workers'
	// limit is refused anyway (the slack leaves room for the spaces the
	// prompt is trimmed of).
	buf := cappedBuffer{limit: r.cfg.MaxPromptBytes + 64<<10}
	if err := r.tmpl.Execute(&buf, templateView(row)); err != nil {
		if errors.Is(err, errRenderCap) {
			return store.NewJob{}, "", nil, fmt.Errorf("the template renders a prompt over the workers' limit of %d bytes (--max-prompt-bytes; rendering stopped at %d)",
				r.cfg.MaxPromptBytes, buf.limit)
		}
		if f := missingFieldOf(err); f != "" {
			// Other rows have it (a field no row has is a typo, said
			// before any row): an optional field.
			return store.NewJob{}, "", nil, fmt.Errorf("render template: %w (for a field some rows lack, {{with index . %q}}...{{end}} writes it only where it is)", err, f)
		}
		return store.NewJob{}, "", nil, fmt.Errorf("render template: %w", err)
	}
	prompt := strings.TrimSpace(buf.String())
	if prompt == "" {
		return store.NewJob{}, "", nil, errors.New("template rendered an empty prompt")
	}
	id, err := r.rowJobID(row, line)
	if err != nil {
		return store.NewJob{}, "", nil, err
	}
	meta, err := marshalRow(row)
	if err != nil {
		return store.NewJob{}, "", nil, fmt.Errorf("encode row: %w", err)
	}
	if rowEvidence(r.base) {
		// The row as JobSource would read it back from meta: its text is
		// valid UTF-8 without NULs (the reader refuses others), so
		// encoding and decoding it again changes nothing.
		if source, err = evidence.RowSource(row, prompt, r.base.EvidenceSource); err != nil {
			return store.NewJob{}, "", nil, err
		}
	}
	job = r.job(id, line, prompt, meta)
	job.DocumentHash = docHash
	return job, source, doc, nil
}

// job is the job of the row on line: its id, prompt and input row, and
// the batch's settings.
func (r *renderer) job(id string, line int, prompt string, meta json.RawMessage) store.NewJob {
	cfg := r.cfg
	return store.NewJob{ID: id, Batch: cfg.Batch, RowNo: line, SchemaHash: r.base.SchemaHash, Prompt: prompt,
		Provider: cfg.Provider, Model: cfg.Model, Mode: string(cfg.Mode),
		Strategy: string(cfg.Limits.Strategy), Metadata: meta}
}

// rowJobID is the id of a row's job: the batch and the row's --id-field,
// or its line.
func (r *renderer) rowJobID(row map[string]any, line int) (string, error) {
	cfg := r.cfg
	if cfg.IDField == "" {
		return fmt.Sprintf("%s:%d", cfg.Batch, line), nil
	}
	v, err := rowID(row, cfg.IDField)
	if err != nil {
		return "", err
	}
	return cfg.Batch + ":" + v, nil
}

// jobID is rowJobID, "" when the row has no usable id.
func (r *renderer) jobID(row map[string]any, line int) string {
	id, _ := r.rowJobID(row, line)
	return id
}

// errRenderCap is returned by a cappedBuffer past its limit.
var errRenderCap = errors.New("rendered prompt over the limit")

// cappedBuffer is a bytes.Buffer that refuses writes past limit bytes.
type cappedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, errRenderCap
	}
	return b.Buffer.Write(p)
}

// WriteString keeps text/template's string writes on the cap too.
func (b *cappedBuffer) WriteString(s string) (int, error) {
	if b.Len()+len(s) > b.limit {
		return 0, errRenderCap
	}
	return b.Buffer.WriteString(s)
}

// rowID is the text of a row's id field: a string as it is, a number in
// its canonical form (canonicalNumber), so 1, "1", 1.0 and 1e0 are one id:
// a float column (as pandas writes one) or another tool's export of the
// same rows must not make them new jobs, paid for again.
func rowID(row map[string]any, field string) (string, error) {
	v, ok := row[field]
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = canonicalNumber(string(x))
	case nil:
		if ok {
			return "", fmt.Errorf("id field %q is null", field)
		}
		return "", fmt.Errorf("id field %q is missing", field)
	default:
		return "", fmt.Errorf("id field %q must be a string or a number, got %s", field, jsonKind(v))
	}
	switch {
	case strings.TrimSpace(s) == "":
		return "", fmt.Errorf("id field %q is empty", field)
	case len(s) > IDMaxBytes:
		return "", fmt.Errorf("id field %q is %d bytes, over the limit of %d", field, len(s), IDMaxBytes)
	case strings.ContainsRune(s, 0):
		// Postgres text cannot hold it: the batch's insert would fail
		// after the first pass accepted the row.
		return "", fmt.Errorf("id field %q holds a NUL character (\\u0000), which the ledger cannot store in an id", field)
	}
	return s, nil
}

// canonicalNumber returns a JSON number in one form: no exponent, no
// leading or trailing zeros, no "-" on zero (1e2 is 100, 2.50 is 2.5,
// -0.0 is 0). A number that form would write in over 40 digits keeps an
// exponent (1e400), in its shortest form too. Text that is not a JSON
// number is returned as it is.
func canonicalNumber(n string) string {
	s := n
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return n
		}
		mant, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	if whole == "" || strings.Trim(digits, "0123456789") != "" {
		return n
	}
	point := len(whole) + exp // the decimal point's place in digits
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return "0"
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case point > 40 || point < -40:
		out := digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		return sign + out + "e" + strconv.Itoa(point-1)
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits))
	}
	return sign + digits[:point] + "." + digits[point:]
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if strings.TrimSpace(x) == "" {
			return "blank"
		}
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// badRows is "1 bad row" or "n bad rows".
func badRows(n int) string { return plural(n, "bad row") }

// everyRowBad says that every one of the dataset's n rows is bad.
func everyRowBad(n int) string {
	if n == 1 {
		return "the dataset's only row is bad"
	}
	return fmt.Sprintf("every one of the dataset's %d rows is bad", n)
}

// overMaxBadRows says that n bad rows are more than --max-bad-rows (max)
// lets pass, naming the flag and how to let them pass.
func overMaxBadRows(n, max int) string {
	return fmt.Sprintf("%s, over --max-bad-rows %d (raise it to skip them, -1 for no limit)", badRows(n), max)
}

// pronoun is "it" for one, "them" for more.
func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// plural is n and word, with an s unless n is 1: "1 row", "3 rows".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
