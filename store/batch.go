package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// BatchParams describes a batch for PutBatch and CreateBatch.
type BatchParams struct {
	// Name identifies the batch; required.
	Name string
	// Settings holds the batch's provider, model, mode, strategy and limits
	// as a JSON object; nil means {}.
	Settings json.RawMessage
	// TotalJobs is the number of jobs the batch holds.
	TotalJobs int
	// InputColumns are the dataset's column names in the file's order; nil
	// when unknown.
	InputColumns []string
	// SchemaHash is the hash PutSchema returned for the batch's schema; ""
	// when unknown.
	SchemaHash string
	// Cap is the spend cap CreateBatch gives a batch it creates, in the
	// same statement (PutBatch leaves caps to SetCap).
	Cap Cap
}

// Batch is a stored batch.
type Batch struct {
	// Name identifies the batch.
	Name string
	// CreatedAt is when the batch was first recorded.
	CreatedAt time.Time
	// Settings is the JSON object recorded by the last PutBatch.
	Settings json.RawMessage
	// TotalJobs is the number of jobs the batch holds, as last recorded.
	TotalJobs int
	// InputColumns are the dataset's column names in the file's order; nil
	// for batches recorded without them.
	InputColumns []string
	// Recording is set while enqueue runs that began recording the batch's
	// rows have not finished (killed, or still going); nil otherwise.
	Recording *Recording
	// SchemaHash is the batch's schema; "" for batches recorded without it.
	SchemaHash string
}

func (p BatchParams) args() (settings string, cols *string, err error) {
	if strings.TrimSpace(p.Name) == "" {
		return "", nil, fmt.Errorf("%w: empty batch name", ErrInvalid)
	}
	settings = "{}"
	if len(p.Settings) > 0 {
		if !json.Valid(p.Settings) {
			return "", nil, fmt.Errorf("%w: batch %s settings are not JSON", ErrInvalid, p.Name)
		}
		settings = string(p.Settings)
	}
	if p.InputColumns != nil {
		b, _ := json.Marshal(p.InputColumns)
		c := txt(string(b))
		cols = &c
	}
	return settings, cols, nil
}

// PutBatch creates the batch or updates its settings, total, input columns
// and schema; created_at keeps its first value. It is idempotent.
func (s *Store) PutBatch(ctx context.Context, p BatchParams) error {
	settings, cols, err := p.args()
	if err != nil {
		return fmt.Errorf("put batch: %w", err)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	_, err = s.pool.Exec(ctx, `
		INSERT INTO batches (name, settings, total_jobs, input_columns, schema_hash)
		VALUES ($1, $2::jsonb, $3, $4::jsonb, nullif($5, ''))
		ON CONFLICT (name) DO UPDATE SET settings = EXCLUDED.settings, total_jobs = EXCLUDED.total_jobs,
			input_columns = coalesce(EXCLUDED.input_columns, batches.input_columns),
			schema_hash = coalesce(EXCLUDED.schema_hash, batches.schema_hash)`,
		p.Name, settings, p.TotalJobs, cols, p.SchemaHash)
	if err != nil {
		return fmt.Errorf("put batch %s: %w", p.Name, err)
	}
	return nil
}

// CreateBatch records the batch if it does not exist yet and reports
// whether it did. An existing batch is returned as stored, unchanged, so the
// caller can compare its settings with the ones it meant to record.
func (s *Store) CreateBatch(ctx context.Context, p BatchParams) (created bool, b *Batch, err error) {
	settings, cols, err := p.args()
	if err != nil {
		return false, nil, fmt.Errorf("create batch: %w", err)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO batches (name, settings, total_jobs, input_columns, schema_hash, max_cost_usd, max_total_tokens)
		VALUES ($1, $2::jsonb, $3, $4::jsonb, nullif($5, ''), $6, $7)
		ON CONFLICT (name) DO NOTHING`,
		p.Name, settings, p.TotalJobs, cols, p.SchemaHash, p.Cap.MaxCostUSD, p.Cap.MaxTotalTokens)
	if err != nil {
		return false, nil, fmt.Errorf("create batch %s: %w", p.Name, err)
	}
	b, err = s.Batch(ctx, p.Name)
	if err != nil {
		return false, nil, err
	}
	return tag.RowsAffected() == 1, b, nil
}

// Batch returns the named batch, or ErrNotFound.
func (s *Store) Batch(ctx context.Context, name string) (*Batch, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var b Batch
	var settings string
	var cols *string
	var schema *string
	err := s.pool.QueryRow(ctx,
		`SELECT name, created_at, settings::text, total_jobs, input_columns::text, schema_hash FROM batches WHERE name = $1`, name).
		Scan(&b.Name, &b.CreatedAt, &settings, &b.TotalJobs, &cols, &schema)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get batch %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %s: %w", name, err)
	}
	b.Settings = json.RawMessage(settings)
	if cols != nil {
		if err := json.Unmarshal([]byte(*cols), &b.InputColumns); err != nil {
			return nil, fmt.Errorf("get batch %s: input columns: %w", name, err)
		}
	}
	if schema != nil {
		b.SchemaHash = *schema
	}
	if b.Recording, err = s.recording(ctx, name); err != nil {
		return nil, err
	}
	return &b, nil
}

// RefreshBatchTotal sets the batch's total_jobs to the number of its job
// rows and returns it.
func (s *Store) RefreshBatchTotal(ctx context.Context, name string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	return s.refreshTotal(ctx, name)
}

// RecordingBeat is how often an enqueue run recording a batch's rows says
// it is alive; after RecordingStale without a word it counts as killed.
const (
	RecordingBeat  = 15 * time.Second
	RecordingStale = time.Minute
)

// Recording is what the ledger knows of the enqueue runs that began
// recording a batch's rows and have not finished.
type Recording struct {
	// Since is when the oldest of them began.
	Since time.Time
	// Live reports that one of them said it is alive within
	// RecordingStale: rows may still come. Otherwise every one was killed
	// and the batch holds only part of their datasets until the same
	// enqueue is run again.
	Live bool
	// Runs counts them.
	Runs int
	// Dataset is the SHA-256 of the oldest stopped run's dataset (""
	// when every run is live): which file to enqueue again.
	Dataset string
}

func (s *Store) recording(ctx context.Context, batch string) (*Recording, error) {
	var r Recording
	var since *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT min(started_at), coalesce(bool_or(beat_at > now() - $2::interval), false), count(*)::int,
		       coalesce((SELECT dataset_sha256 FROM batch_recordings WHERE batch = $1 AND beat_at <= now() - $2::interval
		                 ORDER BY started_at LIMIT 1), '')
		FROM batch_recordings WHERE batch = $1`, batch, RecordingStale.String()).Scan(&since, &r.Live, &r.Runs, &r.Dataset)
	if err != nil {
		return nil, fmt.Errorf("read the recordings of batch %s: %w", batch, err)
	}
	if r.Runs == 0 {
		return nil, nil
	}
	r.Since = *since
	return &r, nil
}

// StartRecording records that an enqueue run of the dataset whose digest
// is given began recording the batch's rows, and returns the run's token;
// the run says it is alive with BeatRecording and ends with
// FinishRecording.
func (s *Store) StartRecording(ctx context.Context, batch, datasetSHA256 string) (string, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b[:])
	if _, err := s.pool.Exec(ctx, `INSERT INTO batch_recordings (token, batch, dataset_sha256) VALUES ($1, $2, $3)`,
		token, batch, datasetSHA256); err != nil {
		return "", fmt.Errorf("mark batch %s recording: %w", batch, err)
	}
	return token, nil
}

// BeatRecording says the run of token is alive.
func (s *Store) BeatRecording(ctx context.Context, token string) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE batch_recordings SET beat_at = now() WHERE token = $1`, token); err != nil {
		return fmt.Errorf("beat recording: %w", err)
	}
	return nil
}

// StopRecording marks the run of token stopped before it recorded every
// row (it failed, or was interrupted): the batch counts as partly
// recorded at once, not after RecordingStale.
func (s *Store) StopRecording(ctx context.Context, token string) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE batch_recordings SET beat_at = '-infinity' WHERE token = $1`, token); err != nil {
		return fmt.Errorf("stop recording: %w", err)
	}
	return nil
}

// FinishRecording is RefreshBatchTotal for the enqueue run of token, which
// has recorded every row of its dataset but the bad rows it was allowed to
// leave out: it removes the run's mark and those of every other run of the
// same dataset (killed, stopped or still going), whose rows the batch now
// holds, and keeps the dataset's rows read and bad rows (BadRows).
func (s *Store) FinishRecording(ctx context.Context, batch, token, datasetSHA256 string, rows int, bad []string) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM batch_recordings WHERE token = $1 OR (batch = $2 AND dataset_sha256 = $3)`, token, batch, datasetSHA256)
	b.Queue(`
		INSERT INTO batch_datasets (batch, dataset_sha256, rows_read, bad_rows, bad_ids) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (batch, dataset_sha256) DO UPDATE SET rows_read = excluded.rows_read, bad_rows = excluded.bad_rows,
			bad_ids = excluded.bad_ids, finished_at = now()`,
		batch, datasetSHA256, rows, len(bad), append([]string{}, slices.DeleteFunc(slices.Clone(bad), func(id string) bool { return id == "" })...))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("finish recording batch %s: %w", batch, err)
	}
	return s.refreshTotal(ctx, batch)
}

// BadRows returns how many rows of the datasets batch was enqueued from
// were bad and left out of it (enqueue's --max-bad-rows let them pass), and
// are still missing: a bad row whose job id a later dataset recorded (the
// file fixed) is not.
func (s *Store) BadRows(ctx context.Context, batch string) (int64, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT `+badRowsSQL("$1"), batch).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the bad rows of batch %s: %w", batch, err)
	}
	return n, nil
}

// badRowsSQL is the expression counting the bad rows (BadRows) of the
// batch named by the SQL expression batch.
func badRowsSQL(batch string) string {
	return `(coalesce((SELECT sum(d.bad_rows - cardinality(d.bad_ids)) FROM batch_datasets d WHERE d.batch = ` + batch + `), 0)::bigint
		     + (SELECT count(DISTINCT x.id) FROM batch_datasets d, unnest(d.bad_ids) x(id)
		        WHERE d.batch = ` + batch + ` AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = x.id)))`
}

func (s *Store) refreshTotal(ctx context.Context, name string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		UPDATE batches SET total_jobs = (SELECT count(*) FROM jobs WHERE batch = $1)
		WHERE name = $1 RETURNING total_jobs`, name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("count jobs of batch %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("count jobs of batch %s: %w", name, err)
	}
	return n, nil
}

// PublishedQueued returns up to limit jobs of batch that were published and
// are still queued, not placed in a wave (which owns them, their messages
// acked), ordered by id and starting after the id after ("" for the first
// page): the jobs the queue should still hold, which enqueue --resume
// compares with what it does hold. limit <= 0 means all.
func (s *Store) PublishedQueued(ctx context.Context, batch, after string, limit int) ([]NewJob, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT `+newJobColumns+`
		FROM jobs j `+continuationJoin+` WHERE j.batch = $1 AND j.published AND j.status = 'queued' AND j.wave_id IS NULL AND j.id > $2
		ORDER BY j.id LIMIT $3`, batch, after, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("list published queued jobs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, scanNewJob)
	if err != nil {
		return nil, fmt.Errorf("list published queued jobs of %s: %w", batch, err)
	}
	return out, nil
}

// newJobColumns are the columns scanNewJob reads, of jobs j and the
// continuationJoin c.
const newJobColumns = `j.id, coalesce(j.batch, ''), j.row_no, coalesce(j.schema_hash, ''), j.prompt, j.provider, j.model, j.mode,
	j.strategy, j.metadata::text, j.run, c.reply, c.class, c.errors::text, coalesce(j.document_hash, '')`

// continuationJoin finds, for a job requeued after its revalidation (its
// run before is one) failed, the reply checked and why it failed: the
// reply named, or the last one of the run the value came from.
const continuationJoin = `LEFT JOIN LATERAL (
	SELECT coalesce((SELECT a.raw FROM attempts a WHERE a.job_id = r.job_id AND a.run = r.prior_run
	                 AND (r.attempt_no IS NULL OR a.attempt_no = r.attempt_no) ORDER BY a.attempt_no DESC LIMIT 1), '') AS reply,
	       r.class, r.errors
	FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run - 1 AND NOT r.valid
) c ON true`

func scanNewJob(r pgx.CollectableRow) (NewJob, error) {
	var j NewJob
	var meta string
	var reply, class, errs *string
	err := r.Scan(&j.ID, &j.Batch, &j.RowNo, &j.SchemaHash, &j.Prompt, &j.Provider, &j.Model, &j.Mode, &j.Strategy, &meta, &j.Run,
		&reply, &class, &errs, &j.DocumentHash)
	j.Metadata = json.RawMessage(meta)
	if reply != nil {
		j.Continue = &Continuation{Reply: *reply, Class: deref(class), Errors: rawPtr(errs)}
	}
	return j, err
}
