package wave

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// fakeLedger is the wave ledger in memory, as store.Store keeps it in
// Postgres: waves and their requests, jobs and their place in a wave,
// attempts, leases and due times on the test's clock. inject, when set,
// can fail any call; it is called with the call's name and argument.
type fakeLedger struct {
	mu    sync.Mutex
	clock *fakeClock

	waves map[int64]*store.Wave
	reqs  map[int64][]store.WaveRequest // by wave, in custom id order
	jobs  map[string]*fakeJob
	// attempts are the attempt rows by job and run; apart are the
	// attempts kept apart from a job cancelled or requeued meanwhile.
	attempts map[jobRun][]store.Attempt
	apart    []store.Attempt

	// inject returns the error a call fails with, or nil: call is the
	// method's name, arg its main argument (a store.WaveUpdate, the
	// []store.WaveOutcome, the store.WaveParams, or the wave id).
	inject func(call string, arg any) error
	// updates are the updates applied to each wave, in order.
	updates map[int64][]store.WaveUpdate
	// calls counts the calls of each method, failed ones too.
	calls map[string]int
}

type jobRun struct {
	id  string
	run int
}

// fakeJob is a job row: its status, run, place in a wave and result.
type fakeJob struct {
	status string
	run    int
	waveID int64
	result *store.Result
	totals *store.Result
}

func newFakeLedger(c *fakeClock) *fakeLedger {
	return &fakeLedger{clock: c, waves: map[int64]*store.Wave{}, reqs: map[int64][]store.WaveRequest{},
		jobs: map[string]*fakeJob{}, attempts: map[jobRun][]store.Attempt{}, updates: map[int64][]store.WaveUpdate{},
		calls: map[string]int{}}
}

var _ Ledger = (*fakeLedger)(nil)

// call counts a call and returns the error inject gives it. l.mu is held.
func (l *fakeLedger) call(name string, arg any) error {
	l.calls[name]++
	if l.inject == nil {
		return nil
	}
	return l.inject(name, arg)
}

// refused is the ledger's refusal of a row it cannot hold.
func refused(what string) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, what)
}

func (l *fakeLedger) RecordWave(ctx context.Context, p store.WaveParams) (*store.Wave, []store.WaveRequest, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("RecordWave", p); err != nil {
		return nil, nil, err
	}
	if p.Batch == "" || p.Provider == "" || p.Model == "" || len(p.Requests) == 0 {
		return nil, nil, refused("batch, provider, model and requests are required")
	}
	placed := map[jobRun]map[int]bool{}
	for _, rs := range l.reqs {
		for _, r := range rs {
			k := jobRun{r.JobID, r.Run}
			if placed[k] == nil {
				placed[k] = map[int]bool{}
			}
			placed[k][r.AttemptNo] = true
		}
	}
	// As the store: a job's requests all or none, each attempt once.
	var taken []store.WaveRequest
	clash := map[string]bool{}
	seen := map[jobRun]map[int]bool{}
	for _, r := range p.Requests {
		j := l.jobs[r.JobID]
		run := max(r.Run, 1)
		k := jobRun{r.JobID, run}
		if j == nil || j.status != "queued" || j.run != run || (j.waveID != 0 && j.waveID != p.From) || seen[k][r.AttemptNo] {
			continue
		}
		if placed[k][r.AttemptNo] {
			clash[r.JobID] = true
			continue
		}
		if seen[k] == nil {
			seen[k] = map[int]bool{}
		}
		seen[k][r.AttemptNo] = true
		r.Run, r.Recorded = run, false
		taken = append(taken, r)
	}
	taken = slices.DeleteFunc(taken, func(r store.WaveRequest) bool { return clash[r.JobID] })
	if len(taken) == 0 {
		return nil, nil, nil
	}
	now := l.clock.Now()
	number := 1
	for _, w := range l.waves {
		if w.Batch == p.Batch {
			number = max(number, w.Number+1)
		}
	}
	w := &store.Wave{ID: int64(len(l.waves) + 1), Batch: p.Batch, Run: max(p.Run, 1), Number: number, Provider: p.Provider,
		Model: p.Model, Deadline: p.Deadline, Status: store.WaveRecorded, Requests: len(taken), LeaseOwner: p.Owner,
		Home: p.Home, CreatedAt: now, LeaseUntil: now.Add(p.Lease), NextPollAt: now.Add(p.Lease)}
	for i := range taken {
		taken[i].CustomID = fmt.Sprintf("w%d-%d", w.ID, i)
		l.jobs[taken[i].JobID].waveID = w.ID
	}
	l.waves[w.ID] = w
	l.reqs[w.ID] = slices.Clone(taken)
	cp := *w
	return &cp, taken, nil
}

func (l *fakeLedger) WaveRequests(ctx context.Context, waveID int64) ([]store.WaveRequest, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("WaveRequests", waveID); err != nil {
		return nil, err
	}
	return slices.Clone(l.reqs[waveID]), nil
}

// ClaimWave gives owner the open wave of homes that is due first: its
// lease free or expired and its next poll due.
func (l *fakeLedger) ClaimWave(ctx context.Context, owner string, lease time.Duration, homes []string) (*store.Wave, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("ClaimWave", owner); err != nil {
		return nil, err
	}
	now := l.clock.Now()
	var due *store.Wave
	for _, w := range l.waves {
		if !open(w) || (w.Home != "" && !slices.Contains(homes, w.Home)) ||
			(!w.LeaseUntil.IsZero() && !w.LeaseUntil.Before(now)) || (!w.NextPollAt.IsZero() && w.NextPollAt.After(now)) {
			continue
		}
		if due == nil || w.NextPollAt.Before(due.NextPollAt) || (w.NextPollAt.Equal(due.NextPollAt) && w.ID < due.ID) {
			due = w
		}
	}
	if due == nil {
		return nil, nil
	}
	due.LeaseOwner, due.LeaseUntil = owner, now.Add(lease)
	due.Polls++
	cp := *due
	return &cp, nil
}

func open(w *store.Wave) bool { return w.Status != store.WaveDone && w.Status != store.WaveFailed }

func (l *fakeLedger) StrayWaves(ctx context.Context, homes []string) (map[[2]string]int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("StrayWaves", homes); err != nil {
		return nil, err
	}
	out := map[[2]string]int{}
	for _, w := range l.waves {
		if open(w) && w.Home != "" && !slices.Contains(homes, w.Home) {
			out[[2]string{w.Batch, w.Home}]++
		}
	}
	return out, nil
}

// UpdateWave applies u as store.Store.UpdateWave does, while owner holds
// the wave's lease.
func (l *fakeLedger) UpdateWave(ctx context.Context, id int64, owner string, u store.WaveUpdate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("UpdateWave", u); err != nil {
		return err
	}
	w := l.waves[id]
	if w == nil || w.LeaseOwner != owner || owner == "" {
		return fmt.Errorf("update wave %d: %w", id, store.ErrLeaseLost)
	}
	l.updates[id] = append(l.updates[id], u)
	now := l.clock.Now()
	// A wave cancelled while its owner submitted it stays cancelling.
	keepCancelling := w.Status == store.WaveCancelling && (u.Status == store.WaveUploaded || u.Status == store.WaveSubmitted)
	if u.Status == store.WaveSubmitted && w.SubmittedAt.IsZero() {
		w.SubmittedAt = now
	}
	if (u.Status == store.WaveEnded || u.Status == store.WaveFailed) && w.EndedAt.IsZero() {
		w.EndedAt = now
	}
	if u.Status != "" && !keepCancelling {
		w.Status = u.Status
	}
	w.InputFileID = cmp.Or(u.InputFileID, w.InputFileID)
	w.ProviderBatchID = cmp.Or(u.ProviderBatchID, w.ProviderBatchID)
	if c := u.Counts; c != nil {
		w.Succeeded, w.Errored, w.Expired, w.Cancelled = c[0], c[1], c[2], c[3]
	}
	w.Error = cmp.Or(u.Error, w.Error)
	switch {
	case u.NextPoll > 0:
		w.LeaseOwner, w.LeaseUntil = "", time.Time{}
		w.NextPollAt = now.Add(u.NextPoll)
		if keepCancelling {
			w.NextPollAt = now
		}
	case u.Lease > 0:
		w.LeaseUntil = now.Add(u.Lease)
	}
	switch u.Missing {
	case 1:
		w.MissingSince = cmp.Or(w.MissingSince, now)
	case -1:
		w.MissingSince = time.Time{}
	}
	return nil
}

// RecordWaveOutcomes records outcomes in one transaction, as the store
// does: all or none. It refuses what a numeric(18, 8) column cannot hold,
// as Postgres does.
func (l *fakeLedger) RecordWaveOutcomes(ctx context.Context, outs []store.WaveOutcome) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("RecordWaveOutcomes", slices.Clone(outs)); err != nil {
		return 0, err
	}
	for _, o := range outs {
		if _, ok := l.request(o.WaveID, o.CustomID); !ok {
			return 0, refused(fmt.Sprintf("wave %d has no request %s", o.WaveID, o.CustomID))
		}
		if err := fits(o); err != nil {
			return 0, fmt.Errorf("record %d wave outcomes: %w", len(outs), err)
		}
	}
	inserted := 0
	for i := range outs {
		inserted += l.recordOutcome(&outs[i])
	}
	return inserted, nil
}

// fits refuses an outcome whose cost the ledger's columns cannot hold.
func fits(o store.WaveOutcome) error {
	costs := []float64{o.Attempt.CostUSD}
	for _, r := range []*store.Result{o.Result, o.Totals} {
		if r != nil {
			costs = append(costs, r.CostUSD)
		}
	}
	for _, c := range costs {
		if math.IsNaN(c) || math.IsInf(c, 0) || math.Abs(c) > store.MaxCostUSD {
			return refused(fmt.Sprintf("numeric field overflow: cost %g", c))
		}
	}
	return nil
}

// request returns a wave's request by custom id. l.mu is held.
func (l *fakeLedger) request(waveID int64, customID string) (*store.WaveRequest, bool) {
	for i := range l.reqs[waveID] {
		if r := &l.reqs[waveID][i]; r.CustomID == customID {
			return r, true
		}
	}
	return nil, false
}

// recordOutcome records one outcome and returns how many attempts it
// inserted. l.mu is held.
func (l *fakeLedger) recordOutcome(o *store.WaveOutcome) int {
	o.Inserted, o.Finished = false, false
	r, _ := l.request(o.WaveID, o.CustomID)
	if r.Recorded {
		return 0
	}
	r.Recorded = true
	a := o.Attempt
	a.WaveID = o.WaveID
	j := l.jobs[r.JobID]
	rows := []store.Attempt{a}
	rows = append(rows, o.Also...)
	if j.status != "queued" || j.run != r.Run {
		l.apart = append(l.apart, rows...)
		o.Inserted = true
		return 0
	}
	k := jobRun{r.JobID, r.Run}
	for _, b := range l.attempts[k] {
		if b.No == a.No {
			return 0
		}
	}
	l.attempts[k] = append(l.attempts[k], rows...)
	o.Inserted = true
	if o.Result != nil {
		res := *o.Result
		j.status, j.result, j.waveID = string(res.Status), &res, 0
		o.Finished = true
	} else if o.Totals != nil {
		t := *o.Totals
		j.totals = &t
	}
	return 1
}

func (l *fakeLedger) ReleaseWaveJobs(ctx context.Context, waveID int64, ids []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("ReleaseWaveJobs", waveID); err != nil {
		return err
	}
	for _, id := range ids {
		if j := l.jobs[id]; j != nil && j.waveID == waveID {
			j.waveID = 0
		}
	}
	return nil
}

func (l *fakeLedger) PlacedJobs(ctx context.Context, waveID int64) ([]store.WaveRequest, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("PlacedJobs", waveID); err != nil {
		return nil, err
	}
	var out []store.WaveRequest
	for _, r := range l.reqs[waveID] {
		if j := l.jobs[r.JobID]; j.waveID == waveID && j.status == "queued" && j.run == r.Run {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *fakeLedger) WaveAttempts(ctx context.Context, waveID int64) (map[string][]store.Attempt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("WaveAttempts", waveID); err != nil {
		return nil, err
	}
	out := map[string][]store.Attempt{}
	for _, r := range l.reqs[waveID] {
		if as := l.attempts[jobRun{r.JobID, r.Run}]; len(as) > 0 {
			out[r.JobID] = slices.Clone(as)
		}
	}
	return out, nil
}

func (l *fakeLedger) JobAttempts(ctx context.Context, jobID string, run int) ([]store.Attempt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("JobAttempts", jobID); err != nil {
		return nil, err
	}
	return slices.Clone(l.attempts[jobRun{jobID, max(run, 1)}]), nil
}

func (l *fakeLedger) ProviderBatchRecorded(ctx context.Context, provider, id string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("ProviderBatchRecorded", id); err != nil {
		return false, err
	}
	for _, w := range l.waves {
		if w.Provider == provider && w.ProviderBatchID == id {
			return true, nil
		}
	}
	return false, nil
}

func (l *fakeLedger) OpenWaves(ctx context.Context, providers, homes []string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.call("OpenWaves", providers); err != nil {
		return 0, err
	}
	n := 0
	for _, w := range l.waves {
		if open(w) && slices.Contains(providers, w.Provider) && (w.Home == "" || slices.Contains(homes, w.Home)) {
			n++
		}
	}
	return n, nil
}

// What tests set up and read.

// addJob records a queued job in run 1.
func (l *fakeLedger) addJob(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs[id] = &fakeJob{status: "queued", run: 1}
}

// job returns a copy of a job's row.
func (l *fakeLedger) job(id string) fakeJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.jobs[id]
}

// setJob changes a job's status (enqueue cancel: "cancelled").
func (l *fakeLedger) setJob(id, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs[id].status = status
	if status != "queued" {
		l.jobs[id].waveID = 0
	}
}

// wave returns a copy of a wave.
func (l *fakeLedger) wave(id int64) store.Wave {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waves[id] == nil {
		return store.Wave{}
	}
	return *l.waves[id]
}

// waveCount is how many waves are recorded.
func (l *fakeLedger) waveCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waves)
}

// cancelWaves asks for a batch's open waves to be cancelled, as
// store.Store.CancelWaves does.
func (l *fakeLedger) cancelWaves(batch string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.waves {
		if w.Batch == batch && (w.Status == store.WaveRecorded || w.Status == store.WaveUploaded || w.Status == store.WaveSubmitted) {
			w.Status, w.NextPollAt = store.WaveCancelling, l.clock.Now()
		}
	}
}

// jobAttempts returns a job's attempt rows of run 1.
func (l *fakeLedger) jobAttempts(id string) []store.Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.attempts[jobRun{id, 1}])
}

// requests returns a wave's requests.
func (l *fakeLedger) requests(id int64) []store.WaveRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[id])
}

// nextDue is when the first open wave is due (its lease expired and its
// next poll due); false when none is open.
func (l *fakeLedger) nextDue() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var at time.Time
	found := false
	for _, w := range l.waves {
		if !open(w) {
			continue
		}
		t := w.NextPollAt
		if !w.LeaseUntil.IsZero() && !w.LeaseUntil.Before(t) {
			t = w.LeaseUntil.Add(time.Nanosecond)
		}
		if !found || t.Before(at) {
			at, found = t, true
		}
	}
	return at, found
}

// errorsOf lists the errors the updates of a wave recorded, in order.
func (l *fakeLedger) errorsOf(id int64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, u := range l.updates[id] {
		if u.Error != "" {
			out = append(out, u.Error)
		}
	}
	return out
}

// lastUpdate is the last update applied to a wave.
func (l *fakeLedger) lastUpdate(id int64) store.WaveUpdate {
	l.mu.Lock()
	defer l.mu.Unlock()
	us := l.updates[id]
	if len(us) == 0 {
		return store.WaveUpdate{}
	}
	return us[len(us)-1]
}

// count returns how many times a method was called.
func (l *fakeLedger) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[name]
}

// setInject sets the ledger's inject func.
func (l *fakeLedger) setInject(f func(call string, arg any) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inject = f
}

// failOnce returns an inject func that fails the first call named call
// whose argument match accepts (nil: any) with err.
func failOnce(call string, match func(arg any) bool, err error) func(string, any) error {
	var mu sync.Mutex
	done := false
	return func(name string, arg any) error {
		mu.Lock()
		defer mu.Unlock()
		if done || name != call || (match != nil && !match(arg)) {
			return nil
		}
		done = true
		return err
	}
}

// statusUpdate matches an UpdateWave to status.
func statusUpdate(status string) func(any) bool {
	return func(arg any) bool { u, ok := arg.(store.WaveUpdate); return ok && u.Status == status }
}
