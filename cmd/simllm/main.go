// Command simllm serves fixpoint's language-model simulator (package
// llm/sim) on a local port, speaking the OpenAI Chat Completions, Anthropic
// Messages and Ollama chat wire formats.
//
//	simllm --preset typical --seed 1 --addr 127.0.0.1:8089
//
// Point an OpenAI client at http://ADDR/v1, an Anthropic client at
// http://ADDR and an Ollama client at http://ADDR.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "simllm:", err)
		return 2
	}
	fmt.Fprintln(stderr, "simllm:", err)
	return 1
}

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 5 * time.Second

// run serves the simulator until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address")
	preset := fs.String("preset", "typical", "fault preset (see below)")
	seed := fs.Uint64("seed", 1, "seed of the ground truth and the fault draws")
	p50 := fs.Duration("latency-p50", 0, "median per-request latency (0: instant)")
	p99 := fs.Duration("latency-p99", 0, "99th percentile per-request latency (lognormal; defaults to the median)")
	tokP50 := fs.Duration("token-latency", 0, "latency per completion token")
	rpm := fs.Int("rpm", -1, "requests per minute per model and key (-1: the preset's; 0: unlimited)")
	tpm := fs.Int("tpm", -1, "tokens per minute per model and key (-1: the preset's; 0: unlimited)")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: simllm [flags]\n\nServes a simulated LLM on OpenAI (/v1/chat/completions), Anthropic (/v1/messages) and Ollama (/api/chat) routes.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(out, "\nPresets:\n")
		for _, p := range sim.PresetNames() {
			fmt.Fprintf(out, "  %-13s %s\n", p.Name, p.Description)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, fs.Args())
	}
	cfg, err := sim.Preset(*preset)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	cfg.Seed = *seed
	cfg.Latency = sim.Latency{Dist: sim.DistLognormal, RequestP50: *p50, RequestP99: max(*p99, *p50), TokenP50: *tokP50, TokenP99: *tokP50}
	if *rpm >= 0 {
		cfg.RPM = *rpm
	}
	if *tpm >= 0 {
		cfg.TPM = *tpm
	}
	srv, err := sim.NewChecked(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	// /healthz for container healthchecks; every other path is the
	// simulator's (it answers the provider routes and 404s the rest).
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/", srv)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "simllm listening on http://%s (preset %s, seed %d)\n", ln.Addr(), *preset, *seed)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.Close() // release hanging and trickling handlers first
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	<-errc
	st := srv.Stats()
	fmt.Fprintf(stdout, "simllm stopped after %d requests (%d replies)\n", st.Requests, st.Replies)
	return nil
}
