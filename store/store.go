package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Sentinel errors returned by the store. Test them with errors.Is.
var (
	// ErrNotFound is returned when the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is returned when an argument is malformed (e.g. an unknown
	// status or a schema that is not JSON).
	ErrInvalid = errors.New("invalid argument")
	// ErrConfig is wrapped by every Config validation error.
	ErrConfig = errors.New("invalid store config")
	// ErrBadURL is wrapped by the error of a database URL that does not
	// parse: a command reports it as a usage error.
	ErrBadURL = errors.New("bad database URL")
	// ErrBusy means another process holds what was asked for.
	ErrBusy = errors.New("busy")
)

// Defaults for Config fields.
const (
	MaxConnsDefault          = 8
	MinConnsDefault          = 0
	MaxConnLifetimeDefault   = 30 * time.Minute
	MaxConnIdleTimeDefault   = 5 * time.Minute
	HealthCheckPeriodDefault = 30 * time.Second
	StatementTimeoutDefault  = 30 * time.Second
	RetryMaxElapsedDefault   = 10 * time.Second
	RetryInitialDefault      = 50 * time.Millisecond
	RetryMaxIntervalDefault  = 2 * time.Second
)

// Config tunes a Store. The zero value (or nil) means every default.
type Config struct {
	// MaxConns is the pool size. Default MaxConnsDefault (8); a
	// pool_max_conns setting in the DSN wins over the default but not over an
	// explicit value. Keep the sum over all workers below max_connections.
	MaxConns int32
	// MinConns is the number of idle connections kept open. Default 0.
	MinConns int32
	// MaxConnLifetime closes connections older than this (with jitter).
	// Default 30 minutes.
	MaxConnLifetime time.Duration
	// MaxConnIdleTime closes idle connections after this. Default 5 minutes.
	MaxConnIdleTime time.Duration
	// HealthCheckPeriod is how often idle connections are checked. Default 30 s.
	HealthCheckPeriod time.Duration
	// StatementTimeout bounds every store call whose ctx has no deadline.
	// Default 30 s.
	StatementTimeout time.Duration
	// RetryMaxElapsed bounds the time SaveResults spends retrying transient
	// errors. Default 10 s; a negative value disables retries.
	RetryMaxElapsed time.Duration
	// RetryInitial is the first retry delay. Default 50 ms.
	RetryInitial time.Duration
	// RetryMaxInterval caps the delay between retries. Default 2 s.
	RetryMaxInterval time.Duration
	// RetryNotifyFunc, when set, is called before each retry of a transient
	// error with the error and the delay before the next try (e.g. to log at
	// debug level). It must not block. Default nil.
	RetryNotifyFunc func(err error, next time.Duration)
}

// WithDefaults returns a copy of c (nil allowed) with every zero field set to
// its default.
func (c *Config) WithDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	out.MaxConns = cmp.Or(out.MaxConns, MaxConnsDefault)
	out.MinConns = cmp.Or(out.MinConns, MinConnsDefault)
	out.MaxConnLifetime = cmp.Or(out.MaxConnLifetime, MaxConnLifetimeDefault)
	out.MaxConnIdleTime = cmp.Or(out.MaxConnIdleTime, MaxConnIdleTimeDefault)
	out.HealthCheckPeriod = cmp.Or(out.HealthCheckPeriod, HealthCheckPeriodDefault)
	out.StatementTimeout = cmp.Or(out.StatementTimeout, StatementTimeoutDefault)
	out.RetryMaxElapsed = cmp.Or(out.RetryMaxElapsed, RetryMaxElapsedDefault)
	out.RetryInitial = cmp.Or(out.RetryInitial, RetryInitialDefault)
	out.RetryMaxInterval = cmp.Or(out.RetryMaxInterval, RetryMaxIntervalDefault)
	return out
}

func (c Config) validate() error {
	switch {
	case c.MaxConns < 1 || c.MaxConns > 1000:
		return fmt.Errorf("%w: MaxConns %d outside 1..1000", ErrConfig, c.MaxConns)
	case c.MinConns < 0 || c.MinConns > c.MaxConns:
		return fmt.Errorf("%w: MinConns %d outside 0..MaxConns (%d)", ErrConfig, c.MinConns, c.MaxConns)
	case c.MaxConnLifetime < 0, c.MaxConnIdleTime < 0, c.HealthCheckPeriod < 0:
		return fmt.Errorf("%w: connection durations must not be negative", ErrConfig)
	case c.StatementTimeout < 0:
		return fmt.Errorf("%w: StatementTimeout %s must not be negative", ErrConfig, c.StatementTimeout)
	case c.RetryInitial < 0 || c.RetryMaxInterval < c.RetryInitial:
		return fmt.Errorf("%w: RetryInitial %s must be in 0..RetryMaxInterval (%s)", ErrConfig, c.RetryInitial, c.RetryMaxInterval)
	}
	return nil
}

// Store is the ledger. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	// prompts are the system prompts this Store has committed.
	prompts promptSet
	// timelineJobs, when set, replaces the default timelineJobs (tests).
	timelineJobs int64
	// searchWindow, when set, replaces SearchWindow (tests).
	searchWindow int
}

// Open connects a pool to dsn (a postgres:// URL or key=value string), checks
// it with a ping and returns the Store. cfg may be nil. Close it when done.
// Open does not migrate: call Migrate first.
func Open(ctx context.Context, dsn string, cfg *Config) (*Store, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if err := namesDatabase(dsn); err != nil {
		return nil, err
	}
	if (cfg != nil && cfg.MaxConns != 0) || !strings.Contains(dsn, "pool_max_conns") {
		pc.MaxConns = c.MaxConns
	}
	pc.MinConns = min(c.MinConns, pc.MaxConns)
	pc.MaxConnLifetime = c.MaxConnLifetime
	pc.MaxConnLifetimeJitter = c.MaxConnLifetime / 10
	pc.MaxConnIdleTime = c.MaxConnIdleTime
	pc.HealthCheckPeriod = c.HealthCheckPeriod
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "fixpoint"
	}
	// Every ledger query reads a few index entries or rollup rows, but on
	// a large ledger the planner's guesses for partial indexes and jsonb
	// arrays cost some above jit_above_cost: compiling then took 100 to
	// 230 ms of batch_spend's 0.3 ms at a million jobs. A URL that sets
	// jit keeps its own.
	if _, ok := pc.ConnConfig.RuntimeParams["jit"]; !ok {
		pc.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	s := &Store{pool: pool, cfg: c}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes every connection of the pool, waiting for those in use. It is
// safe to call more than once.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Settle finishes the maintenance the writes so far have made due: it
// vacuums and analyzes the ledger's big tables (work autovacuum would
// otherwise start in the middle of what is measured next) and writes every
// dirty page to disk (a CHECKPOINT, which needs a superuser or
// pg_checkpoint). The bench calls it between figures.
func (s *Store) Settle(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "VACUUM (ANALYZE) jobs, attempts"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	if _, err := s.pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// timeout gives ctx the configured statement timeout unless it has a
// deadline already.
func (s *Store) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || s.cfg.StatementTimeout == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.StatementTimeout)
}
