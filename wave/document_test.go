package wave

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// testDocument splits into three chunks of 30 tokens.
const testDocument = "# Report\n\nThe first part of the report counts the parties to the agreement, who signed it in May.\n\n" +
	"The second part of the report gives the amount, twelve hundred euros, paid in monthly instalments.\n\n" +
	"The third part of the report lists the subsidiaries, each wholly owned by the provider.\n"

// documentJob returns the message of a parallel job "d0" over
// testDocument in chunks of 30 tokens.
func (h *harness) documentJob(id string) *queue.Envelope {
	env := h.envelope(id, time.Time{})
	env.Document = strings.Repeat("ab", 32)
	env.Limits = fixpoint.Limits{Strategy: fixpoint.StrategyParallel, ChunkTokens: 30, MaxAttempts: 2}
	h.worker.mu.Lock()
	h.worker.documents[env.Document] = testDocument
	h.worker.mu.Unlock()
	return env
}

// reply answers one request with text.
func reply(id, text string) llm.BatchResult {
	return llm.BatchResult{CustomID: id, Response: &fixpoint.Response{Text: text, FinishReason: fixpoint.FinishStop,
		Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 10}, Status: 200}}
}

// A parallel job's three chunk calls go into one wave with an ordinary
// job's call, each its own attempt; their results, in any order, are fed
// to its Machine, recorded as chunk attempts and the merge at the batch
// price, and the job is not final while its merged value is invalid: the
// next wave holds its repair call alone, whose valid reply ends it.
func TestParallelJobInWaves(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"sent", "reversed"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			h.v.cfg.MaxRequests = 4
			h.collect(h.documentJob("d0"), h.envelope("j1", time.Time{}))
			h.v.flushes.Wait()
			w := h.ledger.wave(1)
			if w.Status != store.WaveSubmitted || w.Requests != 4 {
				t.Fatalf("wave 1: %s with %d requests, want submitted with 4 (3 chunks and a job)", w.Status, w.Requests)
			}
			var nos []int
			for _, r := range h.ledger.requests(1) {
				if r.JobID == "d0" {
					nos = append(nos, r.AttemptNo)
				}
			}
			if !slices.Equal(nos, []int{1, 2, 3}) {
				t.Fatalf("the document job's requests are attempts %v, want 1, 2, 3", nos)
			}
			if got := h.worker.dispositions("d0"); !slices.Equal(got, []queue.DispositionKind{queue.DispWave}) {
				t.Errorf("the document job's message: %v, want acked for the wave once", got)
			}

			// Each chunk gives a value its part allows (n is required, and
			// no chunk states it): the merged value lacks n.
			var results []llm.BatchResult
			for _, it := range h.provider.itemsOf(w.ProviderBatchID) {
				text := `{"n": 7}`
				if it.Request.User == "d0" {
					text = `{}`
				}
				results = append(results, reply(it.CustomID, text))
			}
			if order == "reversed" {
				slices.Reverse(results)
			}
			h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(llm.BatchItem) *llm.BatchResult { return nil }, results...)
			h.drive()

			if got := h.ledger.wave(1); got.Status != store.WaveDone || got.Succeeded != 4 {
				t.Fatalf("wave 1: %s, %d succeeded; want done, 4", got.Status, got.Succeeded)
			}
			if j := h.ledger.job("j1"); j.status != "valid" {
				t.Errorf("the ordinary job is %s, want valid", j.status)
			}
			d := h.ledger.job("d0")
			if d.status != "queued" || d.waveID != 2 {
				t.Fatalf("the document job is %s in wave %d, want queued in wave 2 (its repair)", d.status, d.waveID)
			}
			want := []fixpoint.StepKind{fixpoint.StepChunk, fixpoint.StepChunk, fixpoint.StepChunk, fixpoint.StepMerge}
			as := h.ledger.jobAttempts("d0")
			if len(as) != len(want) {
				t.Fatalf("%d attempts after wave 1, want %d", len(as), len(want))
			}
			for i, a := range as {
				wantWave := int64(1)
				if a.Step == string(fixpoint.StepMerge) {
					wantWave = 0 // no call of the wave
				}
				if a.Step != string(want[i]) || a.No != i+1 || a.WaveID != wantWave || a.PriceBasis != string(fixpoint.PriceBasisBatch) {
					t.Errorf("attempt %d: %s no %d wave %d basis %s; want %s no %d of wave %d at the batch price", i, a.Step, a.No, a.WaveID, a.PriceBasis, want[i], i+1, wantWave)
				}
				if a.Step == string(fixpoint.StepChunk) && (a.Chunk == nil || a.Chunk.N != i || !a.Valid) {
					t.Errorf("attempt %d: chunk %+v valid %v, want chunk %d valid", i, a.Chunk, a.Valid, i)
				}
			}
			if as[3].Valid || as[3].TokensIn != 0 {
				t.Errorf("the merge: valid %v, %d tokens; want invalid (no n) and no call", as[3].Valid, as[3].TokensIn)
			}
			if d.totals == nil || d.totals.Attempts != 4 || d.totals.Calls != 3 || d.totals.TokensIn != 300 {
				t.Errorf("the job's totals after wave 1: %+v, want 4 attempts, 3 calls, 300 tokens in", d.totals)
			}

			w2 := h.ledger.wave(2)
			reqs := h.ledger.requests(2)
			if w2.Requests != 1 || len(reqs) != 1 || reqs[0].JobID != "d0" || reqs[0].AttemptNo != 5 {
				t.Fatalf("wave 2: %d requests %+v, want the document job's repair, attempt 5", w2.Requests, reqs)
			}
			var req fixpoint.Request
			if err := json.Unmarshal(reqs[0].Request, &req); err != nil {
				t.Fatal(err)
			}
			last := req.Messages[len(req.Messages)-1].Content
			if !strings.Contains(last, fixpoint.PreviousReplyOpen+"\n```json\n{}") || !strings.Contains(last, "merged from the values extracted from the 3 parts") {
				t.Errorf("the repair request does not correct the merged value: %q", last)
			}

			h.drive() // submit
			h.provider.end(h.ledger.wave(2).ProviderBatchID, llm.BatchCompleted, func(it llm.BatchItem) *llm.BatchResult {
				r := reply(it.CustomID, `[{"op": "add", "path": "/n", "value": 3}]`)
				return &r
			})
			h.drive()
			d = h.ledger.job("d0")
			if d.status != "valid" || d.result == nil || string(d.result.Value) != `{"n":3}` || d.result.Attempts != 5 || d.result.Calls != 4 {
				t.Fatalf("the document job after its repair wave: %s %+v, want valid {\"n\":3} after 5 attempts, 4 calls", d.status, d.result)
			}
			if as := h.ledger.jobAttempts("d0"); len(as) != 5 || as[4].Step != string(fixpoint.StepRepair) || as[4].WaveID != 2 {
				t.Errorf("attempts: %d, the last %+v; want 5, the last the repair of wave 2", len(as), as[len(as)-1])
			}
			if got := h.ledger.wave(2); got.Status != store.WaveDone {
				t.Errorf("wave 2 is %s, want done", got.Status)
			}
		})
	}
}

// A parallel job none of whose chunk calls get a reply in the wave (the
// batch expired) keeps its place; the next wave asks all its chunks
// again, attempts after the failed ones.
func TestParallelJobChunksExpire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.v.cfg.MaxRequests = 3
	h.collect(h.documentJob("d0"))
	h.v.flushes.Wait()
	w := h.ledger.wave(1)
	h.provider.end(w.ProviderBatchID, llm.BatchExpired, func(llm.BatchItem) *llm.BatchResult { return nil })
	h.drive()
	if d := h.ledger.job("d0"); d.status != "queued" || d.waveID != 2 {
		t.Fatalf("the document job is %s in wave %d, want queued in wave 2", d.status, d.waveID)
	}
	var nos []string
	for _, r := range h.ledger.requests(2) {
		nos = append(nos, fmt.Sprint(r.AttemptNo))
	}
	if strings.Join(nos, ",") != "4,5,6" {
		t.Errorf("wave 2 holds attempts %v, want 4, 5, 6: every chunk again", nos)
	}
	if as := h.ledger.jobAttempts("d0"); len(as) != 3 || as[0].Class != fixpoint.OutcomeProvider {
		t.Errorf("attempts after the expired wave: %+v, want 3 failed", as)
	}
}

// chunkReplies answers each chunk call of a document job with `{}` and
// any other request with `{"n": 7}`, in reversed order.
func chunkReplies(h *harness, batchID string) []llm.BatchResult {
	var results []llm.BatchResult
	for _, it := range h.provider.itemsOf(batchID) {
		text := `{"n": 7}`
		if strings.HasPrefix(it.Request.User, "d") {
			text = `{}`
		}
		results = append(results, reply(it.CustomID, text))
	}
	slices.Reverse(results)
	return results
}

// The ledger down while a wave's outcomes are recorded: the wave is
// processed again, and each document job's chunk attempts and merge are
// recorded once, numbered as the wave numbered them.
func TestDocumentOutcomesLedgerDownIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.v.cfg.MaxRequests = 6
	h.collect(h.documentJob("d0"), h.documentJob("d1"))
	h.v.flushes.Wait()
	w := h.ledger.wave(1)
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(llm.BatchItem) *llm.BatchResult { return nil }, chunkReplies(h, w.ProviderBatchID)...)
	h.ledger.setInject(failOnce("RecordWaveOutcomes", nil, errors.New("connection refused")))
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveEnded {
		t.Fatalf("wave %s, want ended after the ledger failed", got.Status)
	}
	h.drive()
	for _, id := range []string{"d0", "d1"} {
		as := h.ledger.jobAttempts(id)
		if len(as) != 4 {
			t.Fatalf("job %s: %d attempts, want 3 chunks and the merge once", id, len(as))
		}
		for i, a := range as {
			if a.No != i+1 {
				t.Errorf("job %s: attempt %d numbered %d", id, i, a.No)
			}
		}
		if j := h.ledger.job(id); j.waveID != 2 {
			t.Errorf("job %s is in wave %d, want 2 (its repair)", id, j.waveID)
		}
	}
	if got := h.ledger.wave(2); got.Requests != 2 {
		t.Errorf("wave 2 holds %d requests, want the two repairs", got.Requests)
	}
}

// A document job the worker cannot rebuild when its wave ends (its schema
// gone) records none of its outcomes and goes on realtime, once, from
// the queue, which reports it.
func TestDocumentJobThatCannotBeRebuilt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.v.cfg.MaxRequests = 4
	h.collect(h.documentJob("d0"), h.envelope("j1", time.Time{}))
	h.v.flushes.Wait()
	w := h.ledger.wave(1)
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(llm.BatchItem) *llm.BatchResult { return nil }, chunkReplies(h, w.ProviderBatchID)...)
	h.worker.mu.Lock()
	h.worker.badJobs["d0"] = true
	h.worker.mu.Unlock()
	h.drive()
	if as := h.ledger.jobAttempts("d0"); len(as) != 0 {
		t.Errorf("d0 has %d attempts, want none", len(as))
	}
	h.checkRealtime(1, "d0")
	if j := h.ledger.job("j1"); j.status != "valid" {
		t.Errorf("j1 %s, want valid", j.status)
	}
}
