package wave

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// Wave defaults.
const (
	MaxRequestsDefault = 2048
	CollectDefault     = 10 * time.Second
	PollMinDefault     = 30 * time.Second
	PollMaxDefault     = 10 * time.Minute
	LeaseDefault       = 5 * time.Minute
	IdleDefault        = 5 * time.Second
	// RealtimeBelowDefault: a repair wave of fewer jobs runs realtime
	// instead: a provider batch takes minutes at best, and a handful of
	// jobs costs cents either way.
	RealtimeBelowDefault = 25
	// DeadlineMarginDefault is how long before the deadline a wave
	// still running is cancelled, so its jobs have time to finish
	// realtime.
	DeadlineMarginDefault = time.Hour
	// NotFoundGraceDefault is how long a provider batch may answer 404
	// before its wave is given up (failed, its jobs run realtime): Anthropic
	// answers 404 for a few seconds after a create, but a batch deleted, or
	// created under another key or organization, never comes back, and
	// polling it for ever held a draining worker up without end.
	NotFoundGraceDefault = 5 * time.Minute
	// waveNoReplyMax is how many of a job's wave attempts may get no reply
	// (expired, errored) before it goes on realtime.
	waveNoReplyMax = 2
	// waveMetadataKey names the wave in an OpenAI batch's metadata.
	waveMetadataKey = "fixpoint_wave"
	// waveDeadlineCancel is the error of a wave cancelled because its
	// deadline came near.
	waveDeadlineCancel = "cancelled: the deadline is near"
	// waveOutcomesChunk is how many outcomes one ledger transaction
	// records.
	waveOutcomesChunk = 256
)

// Config tunes batch delivery.
type Config struct {
	// MaxRequests caps a wave's requests (and the provider's own limits
	// apply). Collected jobs hold their messages unacked until their wave
	// is recorded, so it should stay well under the queue's
	// MaxAckPending. Defaults to 2,048.
	MaxRequests int
	// Collect is how long a wave's first job waits for more before the
	// wave is recorded and submitted. Defaults to 10s.
	Collect time.Duration
	// PollMin and PollMax bound the wait between two polls of a wave: it
	// starts at PollMin and doubles up to PollMax. Defaults 30s and 10m.
	PollMin, PollMax time.Duration
	// Lease is how long a worker owns a wave it polls or processes before
	// another may take it over; renewed while it works. Defaults to 5m.
	Lease time.Duration
	// Idle is how often a worker looks for due waves when none was due.
	// Defaults to 5s.
	Idle time.Duration
	// RealtimeBelow: a repair wave of fewer jobs runs realtime instead.
	// Defaults to 25; negative never does.
	RealtimeBelow int
	// DeadlineMargin is how long before a job's deadline a wave holding it
	// is cancelled (its replies so far recorded, the rest run realtime),
	// and within which no new wave starts. Defaults to 1h.
	DeadlineMargin time.Duration
	// Owner names this worker in wave leases; defaults to host, pid and a
	// start time.
	Owner string
	// NotFoundGrace is how long a wave's provider batch may answer 404 to
	// this worker's polls before the wave is failed and its jobs run
	// realtime. Defaults to 5m.
	NotFoundGrace time.Duration
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MaxRequests = cmp.Or(c.MaxRequests, MaxRequestsDefault)
	c.Collect = cmp.Or(c.Collect, CollectDefault)
	c.PollMin = cmp.Or(c.PollMin, PollMinDefault)
	c.PollMax = max(cmp.Or(c.PollMax, PollMaxDefault), c.PollMin)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.Idle = cmp.Or(c.Idle, IdleDefault)
	c.RealtimeBelow = cmp.Or(c.RealtimeBelow, RealtimeBelowDefault)
	c.DeadlineMargin = cmp.Or(c.DeadlineMargin, DeadlineMarginDefault)
	c.NotFoundGrace = cmp.Or(c.NotFoundGrace, NotFoundGraceDefault)
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	return c
}

// leaseMin is the shortest wave lease: a lease is renewed between
// provider calls, and one that lapses while its owner still works lets a
// second worker take the wave over.
const leaseMin = time.Second

// settingErr is a Config setting that cannot work, by its field name
// ("Lease").
func settingErr(setting string, v any, problem string) error {
	return &fixpoint.SettingError{Scope: "wave", Setting: setting, Value: v, Problem: problem}
}

// Validate reports the first setting of c (after WithDefaults) that cannot
// work, as a *fixpoint.SettingError.
func (c Config) Validate() error {
	switch {
	case c.MaxRequests < 1:
		return settingErr("MaxRequests", c.MaxRequests, "must be at least 1")
	case c.Collect < 0:
		return settingErr("Collect", c.Collect, "is negative")
	case c.PollMin < 0:
		return settingErr("PollMin", c.PollMin, "is negative")
	case c.Lease < leaseMin:
		return settingErr("Lease", c.Lease, "must be at least "+leaseMin.String())
	case c.Idle < 0:
		return settingErr("Idle", c.Idle, "is negative")
	case c.DeadlineMargin < 0:
		return settingErr("DeadlineMargin", c.DeadlineMargin, "is negative")
	}
	return nil
}
