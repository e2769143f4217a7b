package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
)

// ServerConfig configures an in-process NATS server with JetStream.
type ServerConfig struct {
	// StoreDir keeps JetStream's files; required, so jobs survive a restart.
	StoreDir string
	// Host and Port to listen on; Port 0 means DontListen (in-process
	// clients only, connected with nats.InProcessServer: the server's
	// ClientURL then names the default port, another server's), -1 a
	// random port.
	Host string
	Port int
	// MaxPayload bounds one message; defaults to 8 MiB so the queue's own
	// MaxMsgSize is what limits jobs.
	MaxPayload int32
	// Ledger names the ledger the serving worker records to
	// (host:port/database, no credentials); with StoreDir it makes the
	// server's name, so a client can tell its own queue from another
	// setup's on the same machine.
	Ledger string
	// Logger, when set, receives the server's warnings and errors (a
	// stream whose store cannot be created, a disk that fills up): the
	// server answers its clients with a generic error and says why only in
	// its log. Notices go at debug level; debug and trace lines are dropped.
	Logger *slog.Logger
}

// ErrStoreDirInUse is returned by StartServer when another server
// (in this process or another) already uses the store directory: two servers
// on one directory would corrupt each other's streams.
var ErrStoreDirInUse = errors.New("embedded nats: store directory in use")

// ErrListenInUse is returned by StartServer when its listen address is
// taken; the error says by what and how to choose another.
var ErrListenInUse = errors.New("embedded nats: listen address in use")

// StartServer starts a NATS server with JetStream inside this process,
// so one worker binary serves a single machine with no NATS to install. The
// caller shuts it down with Shutdown and WaitForShutdown. The store
// directory is locked (a lock file in it) until the server has shut down.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats: store dir is required")
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	lock, err := lockDir(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	// Said now, not as a server never ready after 15 seconds.
	if err := checkListen(cfg.Host, cfg.Port); err != nil {
		lock.Close()
		return nil, err
	}
	ns, err := startEmbedded(cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	// The lock file names where the server listens, so a worker or an
	// enqueue that finds the directory held can reach it there, whatever
	// its own --nats-listen says.
	// One that does not listen clears what a former server wrote, so
	// nobody is sent to a port that may now be another's.
	if err := lock.Truncate(0); err == nil && cfg.Port != 0 {
		_, _ = lock.WriteAt([]byte(ns.ClientURL()), 0)
	}
	go func() {
		ns.WaitForShutdown()
		lock.Close()
	}()
	return ns, nil
}

// RunningURL is natsaddr.RunningURL.
func RunningURL(dir string) string { return natsaddr.RunningURL(dir) }

// lockWait is how long lockDir waits for a server that is shutting down
// (its lock is released just after WaitForShutdown returns).
const lockWait = 2 * time.Second

// lockDir takes an exclusive lock on dir's lock file.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, natsaddr.LockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: open lock file: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("embedded nats: lock %s: %w", name, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: %s is held by another NATS server (a running worker? use its NATS, or another --nats-dir)", ErrStoreDirInUse, dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startEmbedded(cfg ServerConfig) (*server.Server, error) {
	opts := &server.Options{
		ServerName: natsaddr.NewIdentity(cfg.StoreDir, cfg.Ledger).ServerName(),
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		Host:       cfg.Host,
		Port:       cfg.Port,
		DontListen: cfg.Port == 0,
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 8 << 20
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLogger(natsLogger{cfg.Logger}, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("start embedded nats: not ready after 15s")
	}
	return ns, nil
}

// natsLogger adapts slog to the NATS server's logger. The server's lines
// carry no secrets of ours: it logs subjects, stream names and errors.
type natsLogger struct{ log *slog.Logger }

func (l natsLogger) logf(level slog.Level, format string, v ...any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, "embedded nats: "+fmt.Sprintf(format, v...))
	}
}

func (l natsLogger) Noticef(format string, v ...any) { l.logf(slog.LevelDebug, format, v...) }
func (l natsLogger) Warnf(format string, v ...any)   { l.logf(slog.LevelWarn, format, v...) }
func (l natsLogger) Errorf(format string, v ...any)  { l.logf(slog.LevelError, format, v...) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.logf(slog.LevelError, format, v...) }
func (l natsLogger) Debugf(string, ...any)           {}
func (l natsLogger) Tracef(string, ...any)           {}
