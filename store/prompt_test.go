package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A system prompt shared by many attempts is stored once, attempts keep
// the messages after it, and every reader sees the request as sent.
func TestSystemPromptStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	open := func() *store.Store {
		s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	s, other := open(), open()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "sp"}); err != nil {
		t.Fatal(err)
	}
	hash, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("sp", hash, 5)); err != nil {
		t.Fatal(err)
	}
	rules := "Reply with one JSON value.\n<json-schema>{\"type\":\"object\"}</json-schema>"
	withSystem := func(id string, p *store.Prompt) store.Result {
		r := result(id, "x", "shape", "")
		for i := range r.AttemptRows {
			r.AttemptRows[i].System = p
		}
		return r
	}
	// Two results in one save, then the same text through a second Prompt
	// and a second Store (which has not seen it): one row.
	if _, err := s.SaveResults(ctx, []store.Result{withSystem(jobID("sp", 1), store.NewPrompt(rules)), withSystem(jobID("sp", 2), store.NewPrompt(rules))}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.SaveResults(ctx, []store.Result{withSystem(jobID("sp", 3), store.NewPrompt(rules))}); err != nil {
		t.Fatal(err)
	}
	// A different prompt, with a NUL byte Postgres text cannot hold; and an
	// attempt kept as a hash only.
	if _, err := s.SaveResults(ctx, []store.Result{withSystem(jobID("sp", 4), store.NewPrompt("other\x00rules"))}); err != nil {
		t.Fatal(err)
	}
	hashOnly := result(jobID("sp", 5), "x", "")
	hashOnly.AttemptRows[0].Request, hashOnly.AttemptRows[0].RequestHash = nil, "h"
	if _, err := s.SaveResults(ctx, []store.Result{hashOnly}); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var prompts int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM system_prompts`).Scan(&prompts); err != nil {
		t.Fatal(err)
	}
	if prompts != 2 {
		t.Errorf("%d system_prompts rows, want 2 (one per distinct text)", prompts)
	}
	sum := sha256.Sum256([]byte(rules))
	var text string
	if err := conn.QueryRow(ctx, `SELECT text FROM system_prompts WHERE sha256 = $1`, hex.EncodeToString(sum[:])).Scan(&text); err != nil || text != rules {
		t.Errorf("prompt by its sha256 = %q, %v; want the text", text, err)
	}
	var inline, refs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE request::text LIKE '%"system"%'),
		count(*) FILTER (WHERE system_sha256 = $1) FROM attempts`, hex.EncodeToString(sum[:])).Scan(&inline, &refs); err != nil {
		t.Fatal(err)
	}
	if inline != 0 || refs != 6 {
		t.Errorf("%d attempts hold a system message inline and %d refer to the prompt; want 0 and 6", inline, refs)
	}

	missing := func() int64 {
		t.Helper()
		c, err := s.Counts(ctx, "sp")
		if err != nil {
			t.Fatal(err)
		}
		return c.PromptsMissing
	}
	if n := missing(); n != 0 {
		t.Errorf("Counts: %d attempts miss their prompt, want 0", n)
	}
	// The reader sees the request as sent, system prompt first.
	_, attempts, err := s.Job(ctx, jobID("sp", 2))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []struct{ Role, Content string }
	if err := json.Unmarshal(attempts[1].Request, &msgs); err != nil {
		t.Fatalf("request %s: %v", attempts[1].Request, err)
	}
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[0].Content != rules || msgs[1].Role != "user" || msgs[1].Content != "x" {
		t.Errorf("request read back = %+v, want the system prompt then the user message", msgs)
	}
	_, attempts, err = s.Job(ctx, jobID("sp", 4))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(attempts[0].Request), "\"other\uFFFDrules\"") {
		t.Errorf("request with a NUL in its prompt = %s, want U+FFFD in its place", attempts[0].Request)
	}
	_, attempts, err = s.Job(ctx, jobID("sp", 5))
	if err != nil {
		t.Fatal(err)
	}
	if attempts[0].Request != nil || attempts[0].RequestHash != "h" {
		t.Errorf("hash-only attempt read back with request %s and hash %q", attempts[0].Request, attempts[0].RequestHash)
	}

	// Without a foreign key, Counts is what finds a prompt gone missing.
	if _, err := conn.Exec(ctx, `DELETE FROM system_prompts WHERE sha256 = $1`, hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	if n := missing(); n != 6 {
		t.Errorf("Counts: %d attempts miss their prompt after it was deleted, want 6", n)
	}
}

// A Prompt not made by NewPrompt has no hash to refer to: refused before
// anything is written.
func TestSaveResultsRefusesUnhashedPrompt(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "unhashed", 1)
	r := result(jobID("unhashed", 1), "x", "")
	r.AttemptRows[0].System = &store.Prompt{}
	if _, err := s.SaveResults(context.Background(), []store.Result{r}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SaveResults error = %v, want ErrInvalid", err)
	}
}
