package wave

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// fakeProvider is a provider's batch API in memory: OpenAI's (an input
// file, then a batch naming the wave in its metadata) or Anthropic's (the
// requests in the create, no metadata). Batches run until the test ends
// them; inject, when set, can fail any call.
type fakeProvider struct {
	mu       sync.Mutex
	clock    *fakeClock
	name     string
	maxReq   int
	maxBytes int64

	files   map[string][]llm.BatchItem
	batches []*fakeBatch
	// inject returns the error a call fails with, or nil; call is
	// "upload", "create", "retrieve", "cancel", "list" or "results", arg
	// the batch id (or the items of an upload or create). afterCreate,
	// when set, fails a create after it created the batch (the answer
	// was lost).
	inject      func(call string, arg any) error
	afterCreate error
	calls       map[string]int
}

// fakeBatch is one provider batch.
type fakeBatch struct {
	st      llm.BatchStatus
	items   []llm.BatchItem
	results []llm.BatchResult
	deleted bool
}

var _ BatchClient = (*fakeProvider)(nil)

func newFakeProvider(c *fakeClock, name string) *fakeProvider {
	return &fakeProvider{clock: c, name: name, maxReq: 50_000, maxBytes: 1 << 30, files: map[string][]llm.BatchItem{},
		calls: map[string]int{}}
}

// call counts a call and returns the error inject gives it. p.mu is held.
func (p *fakeProvider) call(name string, arg any) error {
	p.calls[name]++
	if p.inject == nil {
		return nil
	}
	return p.inject(name, arg)
}

func (p *fakeProvider) SupportsBatch() bool { return true }

func (p *fakeProvider) EncodeBatchItem(it llm.BatchItem) ([]byte, error) { return json.Marshal(it) }

func (p *fakeProvider) BatchLimits() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxReq, p.maxBytes
}

func (p *fakeProvider) UploadBatchFile(ctx context.Context, items []llm.BatchItem) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("upload", items); err != nil {
		return "", err
	}
	if llm.WireOf(p.name) != llm.WireOpenAIChat {
		return "", &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: p.name + " has no batch files"}
	}
	id := fmt.Sprintf("file-%d", len(p.files)+1)
	p.files[id] = slices.Clone(items)
	return id, nil
}

func (p *fakeProvider) CreateBatch(ctx context.Context, fileID string, items []llm.BatchItem, metadata map[string]string) (llm.BatchStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("create", items); err != nil {
		return llm.BatchStatus{}, err
	}
	b := &fakeBatch{items: slices.Clone(items)}
	b.st = llm.BatchStatus{ID: fmt.Sprintf("batch-%d", len(p.batches)+1), State: llm.BatchInProgress,
		Counts: llm.BatchCounts{Total: len(items), Processing: len(items)}, CreatedAt: p.clock.Now()}
	if llm.WireOf(p.name) == llm.WireOpenAIChat {
		if _, ok := p.files[fileID]; !ok {
			return llm.BatchStatus{}, notFound("file " + fileID)
		}
		b.items, b.st.InputFileID, b.st.Metadata = p.files[fileID], fileID, metadata
	}
	p.batches = append(p.batches, b)
	if err := p.afterCreate; err != nil {
		p.afterCreate = nil
		return llm.BatchStatus{}, err
	}
	return b.st, nil
}

func notFound(what string) error {
	return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Status: 404, Message: what + " not found", Err: llm.ErrBatchNotFound}
}

// batch returns the batch id. p.mu is held.
func (p *fakeProvider) batch(id string) *fakeBatch {
	for _, b := range p.batches {
		if b.st.ID == id && !b.deleted {
			return b
		}
	}
	return nil
}

func (p *fakeProvider) RetrieveBatch(ctx context.Context, id string) (llm.BatchStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("retrieve", id); err != nil {
		return llm.BatchStatus{}, err
	}
	b := p.batch(id)
	if b == nil {
		return llm.BatchStatus{}, notFound("batch " + id)
	}
	return b.st, nil
}

// CancelBatch asks for a running batch to end; OpenAI refuses to cancel
// one that has ended.
func (p *fakeProvider) CancelBatch(ctx context.Context, id string) (llm.BatchStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("cancel", id); err != nil {
		return llm.BatchStatus{}, err
	}
	b := p.batch(id)
	if b == nil {
		return llm.BatchStatus{}, notFound("batch " + id)
	}
	if b.st.Ended {
		return llm.BatchStatus{}, &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Status: 400,
			Message: fmt.Sprintf("Cannot cancel a batch with status '%s'", b.st.State)}
	}
	b.st.State = llm.BatchCancelling
	return b.st, nil
}

func (p *fakeProvider) ListBatchesSince(ctx context.Context, since time.Time, _ int) ([]llm.BatchStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("list", since); err != nil {
		return nil, err
	}
	var out []llm.BatchStatus
	for _, b := range slices.Backward(p.batches) {
		if !b.deleted && !b.st.CreatedAt.Before(since) {
			out = append(out, b.st)
		}
	}
	return out, nil
}

// BatchResults passes the results of an ended batch to fn, as llm.Client
// does: a result whose custom id request does not know is passed as an
// unknown_custom_id error.
func (p *fakeProvider) BatchResults(ctx context.Context, st llm.BatchStatus, request func(string) (fixpoint.Request, bool), fn func(llm.BatchResult) error) error {
	p.mu.Lock()
	if err := p.call("results", st.ID); err != nil {
		p.mu.Unlock()
		return err
	}
	b := p.batch(st.ID)
	var results []llm.BatchResult
	if b != nil {
		results = slices.Clone(b.results)
	}
	p.mu.Unlock()
	if b == nil || !st.Ended {
		return &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Message: "no results for batch " + st.ID}
	}
	for _, r := range results {
		if request != nil {
			if _, ok := request(r.CustomID); !ok {
				r = llm.BatchResult{CustomID: r.CustomID, Err: &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse,
					Code: "unknown_custom_id", Message: "a result for a request not sent"}}
			}
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// What tests do and read.

// end ends batch id in state with a result for each item reply gives one
// for (nil: no result line), then the extra results.
func (p *fakeProvider) end(id string, state llm.BatchState, reply func(llm.BatchItem) *llm.BatchResult, extra ...llm.BatchResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.batch(id)
	b.st.State, b.st.Ended, b.st.EndedAt = state, true, p.clock.Now()
	b.st.Counts.Processing = 0
	for _, it := range b.items {
		r := reply(it)
		if r == nil {
			continue
		}
		b.results = append(b.results, *r)
		// As OpenAI counts: completed, or failed for every other outcome.
		if r.Err == nil {
			b.st.Counts.Succeeded++
		} else {
			b.st.Counts.Errored++
		}
	}
	b.results = append(b.results, extra...)
}

// fail ends batch id as failed by the provider as a whole.
func (p *fakeProvider) fail(id string, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.batch(id)
	b.st.State, b.st.Ended, b.st.EndedAt = llm.BatchFailed, true, p.clock.Now()
	b.st.Err = &fixpoint.ProviderError{Class: fixpoint.ClassBadRequest, Code: "invalid_request", Message: why}
}

// remove deletes batch id: it answers 404 from then on.
func (p *fakeProvider) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batch(id).deleted = true
}

// status returns batch id as the provider has it.
func (p *fakeProvider) status(id string) llm.BatchStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batch(id).st
}

// itemsOf returns the requests of batch id.
func (p *fakeProvider) itemsOf(id string) []llm.BatchItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.batch(id).items)
}

// batchCount is how many batches were created.
func (p *fakeProvider) batchCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.batches)
}

// count returns how many times a call was made.
func (p *fakeProvider) count(call string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[call]
}

// setInject sets the provider's inject func.
func (p *fakeProvider) setInject(f func(call string, arg any) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inject = f
}

// addForeign adds a batch another client made on the same key: n
// requests with custom ids of its own, created now.
func (p *fakeProvider) addForeign(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := &fakeBatch{}
	for i := range n {
		b.items = append(b.items, llm.BatchItem{CustomID: fmt.Sprintf("other-%d", i)})
	}
	b.st = llm.BatchStatus{ID: fmt.Sprintf("batch-%d", len(p.batches)+1), State: llm.BatchInProgress,
		Counts: llm.BatchCounts{Total: n, Processing: n}, CreatedAt: p.clock.Now()}
	p.batches = append(p.batches, b)
	return b.st.ID
}

// Replies a test ends a batch with.

// validReply answers every request with a valid value.
func validReply(it llm.BatchItem) *llm.BatchResult {
	return &llm.BatchResult{CustomID: it.CustomID, Response: &fixpoint.Response{Text: `{"n": 1}`, FinishReason: fixpoint.FinishStop,
		Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 10}, Status: 200}}
}

// invalidReply answers every request with a value the schema refuses.
func invalidReply(it llm.BatchItem) *llm.BatchResult {
	r := validReply(it)
	r.Response.Text = `{"n": "many"}`
	return r
}

// classReply answers every request with a failure of class c.
func classReply(c fixpoint.ErrorClass) func(llm.BatchItem) *llm.BatchResult {
	return func(it llm.BatchItem) *llm.BatchResult {
		return &llm.BatchResult{CustomID: it.CustomID, Err: &fixpoint.ProviderError{Class: c, Message: string(c)}}
	}
}

// noReply gives no result line.
func noReply(llm.BatchItem) *llm.BatchResult { return nil }
