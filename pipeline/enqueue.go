package pipeline

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/template"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Dataset formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// EnqueueChunkDefault is how many rows are recorded and published together.
const EnqueueChunkDefault = 500

// EnqueueLedger is what enqueueing needs from the ledger. *store.Store
// satisfies it.
type EnqueueLedger interface {
	PutSchema(ctx context.Context, body []byte) (string, error)
	PutBatch(ctx context.Context, b store.BatchParams) error
	InsertJobs(ctx context.Context, jobs []store.NewJob) (int, error)
	MarkPublished(ctx context.Context, ids []string) error
	Unpublished(ctx context.Context, batch string, limit int) ([]store.NewJob, error)
}

var _ EnqueueLedger = (*store.Store)(nil)

// EnqueueConfig describes one enqueue run.
type EnqueueConfig struct {
	// Batch names the batch; required.
	Batch string
	// Schema is the JSON Schema text; required.
	Schema []byte
	// Template is a Go text/template rendered over each row's fields;
	// required. A field the row lacks is an error for that row.
	Template string
	// System is an optional system prompt for every job.
	System string
	// IDField names the row field whose value makes the job id stable;
	// when empty the id is the batch and the row number.
	IDField string
	// Format is jsonl or csv.
	Format string
	// Provider, Model and Mode are stored on each job. Mode defaults to
	// prompt.
	Provider  string
	Model     string
	Mode      llm.Mode
	MaxTokens int
	Temp      *float64
	Limits    Limits
	// MaxBadRows is how many bad rows are reported and skipped before the
	// run stops; 0 stops at the first, -1 never stops.
	MaxBadRows int
	// Resume republishes jobs of the batch recorded but not yet published
	// (after an interrupted run) instead of reading the dataset.
	Resume bool
	// Chunk defaults to EnqueueChunkDefault.
	Chunk int
	Queue QueueConfig
	// ProgressFunc, when set, is called after each chunk.
	ProgressFunc func(p EnqueueProgress)
}

// BadRow is a dataset row that could not become a job.
type BadRow struct {
	Line int
	Err  error
}

func (b BadRow) Error() string { return fmt.Sprintf("line %d: %v", b.Line, b.Err) }

// EnqueueProgress counts an enqueue run so far.
type EnqueueProgress struct {
	Rows       int      // rows read
	Recorded   int      // new jobs recorded in the ledger
	Published  int      // jobs published to the queue
	Duplicates int      // publishes the queue dropped as already present
	Existing   int      // rows whose job was already recorded by an earlier run
	Bad        []BadRow // rows skipped
}

// ErrBadSchema is returned when the schema does not compile.
var ErrBadSchema = errors.New("enqueue: bad schema")

// ErrTooManyBadRows is returned when bad rows exceed MaxBadRows.
var ErrTooManyBadRows = errors.New("too many bad rows")

func (c *EnqueueConfig) validate() error {
	var missing []string
	if c.Batch == "" {
		missing = append(missing, "batch")
	}
	if len(c.Schema) == 0 {
		missing = append(missing, "schema")
	}
	if c.Template == "" && !c.Resume {
		missing = append(missing, "template")
	}
	if c.Provider == "" {
		missing = append(missing, "provider")
	}
	if c.Model == "" {
		missing = append(missing, "model")
	}
	if len(missing) > 0 {
		return fmt.Errorf("enqueue: missing %s", strings.Join(missing, ", "))
	}
	if c.Format != FormatJSONL && c.Format != FormatCSV {
		return fmt.Errorf("enqueue: format %q is not jsonl or csv", c.Format)
	}
	if _, err := validate.Compile(c.Schema); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	e := Envelope{V: EnvelopeVersion, JobID: "x", Prompt: "x", SchemaHash: "x", Provider: c.Provider, Model: c.Model, Mode: c.Mode, Limits: c.Limits}
	return e.Validate()
}

// Enqueue reads a dataset, renders each row through the template, records
// the schema, the batch and every job in the ledger, then publishes the jobs.
// Job ids are stable, so running it twice records and publishes nothing new;
// a run cut short is finished with Resume. Bad rows are reported with their
// line number and skipped, up to MaxBadRows.
func Enqueue(ctx context.Context, js jetstream.JetStream, ledger EnqueueLedger, cfg EnqueueConfig, data io.Reader) (EnqueueProgress, error) {
	var prog EnqueueProgress
	cfg.Chunk = cmp.Or(cfg.Chunk, EnqueueChunkDefault)
	cfg.Mode = cmp.Or(cfg.Mode, llm.ModePrompt)
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.validate(); err != nil {
		return prog, err
	}
	if _, _, err := EnsureQueue(ctx, js, cfg.Queue); err != nil {
		return prog, err
	}
	hash, err := ledger.PutSchema(ctx, cfg.Schema)
	if err != nil {
		return prog, err
	}
	settings, _ := json.Marshal(map[string]any{
		"provider": cfg.Provider, "model": cfg.Model, "mode": cfg.Mode, "limits": cfg.Limits, "max_tokens": cfg.MaxTokens,
	})
	if err := ledger.PutBatch(ctx, store.BatchParams{Name: cfg.Batch, Settings: settings}); err != nil {
		return prog, err
	}
	base := Envelope{V: EnvelopeVersion, Batch: cfg.Batch, System: cfg.System, SchemaHash: hash,
		Provider: cfg.Provider, Model: cfg.Model, Mode: cfg.Mode, MaxTokens: cfg.MaxTokens, Temp: cfg.Temp, Limits: cfg.Limits}

	if cfg.Resume {
		return prog, publishUnpublished(ctx, js, ledger, cfg, base, &prog)
	}
	tmpl, err := template.New("prompt").Option("missingkey=error").Parse(cfg.Template)
	if err != nil {
		return prog, fmt.Errorf("enqueue: parse template: %w", err)
	}
	rows := newRowReader(cfg.Format, data)
	chunk := make([]store.NewJob, 0, cfg.Chunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := ledger.InsertJobs(ctx, chunk)
		if err != nil {
			return err
		}
		prog.Recorded += n
		prog.Existing += len(chunk) - n
		// Publish what the ledger holds unpublished: this chunk's new jobs,
		// and any left by an interrupted run.
		if err := publishUnpublished(ctx, js, ledger, cfg, base, &prog); err != nil {
			return err
		}
		chunk = chunk[:0]
		if cfg.ProgressFunc != nil {
			cfg.ProgressFunc(prog)
		}
		return nil
	}
	for {
		row, line, err := rows.next()
		if errors.Is(err, io.EOF) {
			break
		}
		prog.Rows++
		if err == nil {
			var job store.NewJob
			job, err = renderJob(tmpl, &cfg, hash, row, line)
			if err == nil {
				chunk = append(chunk, job)
			}
		}
		if err != nil {
			var fatal *fatalReadError
			if errors.As(err, &fatal) {
				return prog, fmt.Errorf("enqueue: read line %d: %w", line, fatal.err)
			}
			prog.Bad = append(prog.Bad, BadRow{Line: line, Err: err})
			if cfg.MaxBadRows >= 0 && len(prog.Bad) > cfg.MaxBadRows {
				if ferr := flush(); ferr != nil {
					return prog, ferr
				}
				return prog, fmt.Errorf("%w: %d bad rows (limit %d), first: %v", ErrTooManyBadRows, len(prog.Bad), cfg.MaxBadRows, prog.Bad[0])
			}
		}
		if len(chunk) == cfg.Chunk {
			if err := flush(); err != nil {
				return prog, err
			}
		}
	}
	if err := flush(); err != nil {
		return prog, err
	}
	return prog, nil
}

func publishUnpublished(ctx context.Context, js jetstream.JetStream, ledger EnqueueLedger, cfg EnqueueConfig, base Envelope, prog *EnqueueProgress) error {
	for {
		jobs, err := ledger.Unpublished(ctx, cfg.Batch, cfg.Chunk)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		ids := make([]string, 0, len(jobs))
		for i := range jobs {
			b := base
			b.SchemaHash = jobs[i].SchemaHash
			if err := publishJob(ctx, js, cfg.Queue, b, &jobs[i], prog); err != nil {
				return err
			}
			ids = append(ids, jobs[i].ID)
		}
		if err := ledger.MarkPublished(ctx, ids); err != nil {
			return err
		}
	}
}

func publishJob(ctx context.Context, js jetstream.JetStream, q QueueConfig, base Envelope, job *store.NewJob, prog *EnqueueProgress) error {
	env := base
	env.JobID = job.ID
	env.RowNo = job.RowNo
	env.Prompt = job.Prompt
	env.Metadata = job.Metadata
	dup, err := Publish(ctx, js, q, &env)
	if err != nil {
		return err
	}
	if dup {
		prog.Duplicates++
	} else {
		prog.Published++
	}
	return nil
}

func renderJob(tmpl *template.Template, cfg *EnqueueConfig, hash string, row map[string]any, line int) (store.NewJob, error) {
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, row); err != nil {
		return store.NewJob{}, fmt.Errorf("render template: %w", err)
	}
	prompt := strings.TrimSpace(buf.String())
	if prompt == "" {
		return store.NewJob{}, errors.New("template rendered an empty prompt")
	}
	id := fmt.Sprintf("%s:%d", cfg.Batch, line)
	if cfg.IDField != "" {
		v, ok := row[cfg.IDField]
		if !ok || v == nil || fmt.Sprint(v) == "" {
			return store.NewJob{}, fmt.Errorf("id field %q is missing or empty", cfg.IDField)
		}
		id = cfg.Batch + ":" + fmt.Sprint(v)
	}
	meta, err := json.Marshal(row)
	if err != nil {
		return store.NewJob{}, fmt.Errorf("encode row: %w", err)
	}
	return store.NewJob{ID: id, Batch: cfg.Batch, RowNo: line, SchemaHash: hash, Prompt: prompt,
		Provider: cfg.Provider, Model: cfg.Model, Mode: string(cfg.Mode),
		Strategy: string(cfg.Limits.Strategy), Metadata: meta}, nil
}

// fatalReadError is a read error after which no further row can be read.
type fatalReadError struct{ err error }

func (e *fatalReadError) Error() string { return e.err.Error() }

// rowReader yields dataset rows as field maps with their 1-based line (JSONL)
// or record (CSV, header excluded, counted from the file's first line) number.
type rowReader struct {
	format string
	sc     *bufio.Scanner
	csv    *csv.Reader
	header []string
	line   int
}

func newRowReader(format string, r io.Reader) *rowReader {
	rr := &rowReader{format: format}
	if format == FormatCSV {
		rr.csv = csv.NewReader(r)
		rr.csv.FieldsPerRecord = -1
		rr.csv.ReuseRecord = false
	} else {
		rr.sc = bufio.NewScanner(r)
		rr.sc.Buffer(make([]byte, 64<<10), 16<<20)
	}
	return rr
}

func (rr *rowReader) next() (map[string]any, int, error) {
	if rr.format == FormatCSV {
		return rr.nextCSV()
	}
	for rr.sc.Scan() {
		rr.line++
		text := bytes.TrimSpace(rr.sc.Bytes())
		if len(text) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var row map[string]any
		if err := dec.Decode(&row); err != nil {
			return nil, rr.line, fmt.Errorf("not a JSON object: %v", err)
		}
		if dec.More() {
			return nil, rr.line, errors.New("more than one JSON value on the line")
		}
		return row, rr.line, nil
	}
	if err := rr.sc.Err(); err != nil {
		return nil, rr.line + 1, &fatalReadError{err}
	}
	return nil, rr.line, io.EOF
}

func (rr *rowReader) nextCSV() (map[string]any, int, error) {
	if rr.header == nil {
		h, err := rr.csv.Read()
		if errors.Is(err, io.EOF) {
			return nil, 0, io.EOF
		}
		if err != nil {
			return nil, 1, &fatalReadError{fmt.Errorf("read CSV header: %w", err)}
		}
		rr.header = append([]string(nil), h...)
		if len(rr.header) > 0 {
			rr.header[0] = strings.TrimPrefix(rr.header[0], "\ufeff")
		}
	}
	rec, err := rr.csv.Read()
	line, _ := rr.csv.FieldPos(0)
	if errors.Is(err, io.EOF) {
		return nil, line, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, pe.StartLine, fmt.Errorf("malformed CSV: %v", pe.Err)
		}
		return nil, line, &fatalReadError{err}
	}
	if len(rec) != len(rr.header) {
		return nil, line, fmt.Errorf("has %d fields, the header has %d", len(rec), len(rr.header))
	}
	row := make(map[string]any, len(rec))
	for i, h := range rr.header {
		row[h] = rec[i]
	}
	return row, line, nil
}

// DetectFormat picks the dataset format from a file name.
func DetectFormat(name string) (string, error) {
	switch {
	case strings.HasSuffix(name, ".jsonl"), strings.HasSuffix(name, ".ndjson"):
		return FormatJSONL, nil
	case strings.HasSuffix(name, ".csv"):
		return FormatCSV, nil
	}
	return "", fmt.Errorf("cannot tell the format of %s from its name; pass --format jsonl or csv", strconv.Quote(name))
}
