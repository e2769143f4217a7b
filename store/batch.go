package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// RecordingSince is when an enqueue began recording the batch's rows
	// and has not finished (killed, or still running); nil otherwise.
	RecordingSince *time.Time
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
		`SELECT name, created_at, settings::text, total_jobs, input_columns::text, schema_hash, recording_since FROM batches WHERE name = $1`, name).
		Scan(&b.Name, &b.CreatedAt, &settings, &b.TotalJobs, &cols, &schema, &b.RecordingSince)
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
	return &b, nil
}

// RefreshBatchTotal sets the batch's total_jobs to the number of its job
// rows and returns it.
func (s *Store) RefreshBatchTotal(ctx context.Context, name string) (int, error) {
	return s.refreshTotal(ctx, name, false)
}

// StartRecording marks that an enqueue is recording the batch's rows;
// FinishRecording clears it. A batch left marked lost the enqueue that was
// recording it: its dataset is only partly recorded.
func (s *Store) StartRecording(ctx context.Context, name string) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE batches SET recording_since = now() WHERE name = $1`, name); err != nil {
		return fmt.Errorf("mark batch %s recording: %w", name, err)
	}
	return nil
}

// FinishRecording is RefreshBatchTotal for an enqueue that has recorded
// every row of its dataset: it also clears the mark StartRecording set.
func (s *Store) FinishRecording(ctx context.Context, name string) (int, error) {
	return s.refreshTotal(ctx, name, true)
}

func (s *Store) refreshTotal(ctx context.Context, name string, finish bool) (int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `
		UPDATE batches SET total_jobs = (SELECT count(*) FROM jobs WHERE batch = $1),
		       recording_since = CASE WHEN $2 THEN NULL ELSE recording_since END
		WHERE name = $1 RETURNING total_jobs`, name, finish).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("count jobs of batch %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("count jobs of batch %s: %w", name, err)
	}
	return n, nil
}

// PublishedQueued returns up to limit jobs of batch that were published and
// are still queued, ordered by id and starting after the id after ("" for
// the first page): the jobs the queue should still hold, which
// enqueue --resume compares with what it does hold. limit <= 0 means all.
func (s *Store) PublishedQueued(ctx context.Context, batch, after string, limit int) ([]NewJob, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id, coalesce(batch, ''), row_no, coalesce(schema_hash, ''), prompt, provider, model, mode, strategy, metadata::text, run
		FROM jobs WHERE batch = $1 AND published AND status = 'queued' AND id > $2
		ORDER BY id LIMIT $3`, batch, after, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("list published queued jobs of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, scanNewJob)
	if err != nil {
		return nil, fmt.Errorf("list published queued jobs of %s: %w", batch, err)
	}
	return out, nil
}

func scanNewJob(r pgx.CollectableRow) (NewJob, error) {
	var j NewJob
	var meta string
	err := r.Scan(&j.ID, &j.Batch, &j.RowNo, &j.SchemaHash, &j.Prompt, &j.Provider, &j.Model, &j.Mode, &j.Strategy, &meta, &j.Run)
	j.Metadata = json.RawMessage(meta)
	return j, err
}
