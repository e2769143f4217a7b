package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
)

// benchWorkerEnv, when set on `worker bench`, holds a benchChildConfig and
// makes the process a drain-mode worker for the bench instead.
const benchWorkerEnv = "FIXPOINT_BENCH_WORKER"

// benchChildConfig is what a tuned worker subprocess runs with.
type benchChildConfig struct {
	NATSURL, DSN, SimURL string
	Queue                pipeline.QueueConfig
	Concurrency          int
	Prefetch             int
	LaneInitial          int
	LaneMax              int
	FlushMax             int
}

// runBenchChild runs one drain-mode pipeline.Worker as configured by the
// parent bench, against its NATS, ledger and simulator.
func runBenchChild(ctx context.Context, raw string) error {
	var cc benchChildConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		return fmt.Errorf("decode %s: %w", benchWorkerEnv, err)
	}
	st, err := store.Open(ctx, cc.DSN, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	nc, err := nats.Connect(cc.NATSURL, nats.Name("fixpoint-bench-worker"))
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("open JetStream: %w", err)
	}
	c, err := llm.New(llm.Config{
		Provider: llm.ProviderOpenAI, BaseURL: cc.SimURL + "/v1", APIKey: "sim-bench",
		TotalTimeout: time.Minute, Retry: llm.RetryConfig{MaxRetries: 4},
		Lane: llm.LaneConfig{InitialConcurrency: cc.LaneInitial, MaxConcurrency: cc.LaneMax},
	})
	if err != nil {
		return fmt.Errorf("configure simulator client: %w", err)
	}
	w, err := pipeline.NewWorker(js, st, pipeline.WorkerConfig{
		Queue: cc.Queue, Concurrency: cc.Concurrency, Prefetch: cc.Prefetch, FlushMax: cc.FlushMax, Drain: true, Grace: 10 * time.Second,
		Providers: map[string]pipeline.Completer{llm.ProviderOpenAI: c},
	})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
