package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedNATSConfig configures an in-process NATS server with JetStream.
type EmbeddedNATSConfig struct {
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
	// Logger, when set, receives the server's warnings and errors (a
	// stream whose store cannot be created, a disk that fills up): the
	// server answers its clients with a generic error and says why only in
	// its log. Notices go at debug level; debug and trace lines are dropped.
	Logger *slog.Logger
}

// StartEmbeddedNATS starts a NATS server with JetStream inside this process,
// so one worker binary serves a single machine with no NATS to install. The
// caller shuts it down with Shutdown and WaitForShutdown.
func StartEmbeddedNATS(cfg EmbeddedNATSConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats: store dir is required")
	}
	opts := &server.Options{
		ServerName: "fixpoint-embedded",
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
