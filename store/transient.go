package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgconn"
)

// IsTransient reports whether err is a database error that may succeed when
// the same idempotent work is retried later: the connection was lost or
// refused, the server is shutting down or starting (57P01, 57P02, 57P03), any
// connection exception (class 08), a serialization failure (40001), a
// deadlock (40P01), too many connections (53300), or an error pgconn marks
// SafeToRetry. Context cancellation and deadline errors are not transient:
// the caller gave up.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "40001", "40P01", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// pgx reports a connection that died under a statement this way.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF")
}

// IsRefused reports whether err means the data itself was refused, so that
// writing the same data again cannot succeed: the store's own checks
// (ErrInvalid), or a Postgres data exception (class 22, e.g. a number out
// of numeric's range), integrity violation (class 23) or program limit
// (class 54, e.g. JSON nested too deep). A caller holding many results
// can then save them one by one and set aside only the refused ones.
func IsRefused(err error) bool {
	if errors.Is(err, ErrInvalid) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// RetryPolicy is how the ledger's callers wait out an error that may pass
// (IsTransient): exponential backoff, randomised, from Initial up to
// MaxInterval between tries, for at most MaxElapsed (0: no bound but the
// caller's). The store retries a transaction so (Config.RetryInitial,
// RetryMaxInterval, RetryMaxElapsed); a worker waits out a ledger outage
// so too, with no bound, since its job keeps its message meanwhile.
type RetryPolicy struct {
	Initial, MaxInterval, MaxElapsed time.Duration
}

// DefaultRetryPolicy is the store's retry policy with its defaults, and no
// bound in time.
var DefaultRetryPolicy = RetryPolicy{Initial: RetryInitialDefault, MaxInterval: RetryMaxIntervalDefault}

// BackOff returns a new backoff of the policy.
func (p RetryPolicy) BackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.Initial
	b.MaxInterval = p.MaxInterval
	b.MaxElapsedTime = p.MaxElapsed
	b.Reset()
	return b
}

// retry runs op until it succeeds, fails with an error that is not
// transient, ctx ends or RetryMaxElapsed passes. op must be idempotent.
func (s *Store) retry(ctx context.Context, op func(context.Context) error) error {
	if s.cfg.RetryMaxElapsed < 0 {
		return op(ctx)
	}
	p := RetryPolicy{Initial: s.cfg.RetryInitial, MaxInterval: s.cfg.RetryMaxInterval, MaxElapsed: s.cfg.RetryMaxElapsed}
	return backoff.RetryNotify(func() error {
		err := op(ctx)
		if err != nil && !IsTransient(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(p.BackOff(), ctx), s.cfg.RetryNotifyFunc)
}
