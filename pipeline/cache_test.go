package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// slowSchemaLedger serves one schema with a database's latency and counts
// the reads. Only Schema is used.
type slowSchemaLedger struct {
	Ledger
	raw   []byte
	reads atomic.Int64
}

func (l *slowSchemaLedger) Schema(context.Context, string) ([]byte, error) {
	l.reads.Add(1)
	time.Sleep(20 * time.Millisecond) // a round trip, not a synchronization
	return l.raw, nil
}

// A worker starting on a full queue has every job in flight miss the
// schema cache at once: they share one read and one compile.
func TestSchemaCacheColdStartReadsOnce(t *testing.T) {
	t.Parallel()
	l := &slowSchemaLedger{raw: []byte(ticketSchema)}
	w := &Worker{ledger: l}
	const jobs = 200
	got := make([]*validate.Schema, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			se, err := w.schema(context.Background(), "h")
			if err != nil || string(se.raw) != ticketSchema {
				t.Errorf("schema: %v (%+v)", err, se)
				return
			}
			got[i] = se.schema
		})
	}
	wg.Wait()
	if n := l.reads.Load(); n != 1 {
		t.Errorf("%d concurrent cold-cache lookups read the schema %d times, want once", jobs, n)
	}
	for i, s := range got {
		if s == nil || s != got[0] {
			t.Fatalf("job %d got schema %p, job 0 %p: want one compiled schema shared", i, s, got[0])
		}
	}
}

// Jobs missing the system prompt cache together build the prompt once and
// count once against promptCacheMax: a cold start must not use up the
// cache's room for the batches that follow.
func TestLoopPromptCacheColdStartCountsOnce(t *testing.T) {
	t.Parallel()
	loop := NewLoop(&fakeCompleter{}, LoopConfig{})
	job := testJob(t, fixpoint.Limits{})
	const jobs = 200
	got := make([]*system, jobs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range jobs {
		wg.Go(func() {
			<-start
			got[i] = loop.systemPrompt(job)
		})
	}
	close(start)
	wg.Wait()
	if n := loop.promptCount.Load(); n != 1 {
		t.Errorf("%d concurrent misses counted %d prompts against the cache, want 1", jobs, n)
	}
	for i, p := range got {
		if p != got[0] {
			t.Fatalf("job %d got a prompt built apart from job 0's", i)
		}
	}
}
