package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// A lane is the jobs of one provider and model, as their envelopes name
// them. A lane whose model the provider does not have (a typo, a model
// not pulled) is stopped: every job of it would fail alike, and as a
// bad_request each would burn its deliveries to dead. The worker goes on
// with its other lanes, and holds the stopped lane's jobs it pulls
// without calling (parked: their messages kept in progress, so no
// delivery is spent), up to its concurrency; past that it stops pulling.
// Readiness (Refusing) names the lane until the worker stops; then the
// parked jobs are handed back, still queued.

// laneKey names a lane.
type laneKey struct{ provider, model string }

func (k laneKey) String() string { return k.provider + "/" + k.model }

// stoppedLane is a lane stopped for good in this worker.
type stoppedLane struct {
	key   laneKey
	cause error
	since time.Time
}

// parkedJob is a message of a stopped lane held without a call.
type parkedJob struct {
	msg       jetstream.Msg
	env       *queue.Envelope
	delivered int
	stopBeat  func()
}

// lanes holds the stopped lanes of a worker and the jobs it parked.
type lanes struct {
	mu      sync.Mutex
	stopped map[laneKey]*stoppedLane
	parked  []parkedJob
	full    chan struct{} // closed once parked reaches the cap
	isFull  bool
	cap     int
}

func newLanes(parkMax int) *lanes {
	return &lanes{stopped: map[laneKey]*stoppedLane{}, full: make(chan struct{}), cap: parkMax}
}

func laneOf(env *queue.Envelope) laneKey { return laneKey{provider: env.Provider, model: env.Model} }

// stop stops the lane of env for cause; it reports whether the lane was
// running until now.
func (l *lanes) stop(env *queue.Envelope, cause error) bool {
	k := laneOf(env)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.stopped[k]; ok {
		return false
	}
	l.stopped[k] = &stoppedLane{key: k, cause: cause, since: time.Now()}
	return true
}

// isStopped reports whether env's lane is stopped.
func (l *lanes) isStopped(env *queue.Envelope) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.stopped[laneOf(env)]
	return ok
}

// park holds p; it reports whether the cap is reached with it.
func (l *lanes) park(p parkedJob) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parked = append(l.parked, p)
	if len(l.parked) >= l.cap && !l.isFull {
		l.isFull = true
		close(l.full)
	}
	return len(l.parked) >= l.cap
}

// take removes and returns every parked job.
func (l *lanes) take() []parkedJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parked
	l.parked = nil
	return p
}

// state returns the parked count and whether any lane is stopped.
func (l *lanes) state() (parked int, stopped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.parked), len(l.stopped) > 0
}

// err describes the stopped lanes, nil when none is: for readiness and a
// drain's exit.
func (l *lanes) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.stopped) == 0 {
		return nil
	}
	var parts []string
	for _, s := range l.stopped {
		parts = append(parts, fmt.Sprintf("lane %s stopped since %s: %v", s.key, s.since.UTC().Format(time.RFC3339), s.cause))
	}
	slices.Sort(parts)
	return fmt.Errorf("%s (%d of its jobs held here, the rest stay queued)", strings.Join(parts, "; "), len(l.parked))
}

// errLaneStopped is the cause of a parked job handed back at a stop.
var errLaneStopped = errors.New("its lane is stopped: the provider has no such model")

// laneCause is why env's lane stopped: the provider's own answer when
// err carries it (not the job's id, nor the loop's wrapping), else err.
func laneCause(env *queue.Envelope, err error) error {
	var pe *fixpoint.ProviderError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s has no model %q: %w", env.Provider, env.Model, pe)
	}
	return fmt.Errorf("%s has no model %q: %w", env.Provider, env.Model, err)
}

// stopLane stops env's lane for cause, logging it once, loudly.
func (w *Worker) stopLane(ctx context.Context, env *queue.Envelope, cause error) {
	if !w.lanes.stop(env, cause) {
		return
	}
	w.cfg.Metrics.LaneStopped.WithLabelValues(env.Provider, env.Model).Set(1)
	w.log.ErrorContext(ctx, "worker: lane stopped: the provider has no such model; its jobs stay queued, no more calls are made for it, the other lanes go on. Fix the model name (or pull the model) and restart the worker",
		slog.String("provider", env.Provider), slog.String("model", env.Model), slog.String("error", cause.Error()))
}

// parkIfStopped holds d's message without a call when its lane is
// stopped, and reports whether it did.
func (w *Worker) parkIfStopped(ctx context.Context, d *delivery) bool {
	if !w.lanes.isStopped(d.env) {
		return false
	}
	w.park(ctx, d)
	return true
}

// park holds d's message, reporting progress on it, until the worker
// stops: then it is handed back (releaseParked). At the cap, pulling stops.
func (w *Worker) park(ctx context.Context, d *delivery) {
	p := parkedJob{msg: d.msg, env: d.env, delivered: d.delivered, stopBeat: w.heartbeat(d.msg)}
	// What the delivery's calls cost is recorded (saveInterrupted).
	w.journal.done(journalKey(d.env.JobID, d.delivered))
	if w.lanes.park(p) {
		d.log.WarnContext(ctx, "worker: jobs of stopped lanes fill this worker's concurrency: it stops pulling", slog.Int("parked", w.cfg.Concurrency))
	}
}

// releaseParked hands back the jobs of stopped lanes held here: they stay
// queued, for a worker whose provider has the model.
func (w *Worker) releaseParked(ctx context.Context) {
	for _, p := range w.lanes.take() {
		p.stopBeat()
		w.dispose(ctx, p.msg, p.env, queue.Disposition{Kind: queue.DispRelease, Cause: errLaneStopped})
	}
}
