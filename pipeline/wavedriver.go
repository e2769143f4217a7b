package pipeline

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// newWaveDriver returns the driver of w's batch-delivery jobs: nil (they
// run realtime) when the ledger has no waves.
func newWaveDriver(w *Worker, ledger Ledger) *wave.Driver {
	wl, ok := ledger.(wave.Ledger)
	if !ok {
		return nil
	}
	clients := map[string]wave.BatchClient{}
	for name, c := range w.cfg.Providers {
		if bc, ok := c.(wave.BatchClient); ok {
			clients[name] = bc
		}
	}
	return wave.New(waveWorker{w}, wave.Setup{Ledger: wl, Clients: clients, JS: w.js, Queue: w.cfg.Queue,
		Config: w.cfg.Wave, Log: w.log, Tracer: w.cfg.Tracer, Hook: w.cfg.waveHook})
}

// waveWorker is the worker as its wave driver sees it.
type waveWorker struct{ w *Worker }

var _ wave.Worker = waveWorker{}

func (ww waveWorker) Dispose(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, d queue.Disposition) {
	ww.w.dispose(ctx, msg, env, d)
}

func (ww waveWorker) HandBack(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int, cause error) {
	ww.w.dispose(ctx, msg, env, ww.w.decide(ctx, delivered, cause))
}

func (ww waveWorker) Finish(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result) {
	ww.w.finish(ctx, msg, env, res)
}

func (ww waveWorker) Heartbeat(msg jetstream.Msg) (stop func()) { return ww.w.heartbeat(msg) }

func (ww waveWorker) Stopping() bool { return ww.w.stoppingNow() }

func (ww waveWorker) Abort(err error) { ww.w.abort(err) }

func (ww waveWorker) Job(ctx context.Context, env *queue.Envelope) (*repair.Job, error) {
	return ww.w.buildJob(ctx, env)
}

// StepConfig is the loop's step configuration with calls billed at basis.
func (ww waveWorker) StepConfig(provider string, basis fixpoint.PriceBasis) repair.Config {
	cfg := ww.w.loops[provider].step
	cfg.PriceBasis = basis
	return cfg
}

func (ww waveWorker) RetryLedger(ctx context.Context, log *slog.Logger, op func() error) error {
	return ww.w.retryLedger(ctx, log, op)
}

func (ww waveWorker) WaveStep(provider, step string) {
	ww.w.cfg.Metrics.Waves.WithLabelValues(provider, step).Inc()
}

// Observe counts the outcomes in the metrics, and the jobs they finished in
// the progress log's finished jobs.
func (ww waveWorker) Observe(outs []store.WaveOutcome) {
	ww.w.cfg.Metrics.observeWave(outs)
	for i := range outs {
		if outs[i].Finished {
			ww.w.finished.Add(1)
		}
	}
}
