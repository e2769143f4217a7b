package pipeline

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// DocumentLoader reads a job's document from the ledger by its hash
// (queue.Envelope.Document); an error matching store.ErrNotFound when the
// ledger holds none. *store.Store satisfies it.
type DocumentLoader interface {
	Document(ctx context.Context, hash string) (string, error)
}

// DocumentCacheBytesDefault is the text a worker keeps of the documents
// it loaded: the jobs of a batch often share none, so the cache is bounded
// by bytes, not documents.
const DocumentCacheBytesDefault = 64 << 20

// documentCache keeps the documents loaded last, up to max bytes of text
// (least recently used out first); a document larger than max is not kept.
// Jobs missing the same document share one read.
type documentCache struct {
	loader DocumentLoader
	max    int64

	mu    sync.Mutex
	bytes int64
	order *list.List // of *cachedDocument, most recent first
	byKey map[string]*list.Element
	loads singleflight.Group
}

type cachedDocument struct {
	hash, text string
}

func newDocumentCache(loader DocumentLoader, max int64) *documentCache {
	return &documentCache{loader: loader, max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the document of hash: an error matching fixpoint.ErrBadJob
// when the ledger holds none (the job can never run), ErrTransient when
// the ledger could not be read.
func (c *documentCache) get(ctx context.Context, hash string) (string, error) {
	if text, ok := c.cached(hash); ok {
		return text, nil
	}
	// The first caller's context serves all: canceling it must not fail
	// the others (the store bounds the read with its own timeout).
	v, err, _ := c.loads.Do(hash, func() (any, error) {
		if text, ok := c.cached(hash); ok {
			return text, nil
		}
		text, err := c.loader.Document(context.WithoutCancel(ctx), hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: document %s is not in the ledger (was the job enqueued against another database?)", fixpoint.ErrBadJob, hash)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read document %s: %w", fixpoint.ErrTransient, hash, err)
		}
		c.put(hash, text)
		return text, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (c *documentCache) cached(hash string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[hash]
	if !ok {
		return "", false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedDocument).text, true
}

func (c *documentCache) put(hash, text string) {
	n := int64(len(text))
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[hash]; ok {
		return
	}
	for c.bytes+n > c.max {
		last := c.order.Back()
		d := c.order.Remove(last).(*cachedDocument)
		delete(c.byKey, d.hash)
		c.bytes -= int64(len(d.text))
	}
	c.byKey[hash] = c.order.PushFront(&cachedDocument{hash: hash, text: text})
	c.bytes += n
}

// held reports the documents and bytes the cache holds.
func (c *documentCache) held() (docs int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}
