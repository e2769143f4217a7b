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
// Readiness (Refusing) names the lane. Every LaneProbe one parked job of
// the lane runs as a probe: when its model is still missing it is parked
// again; when the provider answers, the lane resumes and its parked jobs
// run, none of them delivered again. When the worker stops, the parked
// jobs are handed back, still queued.

// laneKey names a lane.
type laneKey struct{ provider, model string }

func (k laneKey) String() string { return k.provider + "/" + k.model }

// stoppedLane is a lane stopped in this worker.
type stoppedLane struct {
	key   laneKey
	cause error
	since time.Time
	// next is when a parked job of the lane may run as a probe; probe is
	// that job's id while it runs.
	next  time.Time
	probe string
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
	ready   []parkedJob   // of lanes resumed, to run (by probeLanes)
	isFull  bool          // parked reached the cap
	unfull  chan struct{} // closed when parked drops below the cap again
	cap     int
	every   time.Duration // between probes of a stopped lane
	// probes counts the probes each held job ran: a probe's call is kept
	// with it as its hold, apart from the delivery's first call.
	probes map[string]int
}

func newLanes(parkMax int, probeEvery time.Duration) *lanes {
	return &lanes{stopped: map[laneKey]*stoppedLane{}, unfull: make(chan struct{}), cap: parkMax, every: probeEvery, probes: map[string]int{}}
}

func laneOf(env *queue.Envelope) laneKey { return laneKey{provider: env.Provider, model: env.Model} }

// stop stops the lane of env for cause; it reports whether the lane was
// running until now. A probe that found the model still missing ends
// here: the next one waits its interval.
func (l *lanes) stop(env *queue.Envelope, cause error) bool {
	k := laneOf(env)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if s, ok := l.stopped[k]; ok {
		if s.probe == env.JobID {
			s.probe, s.next, s.cause = "", now.Add(l.every), cause
		}
		return false
	}
	l.stopped[k] = &stoppedLane{key: k, cause: cause, since: now, next: now.Add(l.every)}
	return true
}

// isStopped reports whether env's lane is stopped and env is not its
// probe.
func (l *lanes) isStopped(env *queue.Envelope) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.stopped[laneOf(env)]
	return ok && s.probe != env.JobID
}

// isProbe reports whether env is its stopped lane's probe.
func (l *lanes) isProbe(env *queue.Envelope) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.stopped[laneOf(env)]
	return ok && s.probe == env.JobID
}

// probeEnded is called when a probe's delivery ends. One that neither
// found the model missing nor got an answer (an outage, a stop) lets the
// next probe wait its interval; a delivery not held again forgets its
// probe count.
func (l *lanes) probeEnded(env *queue.Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.stopped[laneOf(env)]; ok && s.probe == env.JobID {
		s.probe, s.next = "", time.Now().Add(l.every)
	}
	if !slices.ContainsFunc(l.parked, func(p parkedJob) bool { return p.env.JobID == env.JobID }) {
		delete(l.probes, env.JobID) // its delivery ended: no more probes of it
	}
}

// takeProbe removes and returns a parked job of a stopped lane whose next
// probe is due, marking it as the lane's probe.
func (l *lanes) takeProbe(now time.Time) (parkedJob, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.parked {
		s := l.stopped[laneOf(p.env)]
		if s == nil || s.probe != "" || now.Before(s.next) {
			continue
		}
		s.probe = p.env.JobID
		l.probes[p.env.JobID]++
		l.parked = slices.Delete(l.parked, i, i+1)
		l.checkUnfull()
		return p, true
	}
	return parkedJob{}, false
}

// resume restarts env's lane and moves its parked jobs to ready; it
// returns how many.
func (l *lanes) resume(env *queue.Envelope) int {
	k := laneOf(env)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.stopped, k)
	n := len(l.ready)
	l.parked = slices.DeleteFunc(l.parked, func(p parkedJob) bool {
		if laneOf(p.env) == k {
			delete(l.probes, p.env.JobID)
			l.ready = append(l.ready, p)
			return true
		}
		return false
	})
	l.checkUnfull()
	return len(l.ready) - n
}

// probeNo is how many probes env's delivery ran: 0 for none.
func (l *lanes) probeNo(env *queue.Envelope) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probes[env.JobID]
}

// takeReady removes and returns the jobs of resumed lanes.
func (l *lanes) takeReady() []parkedJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.ready
	l.ready = nil
	return r
}

// checkUnfull wakes the pull when parked drops below the cap.
func (l *lanes) checkUnfull() {
	if l.isFull && len(l.parked) < l.cap {
		l.isFull = false
		close(l.unfull)
		l.unfull = make(chan struct{})
	}
}

// full reports whether parked jobs fill the cap, and a channel closed
// when they no longer do.
func (l *lanes) full() (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.isFull, l.unfull
}

// park holds p; it reports whether the cap is reached with it.
func (l *lanes) park(p parkedJob) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parked = append(l.parked, p)
	if len(l.parked) >= l.cap {
		l.isFull = true
	}
	return len(l.parked) >= l.cap
}

// take removes and returns every held job, parked or ready.
func (l *lanes) take() []parkedJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := slices.Concat(l.parked, l.ready)
	l.parked, l.ready = nil, nil
	return p
}

// state returns the count of held jobs and whether any lane is stopped.
func (l *lanes) state() (parked int, stopped bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.parked) + len(l.ready), len(l.stopped) > 0
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
	w.log.ErrorContext(ctx, "worker: lane stopped: the provider has no such model; its jobs stay queued, the other lanes go on. Pull the model (one held job tries it every lane-probe interval, and the lane resumes when it answers) or fix the model name",
		slog.String("provider", env.Provider), slog.String("model", env.Model), slog.Duration("lane_probe", w.cfg.LaneProbe), slog.String("error", cause.Error()))
}

// resumeLane restarts env's lane, its probe answered: probeLanes runs the
// jobs held for it, each on its delivery.
func (w *Worker) resumeLane(ctx context.Context, env *queue.Envelope) {
	n := w.lanes.resume(env)
	w.cfg.Metrics.LaneStopped.WithLabelValues(env.Provider, env.Model).Set(0)
	w.log.InfoContext(ctx, "worker: lane resumed: the provider answered its probe; its held jobs run",
		slog.String("provider", env.Provider), slog.String("model", env.Model), slog.Int("held", n))
}

// runHeld runs a parked job's delivery (its message still in progress).
func (w *Worker) runHeld(r *runState, p parkedJob) {
	p.stopBeat()
	w.inFlight.Add(1)
	w.cfg.Metrics.InFlight.Inc()
	r.jobs.Go(func() {
		defer func() {
			w.inFlight.Add(-1)
			w.cfg.Metrics.InFlight.Dec()
		}()
		w.handleSafely(r.jobCtx, p.msg)
	})
}

// probeLanes runs a due probe of each stopped lane, and the held jobs of
// a lane resumed, until pulling stops. It is not one of the jobs: starting
// a job from a job could wait on the pool for ever.
func (w *Worker) probeLanes(r *runState) {
	tick := time.NewTicker(min(w.cfg.LaneProbe/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-r.pullCtx.Done():
			return
		case now := <-tick.C:
			for _, p := range w.lanes.takeReady() {
				w.runHeld(r, p)
			}
			for {
				p, ok := w.lanes.takeProbe(now)
				if !ok {
					break
				}
				w.runHeld(r, p)
			}
		}
	}
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
