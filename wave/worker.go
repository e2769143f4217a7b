package wave

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Worker is what the driver needs of the worker whose batch-delivery jobs
// it collects: what becomes of their messages, and the realtime side's
// repair step, ledger retries, metrics and stop stay the worker's.
type Worker interface {
	// Dispose carries d out on a job's message.
	Dispose(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, d queue.Disposition)
	// HandBack hands a job's message back for cause, as the worker
	// decides for its delivered-th delivery (dead at the last).
	HandBack(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int, cause error)
	// Finish hands a job final before any call to the worker's writer.
	Finish(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result)
	// Heartbeat reports progress on msg until stop is called.
	Heartbeat(msg jetstream.Msg) (stop func())
	// Stopping reports that the worker is stopping.
	Stopping() bool
	// Abort stops the worker with err: a fault no job of it can get past.
	Abort(err error)
	// Job builds the repair step's job of env.
	Job(ctx context.Context, env *queue.Envelope) (*repair.Job, error)
	// StepConfig is the repair step's configuration for the provider's
	// calls billed at basis.
	StepConfig(provider string, basis fixpoint.PriceBasis) repair.Config
	// RetryLedger runs op until it succeeds, the ledger refuses it
	// (store.IsRefused) or the worker stops, pausing pulls meanwhile.
	RetryLedger(ctx context.Context, log *slog.Logger, op func() error) error
	// WaveStep counts a step of a provider's wave ("recorded",
	// "submitted", "done").
	WaveStep(provider, step string)
	// Observe counts the outcomes of a wave's requests the ledger took:
	// attempts, tokens and the jobs they finished.
	Observe(outs []store.WaveOutcome)
}
