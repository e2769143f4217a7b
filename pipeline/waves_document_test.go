package pipeline_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// Document batches in batch delivery end to end on Postgres, NATS and the
// simulator's batch API: a parallel job's chunk calls go out together in
// its first wave, a sequential or agent job's one a wave; every call is an
// attempt of its wave at the batch price (a chunk's naming its chunk),
// each chunked job has its merge, the waves hold no request twice, and
// the jobs end valid: through repair waves, or, when too few jobs are
// left for a wave, realtime from the attempts the waves recorded.
func TestBatchDeliveryDocuments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		strategy      fixpoint.Strategy
		realtimeBelow int
	}{
		{"parallel", fixpoint.StrategyParallel, -1},
		{"parallel then realtime", fixpoint.StrategyParallel, 100},
		{"sequential", fixpoint.StrategySequential, -1},
		{"agent", fixpoint.StrategyAgent, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			batchDocuments(t, tc.strategy, tc.realtimeBelow)
		})
	}
}

// documentSim is a typical model whose provider batches end quickly.
func documentSim(t *testing.T) sim.Config {
	t.Helper()
	cfg, err := sim.Preset("typical")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 11
	cfg.Batch = sim.BatchConfig{CompletionDelay: 100 * time.Millisecond}
	return cfg
}

// enqueueDocuments enqueues n simulated agreements of about 50,000
// characters as batch "pd" for batch delivery under strategy.
func (h *harness) enqueueDocuments(strategy fixpoint.Strategy, n int) {
	h.t.Helper()
	var rows strings.Builder
	for i := range n {
		doc, err := sim.NewDocument(11, i, "en", sim.DocumentMinChars)
		if err != nil {
			h.t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("r%d", i), "text": doc.Text})
		rows.Write(append(b, '\n'))
	}
	cfg := h.enqueueConfig("pd")
	cfg.Schema, cfg.Template, cfg.DocumentField = []byte(sim.DocumentSchema), "Extract the agreement's fields and every subsidiary.", "text"
	// List passes too, under parallel: the typical model lists 50 items a
	// call, a chunk holds about 160, so a chunk's passes follow it in
	// later waves. A sequential job sends one call a wave, and its passes
	// would make about twenty waves a job: more than the test's time on a
	// loaded machine, for nothing parallel does not show.
	cfg.Limits = fixpoint.Limits{MaxAttempts: 3, Strategy: strategy, ChunkTokens: 4000, ChunkOverlap: 200}
	if strategy == fixpoint.StrategyParallel {
		cfg.Limits.ListPasses = fixpoint.ListPassesDefault
	}
	cfg.Provider, cfg.Delivery, cfg.Deadline = llm.ProviderOpenAI, queue.DeliveryBatch, time.Hour
	cfg.MaxTokens = 32000 // a repair writes the whole value: 500 subsidiaries
	if prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rows.String())); err != nil || prog.Recorded != n {
		h.t.Fatalf("enqueue: %+v, %v; want %d recorded", prog, err, n)
	}
}

func batchDocuments(t *testing.T, strategy fixpoint.Strategy, realtimeBelow int) {
	const n = 3
	h := newHarness(t, harnessConfig{Sim: documentSim(t)})
	h.enqueueDocuments(strategy, n)

	wcfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	wcfg.Drain = true
	wcfg.Wave.RealtimeBelow = realtimeBelow
	if err := h.startWorker(wcfg, nil, nil).wait(t, 90*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	h.checkWaveLedger("pd", n)
	// The worker's counters count every attempt the ledger has, the
	// merges recorded with the waves' outcomes too.
	if got, want := counted(t, wcfg.Metrics, "fixpoint_attempts_total", "", ""), h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'pd:%'`); got != float64(want) {
		t.Errorf("fixpoint_attempts_total %v, the ledger has %d attempts", got, want)
	}
	// The simulator's sequential answers leave its jobs invalid realtime
	// too (a field of the first part dropped by a later one): final is
	// what the waves must give them.
	wantValid := strategy != fixpoint.StrategySequential
	if p := h.progress("pd"); wantValid && p.Valid != n {
		t.Errorf("%d of %d valid (%+v)", p.Valid, n, p)
	}
	// A parallel job's first wave holds all its chunk calls: its first
	// attempts, one per chunk, are of one wave.
	if split := h.sqlInt(`SELECT count(*) FROM (SELECT job_id FROM attempts a WHERE job_id LIKE 'pd:%' AND attempt_no <=
		(SELECT count(DISTINCT chunk_n) FROM attempts b WHERE b.job_id = a.job_id AND b.step = 'chunk')
		GROUP BY job_id HAVING count(DISTINCT wave_id) <> 1 OR count(DISTINCT chunk_n) <> count(*) OR count(*) < 2) x`); strategy == fixpoint.StrategyParallel && split != 0 {
		t.Errorf("%d jobs whose chunk calls did not all go into their first wave", split)
	}
	// List passes went through the waves: attempts over a chunk that
	// start after the chunk's own.
	passes := h.sqlInt(`SELECT count(*) FROM attempts a WHERE job_id LIKE 'pd:%' AND step = 'chunk' AND chunk_start >
		(SELECT min(chunk_start) FROM attempts b WHERE b.job_id = a.job_id AND b.chunk_n = a.chunk_n)`)
	if strategy == fixpoint.StrategyParallel && passes == 0 {
		t.Errorf("no list pass recorded, want the passes of the chunks whose list the model cut")
	}
	wantMerges := 1
	if strategy == fixpoint.StrategyAgent {
		wantMerges = 0
	}
	for i := range n {
		id := fmt.Sprintf("pd:r%d", i)
		j, as := h.job(id)
		if wantValid && j.Status != fixpoint.StatusValid || !j.Status.Final() {
			t.Errorf("job %s: %s (%s), want valid", id, j.Status, j.Error)
		}
		merges, calls, realtime := 0, 0, 0
		for _, a := range as {
			switch a.Step {
			case string(fixpoint.StepMerge):
				merges++
				if a.WaveID != 0 || a.TokensIn != 0 {
					t.Errorf("job %s: merge attempt %d of wave %d with %d tokens, want no call", id, a.No, a.WaveID, a.TokensIn)
				}
			case string(fixpoint.StepChunk), string(fixpoint.StepRepair), string(fixpoint.StepAgent):
				calls++
				inWave := a.WaveID != 0 && a.PriceBasis == string(fixpoint.PriceBasisBatch)
				if !inWave {
					realtime++
				}
				// Realtime, at the realtime price, only after the waves.
				if inWave && realtime > 0 || !inWave && realtimeBelow < 0 || (a.Step == string(fixpoint.StepChunk)) != (a.Chunk != nil) {
					t.Errorf("job %s: %s attempt %d of wave %d at %s, chunk %v; want a wave's call at the batch price", id, a.Step, a.No, a.WaveID, a.PriceBasis, a.Chunk)
				}
			default:
				t.Errorf("job %s: attempt %d of step %q", id, a.No, a.Step)
			}
		}
		if merges != wantMerges || j.Calls != calls || j.Attempts != len(as) {
			t.Errorf("job %s: %d merges, %d calls of %d attempts; the job says %d calls, %d attempts; want %d and its totals over them all",
				id, merges, calls, len(as), j.Calls, j.Attempts, wantMerges)
		}
	}
}

// A worker killed at each point of a parallel batch's waves where the
// ledger is left in another state, another draining the batch: every job
// final once, every chunk call of every provider batch recorded once.
func TestBatchDeliveryDocumentsKillAtEachPoint(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"download", "outcomes", "recorded_results", "repair_recorded", "published"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			const n = 3
			h := newHarness(t, harnessConfig{Sim: documentSim(t)})
			h.enqueueDocuments(fixpoint.StrategyParallel, n)
			client := h.batchClient(llm.ProviderOpenAI)
			cfgA := h.waveWorker(llm.ProviderOpenAI, client)
			cfgB := h.waveWorker(llm.ProviderOpenAI, client)
			if point == "published" {
				cfgA.Wave.RealtimeBelow, cfgB.Wave.RealtimeBelow = 1000, 1000 // every repair goes realtime
			}
			a := h.startFrozen(cfgA, point)
			h.drainThenKill(cfgB, a)
			h.checkWaveLedger("pd", n)
			if merges := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'pd:%' AND step = 'merge'`); merges != n {
				t.Errorf("%d merge attempts, want one a job", merges)
			}
		})
	}
}
