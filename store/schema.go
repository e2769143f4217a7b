package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

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
