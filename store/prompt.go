package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Prompt is a system prompt as the ledger keeps it: once per distinct text,
// in system_prompts, named by its SHA-256. Make one with NewPrompt and share
// it between the attempts that sent it; the hash is computed once.
type Prompt struct {
	sha  string
	text string
}

// NewPrompt returns the ledger form of a system prompt.
func NewPrompt(text string) *Prompt {
	sum := sha256.Sum256([]byte(text))
	return &Prompt{sha: hex.EncodeToString(sum[:]), text: text}
}

// PromptWithHash returns the ledger form of a system prompt whose SHA-256
// (lowercase hex) the caller computed already; sha must be that of text.
func PromptWithHash(text, sha string) *Prompt { return &Prompt{sha: sha, text: text} }

// Text returns the prompt.
func (p *Prompt) Text() string { return p.text }

// MarshalJSON encodes the prompt as its text.
func (p *Prompt) MarshalJSON() ([]byte, error) { return json.Marshal(p.text) }

// UnmarshalJSON decodes a prompt encoded by MarshalJSON, its hash computed
// again.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return err
	}
	*p = *NewPrompt(text)
	return nil
}

// promptSet remembers the prompts this Store has committed, so that a
// batch of results writes only the ones the ledger has not seen: the jobs
// of a batch share one. It is bounded; forgetting costs one idempotent
// insert.
type promptSet struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// promptSetMax bounds the prompts a Store remembers.
const promptSetMax = 4096

func (s *promptSet) has(sha string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.seen[sha]
	return ok
}

func (s *promptSet) add(shas []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || len(s.seen)+len(shas) > promptSetMax {
		s.seen = make(map[string]struct{}, len(shas))
	}
	for _, sha := range shas {
		s.seen[sha] = struct{}{}
	}
}

// newPrompts returns the distinct prompts of the winners' attempts that
// this Store has not committed yet.
func (s *Store) newPrompts(results []Result, winners []int) (shas, texts []string) {
	var dup map[string]struct{}
	for _, i := range winners {
		for _, a := range results[i].AttemptRows {
			p := a.System
			if p == nil || s.prompts.has(p.sha) {
				continue
			}
			if _, ok := dup[p.sha]; ok {
				continue
			}
			if dup == nil {
				dup = make(map[string]struct{})
			}
			dup[p.sha] = struct{}{}
			shas, texts = append(shas, p.sha), append(texts, txt(p.text))
		}
	}
	return shas, texts
}

// putPrompts inserts prompts the ledger may not hold yet; a prompt another
// worker wrote first is left as it is (same hash, same text). Rows go in in
// hash order, so two saves inserting the same new prompts wait for each
// other instead of deadlocking.
func putPrompts(ctx context.Context, tx pgx.Tx, shas, texts []string) error {
	if len(shas) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO system_prompts (sha256, text)
		SELECT * FROM unnest($1::text[], $2::text[]) AS p(sha256, text) ORDER BY sha256
		ON CONFLICT (sha256) DO NOTHING`, shas, texts)
	return err
}
