package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/web"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

const serveUsage = `Usage: report serve [flags]

Serves the dashboard, a web UI over the ledger: the batches with their live
progress; a batch's funnel (valid at attempt 1, 2, 3, never), failure
clusters, cost per valid job by model and a filterable job list with CSV and
JSONL exports and a search of its jobs' text; a job's attempts as cards
(reply, repairs, errors, feedback, value diffs), a requeued job's runs side
by side; what every batch cost over time. Its Try page runs one job through the repair step, on the
simulator's presets or a provider (the environment's key, or one typed in
the page for that try alone), and writes nothing to the ledger; --try=false
leaves it out. Every asset is in the binary; a page makes no request off
this host.

Without an admin token it is read-only. With one (--admin-token, or
FIXPOINT_ADMIN_TOKEN; at least 16 characters, no white space around it),
every request must give it (HTTP Basic password, any
user name, or Authorization: Bearer TOKEN), and each batch's page offers the
actions: requeue, cancel, and the spend cap, each what enqueue requeue,
enqueue cancel and enqueue cap do (a requeue publishes to the queue that
--nats-url, or the embedded one in --nats-dir, names, as enqueue does); a
job's page and the job list requeue or cancel one job or the jobs ticked.
Every action is a POST that must come from the dashboard's own page (its
origin, and a CSRF token bound to a SameSite=Strict cookie).

It listens on loopback unless told otherwise. A non-loopback --addr is
refused without an admin token. Ctrl-C stops it, open pages and streams
closed.

  report serve
  report serve --addr 127.0.0.1:9000
  FIXPOINT_ADMIN_TOKEN=$(openssl rand -hex 16) report serve --addr 0.0.0.0:8090
  FIXPOINT_ADMIN_TOKEN=... report serve --nats-url nats://10.0.0.5:4222

Exit status: 0 stopped by a signal, 1 an error (the address taken, the
ledger unreachable), 2 bad usage.`

const (
	serveAddrDefault = "127.0.0.1:8090"
	// shutdownGrace bounds the wait for requests in flight at a stop.
	shutdownGrace = 5 * time.Second
)

// serveCommand is report serve.
type serveCommand struct{ stdout, stderr io.Writer }

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("serve", serveUsage,
		ledgerEnv+"\n  FIXPOINT_ADMIN_TOKEN  admin token, at least 16 characters (default none): needed to listen off loopback, then asked of every request; enables the actions"+
			"\n  NATS_URL              with a token: the queue a requeue publishes to (empty: the embedded queue in --nats-dir)"+
			"\n  FIXPOINT_NATS_DIR     with a token: the embedded queue's directory (default "+natsconn.DirDefault+")"+
			"\n  FIXPOINT_NATS_LISTEN  with a token: where a running worker's embedded NATS listens (default "+natsconn.ListenDefault+")\n"+tryEnvHelp, c.stdout)
	addr := fs.String("addr", serveAddrDefault, "address to listen on (host:port); off loopback only with an admin token")
	// The environment's token is read after parsing: as the flag's default
	// it would print in --help.
	token := fs.String("admin-token", "", "admin token, at least 16 characters (env FIXPOINT_ADMIN_TOKEN): every request must give it, and the batch actions are offered")
	natsURL := fs.String("nats-url", envOr("NATS_URL", ""), "with a token: NATS server a requeue publishes to (env NATS_URL); empty: the embedded queue in --nats-dir")
	natsDir := fs.String("nats-dir", envOr("FIXPOINT_NATS_DIR", natsconn.DirDefault), "with a token: directory of the embedded queue (env FIXPOINT_NATS_DIR)")
	natsListen := fs.String("nats-listen", envOr("FIXPOINT_NATS_LISTEN", natsconn.ListenDefault), "with a token: where a running worker's embedded NATS listens (env FIXPOINT_NATS_LISTEN)")
	var q queue.Config
	fs.StringVar(&q.Stream, "stream", queue.StreamDefault, "with a token: JetStream stream a requeue publishes to (a batch enqueued to another stream keeps its own)")
	fs.StringVar(&q.Subject, "subject", queue.SubjectDefault, "with a token: subject a requeue publishes on")
	queryTimeout := fs.Duration("query-timeout", web.QueryTimeoutDefault, "bound on the ledger queries of one page: a slower ledger gives an error page")
	clientStreams := fs.Int("client-streams", web.ClientStreamsDefault, "live streams (pages following a running batch or a try) one client address may hold open, of the dashboard's "+
		fmt.Sprint(web.MaxStreamsDefault)+"; behind a reverse proxy every client has the proxy's address: raise it")
	try := fs.Bool("try", true, "serve the Try playground (one job through the repair step, on the simulator or a provider)")
	err := cliflags.NoArgs(fs, args)
	if err != nil {
		return err
	}
	if *token, err = adminToken(*token); err != nil {
		return err
	}
	if err := q.WithDefaults().Validate(); err != nil {
		return cliflags.SettingUsage(err, map[string]string{"Stream": "--stream", "Subject": "--subject"})
	}
	if *natsURL != "" {
		if err := natsconn.CheckURL(*natsURL); err != nil {
			return usageError{Err: fmt.Errorf("--nats-url (env NATS_URL): %w", err)}
		}
	}
	if *queryTimeout <= 0 {
		return usageError{Err: fmt.Errorf("--query-timeout %s: give a positive duration", *queryTimeout)}
	}
	if *clientStreams < 1 {
		return usageError{Err: fmt.Errorf("--client-streams %d: give 1 or more", *clientStreams)}
	}
	loop, err := loopbackAddr(*addr)
	if err != nil {
		return usageError{Err: err}
	}
	if !loop && *token == "" {
		return usageError{Err: fmt.Errorf("--addr %s is not a loopback address: give an admin token (--admin-token or FIXPOINT_ADMIN_TOKEN) to serve the ledger beyond this host", *addr)}
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	cfg := web.Config{QueryTimeout: *queryTimeout, ClientStreams: *clientStreams,
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *token != "" {
		// The actions only behind the token (RequireToken below).
		cfg.Actions = &ledgerActions{st: st, queue: q, nats: natsconn.Config{URL: *natsURL, Dir: *natsDir, Running: *natsListen,
			Name: "fixpoint-report-serve", Ledger: store.LedgerName(*dbURL)}}
	}
	if *try {
		sims := &playground.SimPresets{Latency: trySimLatency}
		defer sims.Close()
		cfg.Try = newPlayground(sims)
	}
	var h http.Handler = web.NewHandler(st, cfg)
	if *token != "" {
		h = web.RequireToken(h, *token)
	}
	mode := "read-only"
	if *token != "" {
		mode = "admin token required; actions on"
	}
	fmt.Fprintf(c.stdout, "report serve: dashboard at http://%s/ (%s); Ctrl-C stops it\n", ln.Addr(), mode)
	return serveUntil(ctx, h, ln)
}

// serveUntil serves h on ln until ctx ends, then stops, the requests in
// flight given shutdownGrace.
func serveUntil(ctx context.Context, h http.Handler, ln net.Listener) error {
	// Requests run under base, cancelled at a stop: the live streams end
	// then instead of holding the shutdown until they time out.
	base, stopRequests := context.WithCancel(context.Background())
	defer stopRequests()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return base }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stopRequests()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("stop the dashboard: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// adminToken is the admin token of --admin-token (flag), else of
// FIXPOINT_ADMIN_TOKEN, "" for none; a token web.CheckToken refuses is a
// usage error naming where it came from. The environment's is read here,
// not as the flag's default, which --help would print.
func adminToken(flag string) (string, error) {
	token, from := flag, "--admin-token"
	if token == "" {
		token, from = os.Getenv("FIXPOINT_ADMIN_TOKEN"), "FIXPOINT_ADMIN_TOKEN"
	}
	if token != "" {
		if err := web.CheckToken(token); err != nil {
			return "", usageError{Err: fmt.Errorf("the admin token (%s) %w", from, err)}
		}
	}
	return token, nil
}

// loopbackAddr reports whether addr (host:port) listens on loopback only:
// a loopback IP, or "localhost". An empty host (every interface) and any
// other name are not.
func loopbackAddr(addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--addr %q: %w (want host:port, e.g. %s)", addr, err, serveAddrDefault)
	}
	if port == "" {
		return false, fmt.Errorf("--addr %q has no port (want host:port, e.g. %s)", addr, serveAddrDefault)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
