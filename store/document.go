package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Document is a job's input document as the ledger stores it: once, under
// the hash of its bytes (DocumentHash), however many jobs name it.
type Document struct {
	Hash string
	// Body is the text, byte for byte: valid UTF-8 without NUL (Postgres's
	// text holds no NUL).
	Body string
}

// NewDocument is body with its hash.
func NewDocument(body string) Document { return Document{Hash: DocumentHash(body), Body: body} }

// DocumentHash is the hash a document is stored under: the SHA-256 of its
// bytes, in lowercase hex.
func DocumentHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// PutDocuments stores the documents the ledger does not hold yet and
// returns how many it stored. A document held already, or given twice, is
// stored once; the bodies of those the ledger holds are not sent. Each
// must be valid UTF-8 without NUL and have the hash of its body
// (ErrInvalid otherwise).
func (s *Store) PutDocuments(ctx context.Context, docs []Document) (int, error) {
	if len(docs) == 0 {
		return 0, nil
	}
	seen := make(map[string]bool, len(docs))
	var hashes []string
	for _, d := range docs {
		if seen[d.Hash] {
			continue
		}
		if !utf8.ValidString(d.Body) || strings.IndexByte(d.Body, 0) >= 0 {
			return 0, fmt.Errorf("put document %s: %w: not UTF-8 text without NUL", d.Hash, ErrInvalid)
		}
		if d.Hash != DocumentHash(d.Body) {
			return 0, fmt.Errorf("put document %s: %w: the hash is not that of its body", d.Hash, ErrInvalid)
		}
		seen[d.Hash] = true
		hashes = append(hashes, d.Hash)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT hash FROM documents WHERE hash = ANY($1)`, hashes)
	if err != nil {
		return 0, fmt.Errorf("look up %d documents: %w", len(hashes), err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("look up %d documents: %w", len(hashes), err)
	}
	for _, h := range held {
		seen[h] = false
	}
	var newHashes, bodies []string
	var sizes []int
	for _, d := range docs {
		if seen[d.Hash] {
			seen[d.Hash] = false
			newHashes, bodies, sizes = append(newHashes, d.Hash), append(bodies, d.Body), append(sizes, len(d.Body))
		}
	}
	if len(newHashes) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO documents (hash, bytes, body)
		SELECT * FROM unnest($1::text[], $2::int[], $3::text[])
		ON CONFLICT (hash) DO NOTHING`, newHashes, sizes, bodies)
	if err != nil {
		return 0, fmt.Errorf("put %d documents: %w", len(newHashes), err)
	}
	return int(tag.RowsAffected()), nil
}

// Document returns the text of the document stored under hash;
// ErrNotFound when the ledger holds none.
func (s *Store) Document(ctx context.Context, hash string) (string, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var body string
	err := s.pool.QueryRow(ctx, `SELECT body FROM documents WHERE hash = $1`, hash).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("get document %s: %w", hash, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get document %s: %w", hash, err)
	}
	return body, nil
}
