package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishWindow is how many of PublishAll's messages may wait for their
// acknowledgement at once: enough to keep the server busy across a round
// trip, few enough that a stream refusing them costs a window, not a
// dataset, of publishes to try again.
const PublishWindow = 256

// ackWait is how long PublishAll waits for a message's acknowledgement
// before it publishes the message again alone.
const ackWait = 10 * time.Second

// errNoAck is the result of a job PublishAll stopped waiting for.
var errNoAck = errors.New("publish stopped before the queue acknowledged the job")

// Published is what became of one job of PublishAll.
type Published struct {
	// Duplicate reports that the stream held the message id already and
	// dropped this copy: the job is on the queue (or was taken from it).
	Duplicate bool
	// Err is why the job is not on the queue: fixpoint.ErrBadJob for a
	// message over the queue's size limit, else the server's refusal
	// after the job was tried again. Nil when the stream stored it.
	Err error
}

// PublishAll puts jobs on the queue as Publish does, each under the same
// message id, with up to PublishWindow acknowledgements outstanding at a
// time instead of one. A message the server refused or did not
// acknowledge within ackWait is published again alone, with backoff (its
// message id makes a second copy of a stored message a duplicate); once
// one has failed every try, the rest still to try again fail with its
// error without being tried, since the stream is refusing. The results
// are in the order of envs. err is set only when ctx ended; the jobs
// whose acknowledgement had not come then may or may not be on the queue,
// and their Err says so.
func PublishAll(ctx context.Context, js jetstream.JetStream, cfg Config, envs []Envelope) (out []Published, err error) {
	out = make([]Published, len(envs))
	for i := range out {
		out[i].Err = errNoAck
	}
	var retry []int
	type pending struct {
		i   int
		ack jetstream.PubAckFuture
	}
	// window holds the publishes awaiting their acknowledgement, oldest
	// first from head.
	window, head := make([]pending, 0, len(envs)), 0
	settle := func(p pending) error {
		wait := time.NewTimer(ackWait)
		defer wait.Stop()
		select {
		case ack := <-p.ack.Ok():
			out[p.i] = Published{Duplicate: ack.Duplicate}
		case err := <-p.ack.Err():
			out[p.i].Err = err
			retry = append(retry, p.i)
		case <-wait.C:
			out[p.i].Err = fmt.Errorf("no acknowledgement in %s", ackWait)
			retry = append(retry, p.i)
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	for i := range envs {
		msg, err := jobMsg(cfg, &envs[i])
		if err != nil {
			out[i].Err = err
			continue
		}
		ack, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(runMsgID(&envs[i])))
		if err != nil {
			out[i].Err = err
			retry = append(retry, i)
			continue
		}
		window = append(window, pending{i, ack})
		if len(window)-head == PublishWindow {
			if err := settle(window[head]); err != nil {
				return out, err
			}
			head++
		}
	}
	for _, p := range window[head:] {
		if err := settle(p); err != nil {
			return out, err
		}
	}
	return out, publishAgain(ctx, js, cfg, envs, retry, out)
}

// publishAgain publishes the envelopes of retry one at a time, with
// backoff, recording each outcome in out.
func publishAgain(ctx context.Context, js jetstream.JetStream, cfg Config, envs []Envelope, retry []int, out []Published) error {
	var refused error
	for _, i := range retry {
		if refused != nil {
			out[i].Err = fmt.Errorf("publish job %s: not tried again after the queue refused another: %w", envs[i].JobID, refused)
			continue
		}
		dup, err := publishRetried(ctx, js, cfg, &envs[i])
		if ctx.Err() != nil {
			return ctx.Err()
		}
		out[i] = Published{Duplicate: dup, Err: err}
		if err != nil {
			refused = err
		}
	}
	return nil
}

// publishTries bounds the tries of one message: a stream that stays full
// for the ~10 s they take is the operator's to fix, and says so.
const publishTries = 5

// publishRetried is Publish, tried again with backoff while the server
// says it could not take the message at that moment (a full stream is
// one) or does not answer in time, up to publishTries tries.
func publishRetried(ctx context.Context, js jetstream.JetStream, cfg Config, env *Envelope) (bool, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 2*time.Second
	return backoff.RetryWithData(func() (bool, error) {
		pctx, cancel := withDefaultTimeout(ctx, ackWait)
		defer cancel()
		dup, err := publish(pctx, js, cfg, env, runMsgID(env))
		timedOut := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if err != nil && !transientJS(err) && !timedOut {
			return dup, backoff.Permanent(err)
		}
		return dup, err
	}, backoff.WithContext(backoff.WithMaxRetries(b, publishTries-1), ctx))
}
