package wave

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Driver drives a worker's batch-delivery jobs: it collects their first
// requests into waves, submits and polls the waves, and records their
// results. A nil Driver drives nothing.
type Driver struct {
	w       Worker
	ledger  Ledger
	clients map[string]BatchClient
	// homes are where this worker drives waves, by provider: its queue
	// stream and the provider's endpoint (store.WaveParams.Home).
	homes map[string]string
	cfg   Config
	log   *slog.Logger
	js    jetstream.JetStream
	queue queue.Config
	clock clock
	// tracer traces the waves' provider steps; targets are what their
	// spans say of each provider's server.
	tracer  trace.Tracer
	targets map[string]target

	mu      sync.Mutex
	pending map[waveKey]*collecting
	flushes sync.WaitGroup
	// driving are the waves a goroutine of this driver holds, from their
	// record or claim to the end of their step: its Run loop, claiming
	// one whose lease lapsed meanwhile (the same owner), leaves it be.
	dmu     sync.Mutex
	driving map[int64]bool
	// Setup.Hook (tests): called at each point a crash
	// leaves the ledger in another state.
	hook func(point string, waveID int64)
}

// Setup is what a Driver works with besides its worker.
type Setup struct {
	Ledger Ledger
	// Clients are the worker's providers that have a batch API, by name.
	Clients map[string]BatchClient
	// JS and Queue are where jobs go back to finish realtime.
	JS     jetstream.JetStream
	Queue  queue.Config
	Config Config
	Log    *slog.Logger
	// Tracer, when set, traces each step of a wave that calls its
	// provider (submit, poll, collect, cancel). Nil (the default) traces
	// nothing.
	Tracer trace.Tracer
	// Hook, when set, runs at each point of a wave's life where a crash
	// leaves the ledger in another state (tests kill workers there).
	Hook func(point string, waveID int64)
}

// New returns a driver of the waves of w's batch-delivery jobs.
func New(w Worker, s Setup) *Driver {
	return newDriver(w, s, systemClock{})
}

// newDriver is New on the clock c.
func newDriver(w Worker, s Setup, c clock) *Driver {
	v := &Driver{w: w, ledger: s.Ledger, clients: map[string]BatchClient{}, homes: map[string]string{}, cfg: s.Config.WithDefaults(),
		log: s.Log, js: s.JS, queue: s.Queue.WithDefaults(), clock: c, pending: map[waveKey]*collecting{}, hook: s.Hook,
		driving: map[int64]bool{}, tracer: tracerOr(s.Tracer), targets: map[string]target{}}
	for name, bc := range s.Clients {
		if !bc.SupportsBatch() {
			continue
		}
		v.clients[name] = bc
		endpoint := name
		if cc, ok := bc.(interface{ Config() llm.Config }); ok {
			endpoint = name + " " + llm.RedactURL(cc.Config().BaseURL)
			v.targets[name] = targetOf(cc.Config().BaseURL)
		}
		v.homes[name] = "stream " + v.queue.Stream + ", " + endpoint
	}
	return v
}

// strayWaveEvery is how often an idle wave driver looks for open waves it
// may not drive.
const strayWaveEvery = time.Minute

// warnStray says which open waves no worker like this one will drive: a
// worker started with another queue or provider endpoint than the one
// that submitted them (a changed base URL in a cron line) would otherwise
// wait for them in silence.
func (v *Driver) warnStray(ctx context.Context) {
	stray, err := v.ledger.StrayWaves(ctx, v.homeList())
	if err != nil || len(stray) == 0 {
		return
	}
	for k, n := range stray {
		v.log.WarnContext(ctx, "worker: open provider batches this worker does not drive: their queue or provider endpoint is another; start a worker with theirs",
			slog.String("batch", k[0]), slog.Int("waves", n), slog.String("their_home", k[1]), slog.String("this_worker", strings.Join(v.homeList(), "; ")))
	}
}

// homeList is every home of this worker, for ClaimWave.
func (v *Driver) homeList() []string {
	return slices.Sorted(maps.Values(v.homes))
}

func (v *Driver) at(point string, waveID int64) {
	if v.hook != nil {
		v.hook(point, waveID)
	}
}

// take marks wave id held by a goroutine of this driver; false when one
// already holds it.
func (v *Driver) take(id int64) bool {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	if v.driving[id] {
		return false
	}
	v.driving[id] = true
	return true
}

// drop ends the hold take marked.
func (v *Driver) drop(id int64) {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	delete(v.driving, id)
}

// Stop hands back the jobs collected for waves not yet recorded, and waits
// for the waves being recorded.
func (v *Driver) Stop(ctx context.Context) {
	v.mu.Lock()
	var cols []*collecting
	for _, col := range v.pending {
		col.flushed = true
		col.stopTimer()
		cols = append(cols, col)
	}
	clear(v.pending)
	v.mu.Unlock()
	for _, col := range cols {
		for _, c := range col.items {
			c.stopBeat()
			v.w.Dispose(ctx, c.msg, c.env, queue.Disposition{Kind: queue.DispRelease})
		}
	}
	v.flushes.Wait()
}

// Drives reports whether the driver drives waves: the worker has a
// provider with a batch API.
func (v *Driver) Drives() bool { return v != nil && len(v.clients) > 0 }

// Open reports whether waves are being collected or waves this worker can
// drive are open in the ledger (a draining worker waits for them; another
// provider's, or those of another queue or provider endpoint, are not its
// to wait for); a ledger error counts as open.
func (v *Driver) Open(ctx context.Context) bool {
	if v == nil || len(v.clients) == 0 {
		return false // it drives no waves
	}
	v.mu.Lock()
	n := len(v.pending)
	v.mu.Unlock()
	if n > 0 {
		return true
	}
	providers := make([]string, 0, len(v.clients))
	for p := range v.clients {
		providers = append(providers, p)
	}
	open, err := v.ledger.OpenWaves(ctx, providers, v.homeList())
	return err != nil || open > 0
}

// JobAttempts returns the attempts the ledger holds for a batch-delivery
// job's run (none without a wave ledger).
func (v *Driver) JobAttempts(ctx context.Context, env *queue.Envelope) ([]store.Attempt, error) {
	if v == nil {
		return nil, nil
	}
	return v.ledger.JobAttempts(ctx, env.JobID, env.RunOrFirst())
}
