package pipeline

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedNATSConfig configures an in-process NATS server with JetStream.
type EmbeddedNATSConfig struct {
	// StoreDir keeps JetStream's files; required, so jobs survive a restart.
	StoreDir string
	// Host and Port to listen on; Port 0 means DontListen (in-process
	// clients only), -1 a random port.
	Host string
	Port int
	// MaxPayload bounds one message; defaults to 8 MiB so the queue's own
	// MaxMsgSize is what limits jobs.
	MaxPayload int32
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
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("start embedded nats: not ready after 15s")
	}
	return ns, nil
}
