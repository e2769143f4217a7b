package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Canonical returns the canonical form of a JSON document: compact, object
// keys sorted, numbers kept as written. Two documents that differ only in
// whitespace or key order have the same canonical form.
func Canonical(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: decode json: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: decode json: trailing data", ErrInvalid)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// SchemaHash returns the sha256 (lowercase hex) of the canonical form of a
// JSON schema: the key under which PutSchema stores it.
func SchemaHash(body []byte) (string, error) {
	c, err := Canonical(body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// PutSchema stores a JSON schema under the hash of its canonical form and
// returns the hash. Storing the same schema again (in any formatting) is a
// no-op that returns the same hash. ErrInvalid if body is not JSON.
func (s *Store) PutSchema(ctx context.Context, body []byte) (string, error) {
	c, err := Canonical(body)
	if err != nil {
		return "", fmt.Errorf("put schema: %w", err)
	}
	sum := sha256.Sum256(c)
	hash := hex.EncodeToString(sum[:])
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	_, err = s.pool.Exec(ctx,
		`INSERT INTO schemas (hash, body) VALUES ($1, $2::jsonb) ON CONFLICT (hash) DO NOTHING`,
		hash, string(c))
	if err != nil {
		return "", fmt.Errorf("put schema %s: %w", hash, err)
	}
	return hash, nil
}

// Schema returns the canonical bytes of the schema stored under hash, or
// ErrNotFound.
func (s *Store) Schema(ctx context.Context, hash string) ([]byte, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var body string
	err := s.pool.QueryRow(ctx, `SELECT body::text FROM schemas WHERE hash = $1`, hash).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get schema %s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get schema %s: %w", hash, err)
	}
	c, err := Canonical([]byte(body))
	if err != nil {
		return nil, fmt.Errorf("get schema %s: %w", hash, err)
	}
	return c, nil
}

// BatchParams describes a batch for PutBatch.
type BatchParams struct {
	// Name identifies the batch; required.
	Name string
	// Settings holds the batch's provider, model, mode, strategy and limits
	// as a JSON object; nil means {}.
	Settings json.RawMessage
	// TotalJobs is the number of jobs the batch holds.
	TotalJobs int
}

// Batch is a stored batch.
type Batch struct {
	// Name identifies the batch.
	Name string
	// CreatedAt is when the batch was first recorded.
	CreatedAt time.Time
	// Settings is the JSON object recorded by the last PutBatch.
	Settings json.RawMessage
	// TotalJobs is the count recorded by the last PutBatch.
	TotalJobs int
}

// PutBatch creates the batch or updates its settings and total; created_at
// keeps its first value. It is idempotent.
func (s *Store) PutBatch(ctx context.Context, p BatchParams) error {
	if strings.TrimSpace(p.Name) == "" {
		return fmt.Errorf("put batch: %w: empty name", ErrInvalid)
	}
	settings := "{}"
	if len(p.Settings) > 0 {
		settings = string(p.Settings)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		INSERT INTO batches (name, settings, total_jobs) VALUES ($1, $2::jsonb, $3)
		ON CONFLICT (name) DO UPDATE SET settings = EXCLUDED.settings, total_jobs = EXCLUDED.total_jobs`,
		p.Name, settings, p.TotalJobs)
	if err != nil {
		return fmt.Errorf("put batch %s: %w", p.Name, err)
	}
	return nil
}

// Batch returns the named batch, or ErrNotFound.
func (s *Store) Batch(ctx context.Context, name string) (*Batch, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var b Batch
	var settings string
	err := s.pool.QueryRow(ctx,
		`SELECT name, created_at, settings::text, total_jobs FROM batches WHERE name = $1`, name).
		Scan(&b.Name, &b.CreatedAt, &settings, &b.TotalJobs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get batch %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %s: %w", name, err)
	}
	b.Settings = json.RawMessage(settings)
	return &b, nil
}
