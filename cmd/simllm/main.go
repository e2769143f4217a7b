// Command simllm serves fixpoint's language-model simulator (package
// sim) on a local port, speaking the OpenAI Chat Completions, Anthropic
// Messages and Ollama chat wire formats, and the OpenAI Batch API (Files
// and Batches) and Anthropic Message Batches.
//
//	simllm --preset typical --seed 1 --addr 127.0.0.1:8089
//	simllm --batch-completion-delay 30s --batch-expired-share 0.02 --batch-errored-share 0.01
//	simllm --preset messy --fault scalar_as_string=0.2,enum_synonym=0 --fault patch_bad_pointer=0.1
//	simllm docs --n 200 --chars 120000 --seed 1 --out bench/docs
//
// simllm docs writes simulated long documents, a dataset of them, their
// schema, a template and their ground truth (docs.go); the simulator
// answers requests over them from what their text holds.
//
// --fault sets the probability of any fault kind of the preset's mix (the
// shape faults scalar_as_string, enum_case, single_for_array,
// null_optional, renamed_key, number_prose and enum_synonym, the JSON Patch faults
// patch_bad_pointer, patch_wrong_op and patch_extra_op, and the others);
// --help lists them.
//
// Point an OpenAI client at http://ADDR/v1, an Anthropic client at
// http://ADDR and an Ollama client at http://ADDR.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fixpoint-dev/fixpoint/sim"
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

// faultRate is one --fault setting.
type faultRate struct {
	kind sim.FaultKind
	p    float64
}

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 5 * time.Second

// simFlags are simllm's flags.
type simFlags struct {
	fs                         *flag.FlagSet
	addr, preset, apiKey       string
	seed                       uint64
	p50, p99, tokP50           time.Duration
	rpm, tpm, antMin           int
	batchDelay, batchDeadline  time.Duration
	batchCancel, cacheTTL      time.Duration
	expiredShare, erroredShare float64
	hitProb                    float64
	flexLatency                time.Duration
	flexBusy                   float64
	maxListItems               int
	promptCache                bool
	faults                     []faultRate
}

func newSimFlags(stderr io.Writer) *simFlags {
	f := &simFlags{fs: flag.NewFlagSet("simllm", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8089", "listen address")
	fs.StringVar(&f.preset, "preset", "typical", "fault preset (see below)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the ground truth and the fault draws")
	fs.DurationVar(&f.p50, "latency-p50", 0, "median per-request latency (0: instant)")
	fs.DurationVar(&f.p99, "latency-p99", 0, "99th percentile per-request latency (lognormal; defaults to the median)")
	fs.DurationVar(&f.tokP50, "token-latency", 0, "latency per completion token")
	fs.StringVar(&f.apiKey, "api-key", "", "accept only this API key (Bearer for OpenAI, x-api-key for Anthropic); others get the provider's 401 (empty: any key)")
	fs.IntVar(&f.rpm, "rpm", -1, "requests per minute per model and key (-1: the preset's; 0: unlimited)")
	fs.IntVar(&f.tpm, "tpm", -1, "tokens per minute per model and key (-1: the preset's; 0: unlimited)")
	fs.DurationVar(&f.batchDelay, "batch-completion-delay", sim.BatchCompletionDelayDefault,
		"how long a batch runs: its requests finish one by one over it, then it ends (0: at once)")
	fs.DurationVar(&f.batchDeadline, "batch-deadline", sim.BatchDeadlineDefault,
		"a batch still running this long after its creation ends expired, its unfinished requests expired")
	fs.DurationVar(&f.batchCancel, "batch-cancel-delay", 0, "how long a batch cancel takes to end the batch")
	fs.Float64Var(&f.expiredShare, "batch-expired-share", 0, "share of each batch's requests that end expired (0..1)")
	fs.Float64Var(&f.erroredShare, "batch-errored-share", 0, "share of each batch's requests that end errored with the provider's 500 (0..1)")
	fs.Float64Var(&f.hitProb, "batch-cache-hit-prob", 1, "probability that a batch request reads a cached prompt prefix (Anthropic: best effort)")
	fs.BoolVar(&f.promptCache, "prompt-cache", true, "model prompt caching (OpenAI automatic from 1,024 tokens; Anthropic at cache_control)")
	fs.DurationVar(&f.cacheTTL, "cache-ttl", sim.CacheTTLDefault, "how long a cached prompt prefix lives after its last use")
	fs.IntVar(&f.antMin, "anthropic-cache-min-tokens", 0, fmt.Sprintf("minimum cacheable prefix of every Anthropic model (0: %d for a model named *haiku*, %d for any other)",
		sim.AnthropicHaikuCacheMinTokens, sim.AnthropicCacheMinTokens))
	fs.DurationVar(&f.flexLatency, "flex-latency", 0, "added to the latency of an OpenAI call with service_tier \"flex\" (the flex tier is slower)")
	fs.Float64Var(&f.flexBusy, "flex-busy", 0, "share of OpenAI calls with service_tier \"flex\" refused with the flex tier's 429 Resource Unavailable (0..1)")
	fs.IntVar(&f.maxListItems, "max-list-items", -1, "most items of one list in a reply over a long document, the first its text holds (-1: the preset's; 0: no limit)")
	fs.Func("fault", "set fault kinds' probabilities (0..1) in the preset's mix: kind=p[,kind=p...], repeatable; kinds below", f.addFaults)
	fs.Usage = f.usage
	return f
}

// addFaults reads one --fault value.
func (f *simFlags) addFaults(v string) error {
	for _, part := range strings.Split(v, ",") {
		k, ps, ok := strings.Cut(strings.TrimSpace(part), "=")
		p, err := strconv.ParseFloat(ps, 64)
		var m sim.Mix
		if !ok || err != nil || !m.Set(sim.FaultKind(k), p) {
			return fmt.Errorf("want kind=probability with a kind listed in --help, got %q", part)
		}
		f.faults = append(f.faults, faultRate{sim.FaultKind(k), p})
	}
	return nil
}

// usage prints the help: what simllm serves, its flags, the presets and
// the fault kinds.
func (f *simFlags) usage() {
	out := f.fs.Output()
	fmt.Fprintf(out, "Usage: simllm [flags]\n       simllm docs --out DIR [flags]   write simulated long documents (simllm docs --help)\n\nServes a simulated LLM on OpenAI (/v1/chat/completions), Anthropic (/v1/messages) and Ollama (/api/chat) routes,\n"+
		"and the batch APIs: OpenAI /v1/files, /v1/batches and Anthropic /v1/messages/batches (create, retrieve, cancel, list,\n"+
		"results). A batch's requests are answered like single calls, without the preset's transport faults.\n"+
		"An OpenAI call with service_tier \"flex\" is the flex tier: answered --flex-latency slower, refused with 429\n"+
		"Resource Unavailable (code resource_unavailable) at the rate --flex-busy, its reply saying service_tier \"flex\".\n"+
		"GET /healthz answers ok; GET /stats the counters so far as JSON (Requests, Replies, ByStatus, Batch, ...).\n\nFlags:\n")
	f.fs.PrintDefaults()
	fmt.Fprintf(out, "\nPresets:\n")
	for _, p := range sim.PresetNames() {
		fmt.Fprintf(out, "  %-13s %s\n", p.Name, p.Description)
	}
	typical, _ := sim.Preset("typical")
	messy, _ := sim.Preset("messy")
	fmt.Fprintf(out, "\nFault kinds (--fault kind=p; typical's and messy's p; lossless: a local repair gives the truth back):\n")
	for _, k := range sim.FaultKindInfos() {
		lossless := ""
		if k.Lossless {
			lossless = ", lossless"
		}
		fmt.Fprintf(out, "  %-18s %-10s %5g %5g  %s%s\n", k.Kind, k.Group, typical.Mix.Prob(k.Kind), messy.Mix.Prob(k.Kind), k.Description, lossless)
	}
	fmt.Fprintf(out, "\nA correction whose text says %q gets an RFC 6902 patch of its previous value (patch_* faults apply).\n", sim.PatchMarker)
}

// config is the simulator's configuration the flags give.
func (f *simFlags) config() (sim.Config, error) {
	cfg, err := sim.Preset(f.preset)
	if err != nil {
		return cfg, fmt.Errorf("%w: %w", errUsage, err)
	}
	cfg.Seed = f.seed
	cfg.APIKey = f.apiKey
	for _, fr := range f.faults {
		cfg.Mix.Set(fr.kind, fr.p)
	}
	cfg.Latency = sim.Latency{Dist: sim.DistLognormal, RequestP50: f.p50, RequestP99: max(f.p99, f.p50), TokenP50: f.tokP50, TokenP99: f.tokP50}
	if f.rpm < -1 || f.tpm < -1 {
		return cfg, fmt.Errorf("%w: --rpm %d, --tpm %d: want -1 (the preset's), 0 (unlimited) or a budget", errUsage, f.rpm, f.tpm)
	}
	if f.rpm >= 0 {
		cfg.RPM = f.rpm
	}
	if f.maxListItems < -1 {
		return cfg, fmt.Errorf("%w: --max-list-items %d: want -1 (the preset's), 0 (no limit) or a count", errUsage, f.maxListItems)
	}
	if f.maxListItems >= 0 {
		cfg.MaxListItems = f.maxListItems
	}
	if f.tpm >= 0 {
		cfg.TPM = f.tpm
	}
	cfg.Batch = sim.BatchConfig{CompletionDelay: f.batchDelay, Deadline: f.batchDeadline, CancelDelay: f.batchCancel,
		ExpiredShare: f.expiredShare, ErroredShare: f.erroredShare, CacheHitProb: f.hitProb,
		// A restart must not hand out the ids a worker's open waves poll.
		IDSalt: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if f.batchDelay == 0 {
		cfg.Batch.CompletionDelay = -1 // the simulator reads 0 as its default
	}
	if f.hitProb == 0 {
		cfg.Batch.CacheHitProb = -1
	}
	if f.batchDeadline <= 0 || f.cacheTTL <= 0 || f.batchDelay < 0 || f.hitProb < 0 {
		return cfg, fmt.Errorf("%w: --batch-deadline and --cache-ttl must be > 0, --batch-completion-delay and --batch-cache-hit-prob >= 0", errUsage)
	}
	cfg.Cache = sim.CacheConfig{Off: !f.promptCache, TTL: f.cacheTTL, AnthropicMinTokens: f.antMin}
	if f.flexLatency < 0 || f.flexBusy < 0 || f.flexBusy > 1 {
		return cfg, fmt.Errorf("%w: --flex-latency %s, --flex-busy %v: want a latency >= 0 and a share in 0..1", errUsage, f.flexLatency, f.flexBusy)
	}
	cfg.FlexLatency, cfg.FlexBusy = f.flexLatency, f.flexBusy
	return cfg, nil
}

// run serves the simulator until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "docs" {
		return runDocs(args[1:], stdout, stderr)
	}
	f := newSimFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", errUsage, f.fs.Args())
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	srv, err := sim.NewChecked(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	fmt.Fprintf(stdout, "simllm listening on http://%s (preset %s, seed %d)\n", ln.Addr(), f.preset, f.seed)
	return serve(ctx, srv, ln, stdout)
}

// serve serves srv on ln until ctx ends, then shuts down and says what it
// served.
func serve(ctx context.Context, srv *sim.Server, ln net.Listener, stdout io.Writer) error {
	// /healthz for container healthchecks, /stats for the counters; every other path is the
	// simulator's (it answers the provider routes and 404s the rest).
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	// /stats: the counters so far, to compare what was answered with what
	// a ledger recorded while the simulator still runs.
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(srv.Stats())
	})
	mux.Handle("/", srv)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
	fmt.Fprintf(stdout, "simllm stopped after %d requests (%d replies, %d batches)\n", st.Requests, st.Replies, st.Batch.Created)
	return nil
}
