package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// countingLoader serves documents from a map and counts the reads.
type countingLoader struct {
	docs  map[string]string
	reads atomic.Int64
	err   error
}

func (l *countingLoader) Document(_ context.Context, hash string) (string, error) {
	l.reads.Add(1)
	if l.err != nil {
		return "", l.err
	}
	d, ok := l.docs[hash]
	if !ok {
		return "", fmt.Errorf("get document %s: %w", hash, store.ErrNotFound)
	}
	return d, nil
}

var _ DocumentLoader = (*countingLoader)(nil)

func TestDocumentCacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	l := &countingLoader{docs: map[string]string{"a": strings.Repeat("a", 40), "b": strings.Repeat("b", 40), "c": strings.Repeat("c", 40), "big": strings.Repeat("x", 200)}}
	c := newDocumentCache(l, 100)
	ctx := context.Background()
	get := func(h string) {
		t.Helper()
		got, err := c.get(ctx, h)
		if err != nil || got != l.docs[h] {
			t.Fatalf("get %s = %d bytes, %v", h, len(got), err)
		}
	}
	get("a")
	get("b")
	get("a") // a is now the most recent
	if n := l.reads.Load(); n != 2 {
		t.Fatalf("reads after a, b, a = %d, want 2 (a cached)", n)
	}
	get("c") // 120 bytes: b, the least recent, goes
	if docs, bytes := c.held(); docs != 2 || bytes != 80 {
		t.Fatalf("cache holds %d documents, %d bytes; want 2, 80", docs, bytes)
	}
	get("a")
	if n := l.reads.Load(); n != 3 {
		t.Fatalf("reads = %d, want 3: a was evicted instead of b", n)
	}
	get("b")
	if n := l.reads.Load(); n != 4 {
		t.Fatalf("reads = %d, want 4: b was still cached", n)
	}
	get("big") // over the bound: served, not kept
	if docs, bytes := c.held(); bytes > 100 || docs != 2 {
		t.Fatalf("after a document over the bound the cache holds %d documents, %d bytes", docs, bytes)
	}
}

func TestDocumentCacheSharesOneRead(t *testing.T) {
	t.Parallel()
	l := &countingLoader{docs: map[string]string{"a": "text"}}
	c := newDocumentCache(l, 1<<20)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.get(context.Background(), "a"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := l.reads.Load(); n != 1 {
		t.Fatalf("32 jobs of one document read it %d times, want 1", n)
	}
}

func TestDocumentCacheErrors(t *testing.T) {
	t.Parallel()
	c := newDocumentCache(&countingLoader{docs: map[string]string{}}, 100)
	_, err := c.get(context.Background(), "feed")
	if !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "document feed is not in the ledger") {
		t.Fatalf("missing document: %v, want a bad job naming it", err)
	}
	c = newDocumentCache(&countingLoader{err: errors.New("connection refused")}, 100)
	_, err = c.get(context.Background(), "feed")
	if !errors.Is(err, fixpoint.ErrTransient) || errors.Is(err, fixpoint.ErrBadJob) {
		t.Fatalf("ledger down: %v, want a transient error", err)
	}
}
