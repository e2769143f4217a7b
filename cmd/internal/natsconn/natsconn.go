// Package natsconn connects the commands to their queue: a NATS server at a
// URL, or, with no URL, the embedded JetStream store in a local directory
// that one worker serves for a whole machine.
package natsconn

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
)

// Defaults of the embedded queue.
const (
	// DirDefault keeps the embedded server's JetStream files.
	DirDefault = natsaddr.DirDefault
	// ListenDefault is where a worker's embedded server listens, so that
	// enqueue and other workers on the machine can reach it.
	ListenDefault = "127.0.0.1:4223"
)

// Config says where the queue is.
type Config struct {
	// URL of a NATS server; empty means the embedded store in Dir.
	URL string
	// Dir is the embedded store's directory. Defaults to DirDefault.
	Dir string
	// Listen is the host:port the embedded server listens on ("" or port
	// 0: in-process clients only; port -1: any free port).
	Listen string
	// Running is where a running worker's embedded server listens: when
	// another process's server holds Dir, Open connects there instead of
	// failing (enqueue while a worker runs). "" fails instead.
	Running string
	// Name is the client connection's name.
	Name string
	// Ledger names the ledger of the caller (host:port/database, see
	// store.LedgerName): a server it starts announces it, and a running
	// server it connects to must serve Dir for the same ledger.
	Ledger string
}

// ErrForeignQueue is returned by Open when the running server it reached
// serves another directory or ledger: publishing there would hand the
// jobs to another setup's workers.
var ErrForeignQueue = errors.New("the NATS server there is not this queue's")

// Conn is an open queue connection.
type Conn struct {
	JS jetstream.JetStream
	NC *nats.Conn
	// Where says what was reached, for a log line.
	Where string
	ns    *server.Server
	done  chan struct{}
}

// Open connects as cfg says. Close the Conn when done.
func Open(cfg Config, log *slog.Logger) (*Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		cfg.Dir = DirDefault
	}
	c := &Conn{done: make(chan struct{})}
	url := cfg.URL
	if url == "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		ns, err := StartServer(ServerConfig{StoreDir: cfg.Dir, Host: host, Port: port, Ledger: cfg.Ledger, Logger: log})
		switch {
		case errors.Is(err, ErrStoreDirInUse) && cfg.Running != "":
			// Where the server says it listens, else where we were told.
			url = cmp.Or(RunningURL(cfg.Dir), "nats://"+cfg.Running)
			c.Where = "the running worker's embedded NATS at " + url + " (it holds " + cfg.Dir + ")"
		case err != nil:
			return nil, err
		default:
			c.ns = ns
			url = ns.ClientURL()
			c.Where = "embedded NATS in " + cfg.Dir
			if port != 0 {
				c.Where += ", listening on " + url
			}
		}
	} else {
		if err := CheckURL(url); err != nil {
			return nil, err
		}
		c.Where = url
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(c.done) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", slog.String("error", err.Error()))
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("NATS reconnected") }),
	}
	if c.ns != nil {
		// Our own server is reached in process: with port 0 it listens on
		// no port, and its client URL names the default port, where
		// another server may be listening.
		opts = append(opts, nats.InProcessServer(c.ns))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		c.stopServer()
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	if cfg.URL == "" && c.ns == nil {
		if err := checkIdentity(nc.ConnectedServerName(), url, cfg); err != nil {
			nc.Close()
			return nil, err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		c.stopServer()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	c.NC, c.JS = nc, js
	return c, nil
}

// Embedded reports whether this Conn runs the embedded server itself.
func (c *Conn) Embedded() bool { return c.ns != nil }

// Close drains the connection (waiting until it is closed, so acks and
// publishes in flight are delivered), then stops an embedded server.
func (c *Conn) Close() {
	if err := c.NC.Drain(); err == nil {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.NC.Close()
		}
	} else {
		c.NC.Close()
	}
	c.stopServer()
}

func (c *Conn) stopServer() {
	if c.ns != nil {
		c.ns.Shutdown()
		c.ns.WaitForShutdown()
	}
}

// checkIdentity refuses a running server reached at url that does not
// serve cfg's directory and ledger.
func checkIdentity(name, url string, cfg Config) error {
	want := natsaddr.NewIdentity(cfg.Dir, cfg.Ledger)
	how := "set FIXPOINT_NATS_LISTEN (or --nats-listen) to where this directory's worker listens, and give each setup on the machine its own address"
	id, ok := natsaddr.ParseServerName(name)
	if !ok {
		return fmt.Errorf("%w: a running server holds %s, but %s is %s, not a fixpoint worker's embedded NATS: %s", ErrForeignQueue, want.Dir, url, describeName(name), how)
	}
	if id.Mismatch(want) != "" {
		return fmt.Errorf("%w: %s is the embedded NATS of another setup (%s), not this one's (%s), and jobs published there would go to its workers: %s", ErrForeignQueue, url, id, want, how)
	}
	return nil
}

func describeName(name string) string {
	if name == "" {
		return "a NATS server with no name"
	}
	return fmt.Sprintf("a NATS server named %q", name)
}

func splitListen(addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", 0, nil
	}
	host, portText, ok := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portText)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("listen address %q: want host:port", addr)
	}
	return host, port, nil
}

// CheckReplicas refuses replicas of the job stream (--stream-replicas)
// over 1 without a NATS URL: the embedded queue is one server, and would
// refuse them only once asked.
func CheckReplicas(url string, replicas int) error {
	if replicas > 1 && url == "" {
		return fmt.Errorf("--stream-replicas %d needs a JetStream cluster: set NATS_URL (or --nats-url) to its servers, comma-separated; the embedded queue is one server", replicas)
	}
	return nil
}

// ErrBadURL is wrapped by CheckURL's errors.
var ErrBadURL = natsaddr.ErrBadURL

// CheckURL is natsaddr.CheckURL.
func CheckURL(s string) error { return natsaddr.CheckURL(s) }
