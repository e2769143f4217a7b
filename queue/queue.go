package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
)

// Queue defaults.
const (
	StreamDefault        = "FIXPOINT_JOBS"
	SubjectDefault       = "fixpoint.jobs"
	ConsumerDefault      = "fixpoint-workers"
	MaxMsgSizeDefault    = 1 << 20
	MaxMsgsDefault       = 10_000_000
	DuplicatesDefault    = 24 * time.Hour
	MaxAgeDefault        = 7 * 24 * time.Hour
	AckWaitDefault       = 60 * time.Second
	MaxDeliverDefault    = 5
	MaxAckPendingDefault = 4096
)

// Config names the JetStream stream and the shared durable consumer and
// sets their limits. Worker and enqueue create or update them idempotently
// from the same config.
type Config struct {
	// Stream defaults to FIXPOINT_JOBS, Subject to fixpoint.jobs.
	Stream  string
	Subject string
	// Consumer is the durable pull consumer every worker shares. Defaults
	// to fixpoint-workers.
	Consumer string
	// MaxMsgSize bounds one job message in bytes. Defaults to 1 MiB.
	MaxMsgSize int32
	// MaxMsgs bounds the backlog; with DiscardNew a full stream refuses new
	// jobs instead of dropping old ones. Defaults to 10,000,000.
	MaxMsgs int64
	// Duplicates is the window in which a re-published job id is dropped.
	// Defaults to 24h.
	Duplicates time.Duration
	// MaxAge expires jobs never processed. Defaults to 7 days.
	MaxAge time.Duration
	// AckWait is how long a delivered job may go without an ack or a progress
	// report before it is redelivered. Defaults to 60s.
	AckWait time.Duration
	// MaxDeliver is how often a job is delivered before it is dead.
	// Defaults to 5.
	MaxDeliver int
	// MaxAckPending caps jobs in flight across all workers, counting those
	// waiting for their ledger commit. Defaults to 4096: room for a few
	// workers of concurrency 1000 and their pending writes; the workers'
	// own concurrency is what normally bounds it.
	MaxAckPending int
	// Replicas is how many servers of a JetStream cluster keep the job
	// stream, its consumer and the dead-job advisory stream: 1 (the
	// default), 3 or 5. A replicated stream takes writes while a majority
	// of its replicas are up, so 3 survives one server down and 5 two.
	Replicas int
}

// ReplicasAllowed are the values Config.Replicas takes.
var ReplicasAllowed = []int{1, 3, 5}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Stream = cmp.Or(c.Stream, StreamDefault)
	c.Subject = cmp.Or(c.Subject, SubjectDefault)
	c.Consumer = cmp.Or(c.Consumer, ConsumerDefault)
	c.MaxMsgSize = cmp.Or(c.MaxMsgSize, MaxMsgSizeDefault)
	c.MaxMsgs = cmp.Or(c.MaxMsgs, MaxMsgsDefault)
	c.Duplicates = cmp.Or(c.Duplicates, DuplicatesDefault)
	c.MaxAge = cmp.Or(c.MaxAge, MaxAgeDefault)
	c.AckWait = cmp.Or(c.AckWait, AckWaitDefault)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, MaxDeliverDefault)
	c.MaxAckPending = cmp.Or(c.MaxAckPending, MaxAckPendingDefault)
	c.Replicas = cmp.Or(c.Replicas, 1)
	return c
}

// settingErr is a Config setting that cannot work, by its field name
// ("Stream", "AckWait").
func settingErr(setting string, v any, problem string) error {
	return &fixpoint.SettingError{Scope: "queue", Setting: setting, Value: v, Problem: problem}
}

// Validate reports the first setting of c (after WithDefaults) that cannot
// work, as a *fixpoint.SettingError: a stream, subject or consumer name NATS
// refuses, a negative duplicates window, limits below their minimum.
func (c Config) Validate() error {
	switch {
	case !natsName(c.Stream, false):
		return settingErr("Stream", fmt.Sprintf("%q", c.Stream), "is not a stream name (at most 255 bytes; no spaces, '.', '/', '\\', '*' or '>')")
	case !natsName(c.Subject, true):
		return settingErr("Subject", fmt.Sprintf("%q", c.Subject), "is not a subject jobs can be published on (at most 255 bytes of dot-separated tokens; no spaces, no wildcard '*' or '>')")
	case !natsName(c.Consumer, false):
		return settingErr("Consumer", fmt.Sprintf("%q", c.Consumer), "is not a consumer name (at most 255 bytes; no spaces, '.', '/', '\\', '*' or '>')")
	case c.Duplicates < 0:
		return settingErr("Duplicates", c.Duplicates, "is negative")
	case c.Duplicates < 100*time.Millisecond:
		return settingErr("Duplicates", c.Duplicates, "is under NATS's minimum of 100ms")
	case c.Duplicates > c.MaxAge:
		return settingErr("Duplicates", c.Duplicates, fmt.Sprintf("is longer than max age %s", c.MaxAge))
	case c.MaxDeliver < 2:
		return settingErr("MaxDeliver", c.MaxDeliver, "must be at least 2")
	case c.AckWait < time.Second:
		return settingErr("AckWait", c.AckWait, "must be at least 1s")
	case c.MaxAckPending < 1:
		return settingErr("MaxAckPending", c.MaxAckPending, "must be at least 1")
	case !slices.Contains(ReplicasAllowed, c.Replicas):
		// NATS takes 2 and 4, but a replicated stream needs a majority
		// of its replicas up: 2 stops with either server down, so it
		// survives no more than 1 does, and 4 no more than 3.
		return settingErr("Replicas", c.Replicas, "must be 1, 3 or 5 (a stream needs a majority of its replicas up: 2 survives no server down, as 1, and 4 one, as 3)")
	}
	return nil
}

// natsName reports whether s is a usable stream or consumer name (subject
// false) or a subject to publish on (subject true): not empty, no white
// space or wildcard, and for a name no '.'; a subject's dot-separated
// tokens are not empty.
func natsName(s string, subject bool) bool {
	// NATS refuses names over 255 bytes and with path separators; a
	// subject much longer than that passes its control line.
	if s == "" || len(s) > 255 || strings.ContainsAny(s, "*> \t\r\n") || !subject && strings.ContainsAny(s, "/\\") {
		return false
	}
	if !subject {
		return !strings.Contains(s, ".")
	}
	return !slices.Contains(strings.Split(s, "."), "")
}

// ErrSubjectNotInStream is matched by EnsureStream's error when the stream
// exists and takes no message on the subject: enqueue would publish into
// nothing ("no response from stream").
var ErrSubjectNotInStream = errors.New("the stream does not take the subject")

// EnsureStream returns the job stream, creating it when it does not exist
// (created reports that). An existing stream is left as it is: enqueue uses
// this, and the stream's limits and the workers' consumer are the workers'
// to configure (a CLI run with other defaults must not silently reset what
// running workers set); one whose subjects do not cover cfg.Subject is
// refused with ErrSubjectNotInStream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg Config) (stream jetstream.Stream, created bool, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, false, err
	}
	start := time.Now()
	ctx, cancel := withDefaultTimeout(ctx, SetupWait)
	defer cancel()
	stream, err = retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		s, err := js.Stream(ctx, cfg.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, streamConfig(cfg))
			created = err == nil
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				s, err = js.Stream(ctx, cfg.Stream) // a worker made it meanwhile
			}
		}
		return s, err
	})
	if err != nil {
		return nil, false, setupErr("open stream "+cfg.Stream, cfg, start, err)
	}
	subjects := stream.CachedInfo().Config.Subjects
	if !slices.ContainsFunc(subjects, func(pattern string) bool { return subjectMatches(pattern, cfg.Subject) }) {
		return nil, false, fmt.Errorf("%w: stream %s takes %s, not %s (enqueue and the workers must use the same --stream and --subject)",
			ErrSubjectNotInStream, cfg.Stream, strings.Join(subjects, ", "), cfg.Subject)
	}
	return stream, created, nil
}

// subjectMatches reports whether a NATS subject pattern ('*' one token,
// '>' the rest) matches a literal subject.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}

func streamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "fixpoint jobs",
		Subjects:    []string{cfg.Subject},
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     cfg.MaxMsgs,
		MaxMsgSize:  cfg.MaxMsgSize,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.Duplicates,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// Ensure creates or updates the job stream, the shared consumer and the
// advisory stream that captures MAX_DELIVERIES events (DeadStream), so a
// dead job is recorded even when no worker was running when its limit was
// reached.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, jetstream.Consumer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	ctx, cancel := withDefaultTimeout(ctx, SetupWait)
	defer cancel()
	stream, err := retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return ensureStreamConfig(ctx, js, streamConfig(cfg))
	})
	if err != nil {
		return nil, nil, setupErr("create stream "+cfg.Stream, cfg, start, err)
	}
	cons, err := retryJS(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return ensureConsumerConfig(ctx, stream, jetstream.ConsumerConfig{
			Durable:       cfg.Consumer,
			Description:   "fixpoint workers",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxDeliver:    cfg.MaxDeliver,
			MaxAckPending: cfg.MaxAckPending,
			FilterSubject: cfg.Subject,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	})
	if err != nil {
		return nil, nil, setupErr("create consumer "+cfg.Consumer, cfg, start, err)
	}
	advSubject := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", cfg.Stream, cfg.Consumer)
	adv, err := retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return ensureStreamConfig(ctx, js, jetstream.StreamConfig{
			Name:      cfg.DeadStream(),
			Subjects:  []string{advSubject},
			Retention: jetstream.WorkQueuePolicy,
			MaxAge:    cfg.MaxAge,
			Storage:   jetstream.FileStorage,
			Replicas:  cfg.Replicas,
		})
	})
	if err != nil {
		return nil, nil, setupErr("create advisory stream", cfg, start, err)
	}
	if _, err := retryJS(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return ensureConsumerConfig(ctx, adv, jetstream.ConsumerConfig{
			Durable:    cfg.DeadConsumer(),
			AckPolicy:  jetstream.AckExplicitPolicy,
			AckWait:    30 * time.Second,
			MaxDeliver: -1,
		})
	}); err != nil {
		return nil, nil, setupErr("create advisory consumer", cfg, start, err)
	}
	return stream, cons, nil
}

// ensureStreamConfig creates the stream, or updates it when its
// configuration differs from want, and leaves an identical one alone:
// workers starting together would otherwise all update it at once, and
// the server races updating a stream's store with creating a consumer on
// it (a data race the race detector finds in nats-server 2.15).
//
// A missing stream is created, not created-or-updated: workers starting
// together each find it missing, and a create of the same config is a no-op
// on the server, where an update rewrites the stream's store while another
// worker adds its consumer (a data race inside nats-server's file store
// that -race reports). Only a stream that differs is updated.
func ensureStreamConfig(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, want.Name)
	if err == nil && sameStream(s.CachedInfo().Config, want) {
		return s, nil
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Two workers creating the stream at once, or one right after it
		// was deleted: the server may say its subjects overlap a stream
		// that is this one, being made or unmade (one of two workers
		// started together exited 1 so). Look again, and try again, for a
		// second; another stream on the subjects is still refused.
		for try := 0; ; try++ {
			s, err = js.CreateStream(ctx, want)
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrSubjectsOverlap || try == 10 {
				break
			}
			if s, lerr := js.Stream(ctx, want.Name); lerr == nil && sameStream(s.CachedInfo().Config, want) {
				return s, nil
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return nil, err
			}
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return s, err
		}
		// Created meanwhile with another config: look again.
		if s, err = js.Stream(ctx, want.Name); err == nil && sameStream(s.CachedInfo().Config, want) {
			return s, nil
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	return js.UpdateStream(ctx, want)
}

// jsErrSubjectsOverlap is the server's error code for a stream whose
// subjects overlap another's (nats.go names no constant for it).
const jsErrSubjectsOverlap jetstream.ErrorCode = 10065

// sameStream reports whether have already is what want asks; a zero field
// of want is the server's default, whatever it is.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention && have.Discard == want.Discard &&
		have.Storage == want.Storage && have.Replicas == max(want.Replicas, 1) && have.Description == want.Description &&
		(want.MaxMsgs == 0 || have.MaxMsgs == want.MaxMsgs) && (want.MaxMsgSize == 0 || have.MaxMsgSize == want.MaxMsgSize) &&
		(want.MaxAge == 0 || have.MaxAge == want.MaxAge) && (want.Duplicates == 0 || have.Duplicates == want.Duplicates)
}

// ensureConsumerConfig is ensureStreamConfig for the consumer.
func ensureConsumerConfig(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := s.Consumer(ctx, want.Durable)
	if err == nil {
		have := c.CachedInfo().Config
		if have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
			have.MaxAckPending == want.MaxAckPending && have.FilterSubject == want.FilterSubject &&
			have.DeliverPolicy == want.DeliverPolicy && have.Description == want.Description {
			return c, nil
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	} else {
		// Missing: create (a no-op when another worker just made the same).
		c, err := s.CreateConsumer(ctx, want)
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return c, err
		}
	}
	return s.CreateOrUpdateConsumer(ctx, want)
}

// SetupWait bounds the queue's set-up (Ensure, EnsureStream) when the
// caller's context has no deadline: time for a JetStream cluster that lost
// a server to elect its leaders (the meta leader, then each stream's and
// consumer's, a few seconds each), and short enough that a cluster that
// cannot place the stream says so while someone is watching.
const SetupWait = 45 * time.Second

// setupTryWait bounds one request of the set-up: a request to a stream
// whose leader is being elected goes unanswered, and must not spend the
// whole of SetupWait.
const setupTryWait = 5 * time.Second

// retryJS runs one JetStream API call of the set-up (given a context of
// its own, bounded by setupTryWait) until it succeeds, fails for a reason
// another try cannot fix, or ctx ends. The server answers 5xx when it
// could not do the work at that moment (a stream store it could not
// create, a cluster electing a leader: "JetStream system temporarily
// unavailable"), "no suitable peers" while too few servers of a cluster
// are up to place every replica, no responders while it restarts, and
// nothing before a timeout when it is busy or leaderless: a worker or an
// enqueue starting then should wait, not fail the night's batch. A 4xx (a
// stream configured differently under the same name, a limit) is the
// caller's to fix and comes back at once.
func retryJS[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	var last error
	v, err := backoff.RetryWithData(func() (T, error) {
		tctx, cancel := context.WithTimeout(ctx, setupTryWait)
		defer cancel()
		v, err := op(tctx)
		last = err
		if err != nil && (ctx.Err() != nil || !transientJS(err)) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, backoff.WithContext(b, ctx))
	if err != nil && last != nil && errors.Is(err, ctx.Err()) {
		// Ended waiting for the next try: the last try says why.
		err = last
	}
	return v, err
}

// JetStream error codes the set-up tells apart (nats.go names no
// constants for them).
const (
	jsErrNoPeers              jetstream.ErrorCode = 10005 // "no suitable peers for placement", "insufficient resources"
	jsErrReplicasNotClustered jetstream.ErrorCode = 10074 // "replicas > 1 not supported in non-clustered mode"
)

// transientJS reports whether a JetStream API call may succeed if tried again.
func transientJS(err error) bool {
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return false // a 503, but no try makes it so
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.ErrorCode == jsErrReplicasNotClustered:
			return false // a lone server stays alone
		case apiErr.ErrorCode == jsErrNoPeers:
			return true // a server of the cluster is down or not yet routed
		}
		return apiErr.Code >= 500
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// setupErr is the error of a set-up step (what, "create stream X") that
// failed with err after start: it says what the operator can do about
// the failures a cluster has.
func setupErr(what string, cfg Config, start time.Time, err error) error {
	var apiErr *jetstream.APIError
	errors.As(err, &apiErr)
	switch {
	case apiErr != nil && apiErr.ErrorCode == jsErrReplicasNotClustered:
		return fmt.Errorf("%s: %w: %d replicas need a JetStream cluster, and this NATS server runs alone (point NATS_URL at the cluster's servers, or use 1 replica)",
			what, err, cfg.Replicas)
	case apiErr != nil && apiErr.ErrorCode == jsErrNoPeers:
		return fmt.Errorf("%s: %w, still after %s: %d replicas need %d JetStream servers of the cluster up and routed to each other (start the missing ones, or use fewer replicas)",
			what, err, time.Since(start).Round(time.Second), cfg.Replicas, cfg.Replicas)
	case transientJS(err):
		return fmt.Errorf("%s: %w, still after %s: is a majority of the JetStream cluster's servers up and routed to each other? (a cluster without one elects no leader and answers no request)",
			what, err, time.Since(start).Round(time.Second))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// DeadStream is the name of the stream that keeps the job stream's
// MAX_DELIVERIES advisories: the jobs the server gave up on.
func (c Config) DeadStream() string { return c.Stream + "_DEAD" }

// DeadConsumer is the name of the workers' durable consumer of DeadStream.
func (c Config) DeadConsumer() string { return c.Consumer + "-dead" }

// withDefaultTimeout gives ctx a deadline when it has none.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// Publish puts one job on the queue with MsgID(job id) as Nats-Msg-Id
// (plus the run, after the first), so a job published twice inside the
// duplicates window is stored once.
// duplicate reports that the server dropped it as such.
func Publish(ctx context.Context, js jetstream.JetStream, cfg Config, env *Envelope) (duplicate bool, err error) {
	return publish(ctx, js, cfg, env, runMsgID(env))
}

// runMsgID is the message id Publish gives a job: MsgID of its id, and its
// run after the first.
func runMsgID(env *Envelope) string {
	id := MsgID(env.JobID)
	if env.Run > 1 {
		// A requeued job's message must not be taken for its first run's
		// within the duplicates window.
		id += republishMark + "run" + strconv.Itoa(env.Run)
	}
	return id
}

// Republish puts a job on the queue again under a message id of its own,
// for a job the ledger says was published but the stream no longer holds:
// the stream's duplicate window may still remember the first id.
func Republish(ctx context.Context, js jetstream.JetStream, cfg Config, env *Envelope) error {
	id := MsgID(env.JobID) + republishMark + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := publish(ctx, js, cfg, env, id)
	return err
}

// PublishFromWave puts a batch-delivery job on the queue to finish
// realtime (env.FromWave set), under a message id naming the wave: the
// driver handing the same jobs over again after a crash publishes each
// once within the duplicates window.
func PublishFromWave(ctx context.Context, js jetstream.JetStream, cfg Config, env *Envelope) error {
	id := MsgID(env.JobID) + republishMark + "run" + strconv.Itoa(env.RunOrFirst()) + "w" + strconv.FormatInt(env.FromWave, 10)
	pctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := publish(pctx, js, cfg, env, id)
	return err
}

// Headers of a job message besides Nats-Msg-Id.
const (
	// BatchHeader names the job's batch (encoded as MsgID encodes ids), so
	// tools can tell a batch's messages apart without decoding them.
	BatchHeader = "Fixpoint-Batch"
)

func publish(ctx context.Context, js jetstream.JetStream, cfg Config, env *Envelope, msgID string) (duplicate bool, err error) {
	msg, err := jobMsg(cfg, env)
	if err != nil {
		return false, err
	}
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	if err != nil {
		return false, fmt.Errorf("publish job %s: %w", env.JobID, err)
	}
	return ack.Duplicate, nil
}

// jobMsg is the message of a job, refused (fixpoint.ErrBadJob) when it is
// over the queue's max message size.
func jobMsg(cfg Config, env *Envelope) (*nats.Msg, error) {
	cfg = cfg.WithDefaults()
	data, err := EncodeEnvelope(env)
	if err != nil {
		return nil, err
	}
	if len(data) > int(cfg.MaxMsgSize) {
		return nil, fmt.Errorf("%w: job %s is %d bytes, over the queue's max message size %d", fixpoint.ErrBadJob, env.JobID, len(data), cfg.MaxMsgSize)
	}
	msg := &nats.Msg{Subject: cfg.Subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(BatchHeader, MsgID(env.Batch))
	return msg, nil
}

// republishMark separates a job's message id from the suffix a republished
// message carries. MsgID encodes '#' in ids, so it cannot be part of one.
const republishMark = "#"

// MsgID is the Nats-Msg-Id of a job: its id with every byte that is not
// printable ASCII, and '%' and '#', percent-encoded. Distinct ids give
// distinct message ids (a header cannot carry a newline, and an id with one
// must not become the id with a space), and printable ids read as they are.
func MsgID(jobID string) string {
	const hex = "0123456789ABCDEF"
	clean := true
	for i := 0; i < len(jobID); i++ {
		if c := jobID[i]; c <= ' ' || c >= 0x7f || c == '%' || c == '#' {
			clean = false
			break
		}
	}
	if clean {
		return jobID
	}
	var b strings.Builder
	b.Grow(len(jobID) + 16)
	for i := 0; i < len(jobID); i++ {
		c := jobID[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == '#' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// JobIDFromMsgID returns the job id a message id was made from (by MsgID,
// with or without a republish suffix); ok is false when msgID is not such
// an id.
func JobIDFromMsgID(msgID string) (id string, ok bool) {
	if i := strings.Index(msgID, republishMark); i >= 0 {
		msgID = msgID[:i]
	}
	if !strings.Contains(msgID, "%") {
		return msgID, true
	}
	out := make([]byte, 0, len(msgID))
	for i := 0; i < len(msgID); i++ {
		c := msgID[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		if i+2 >= len(msgID) {
			return "", false
		}
		v, err := strconv.ParseUint(msgID[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		out = append(out, byte(v))
		i += 2
	}
	return string(out), true
}

// HoldsBatch reports whether the queue's stream holds a message of
// batch: published and not yet acked (waiting, or in flight at a worker).
// A stream that does not exist holds none. It reads at most scanMax
// messages and, past them, reports true: it cannot say, so a caller
// waiting for the batch keeps waiting. A batch whose queued jobs the ledger
// says were published but whose messages the queue does not hold (its data
// lost, or the jobs published to another queue) is never done: enqueue
// --resume republishes them.
func HoldsBatch(ctx context.Context, js jetstream.JetStream, cfg Config, batch string, scanMax int) (bool, error) {
	cfg = cfg.WithDefaults()
	stream, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open stream %s: %w", cfg.Stream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("read stream %s: %w", cfg.Stream, err)
	}
	if info.State.Msgs == 0 {
		return false, nil
	}
	want := MsgID(batch)
	seq := info.State.FirstSeq
	for range scanMax {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(cfg.Subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read stream %s message %d: %w", cfg.Stream, seq, err)
		}
		seq = m.Sequence + 1
		if m.Header.Get(BatchHeader) == want {
			return true, nil
		}
	}
	return true, nil
}
