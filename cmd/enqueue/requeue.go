package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/batchaction"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
)

const requeueUsage = `Usage: enqueue requeue --batch NAME [--status invalid,failed,rejected,dead] [--class C]
                       [--model M] [--provider P] [--max-attempts N] [--strategy S]
                       [--merge-model M] [--dry-run]

Runs chosen jobs of a batch again, as a new run of the batch. Each job keeps
its outcome so far in the ledger (job_runs, and its attempts keep their run
number, so SQL can still answer what the first run did); the job row shows
the new run's outcome, and its run, when it ends. --model, --provider,
--max-attempts, --strategy and --merge-model change the settings the jobs run
with; the rest are those of the batch's latest run (a new strategy other than
parallel drops the batch's merge model). Repeating the same requeue requeues
nothing new until the jobs have ended again (and publishes what an
interrupted requeue left unpublished). --dry-run prints what it would requeue.
Over-budget jobs run again once the cap is raised: enqueue cap, then
requeue --status over_budget. One requeue or cancel of a batch runs at a
time: another started meanwhile fails (exit 1), naming it.

  enqueue requeue --batch nightly-2026-01-05 --status invalid --class semantic --model gpt-4o

Exit status: 0 done (also when nothing matched), 1 failed (or another requeue
or cancel of the batch in progress), 2 bad usage.`

// requeueCommand is enqueue requeue.
type requeueCommand struct{ stdout io.Writer }

func (c *requeueCommand) Run(ctx context.Context, args []string) error {
	fs := newSubFlagSet("requeue", requeueUsage, c.stdout)
	var (
		common   commonFlags
		cfg      enqueue.RequeueConfig
		statuses = fs.String("status", batchaction.JoinStatuses(enqueue.RequeueStatusesDefault), "statuses to run again, comma-separated: invalid, failed, rejected, dead, cancelled, over_budget, valid")
		strategy = fs.String("strategy", "", "repair strategy of the new run: "+strings.Join(fixpoint.StrategyNames(), ", ")+" (default: unchanged; parallel, sequential and agent need a batch enqueued with documents, and realtime delivery)")
	)
	common.register(fs, true)
	fs.StringVar(&cfg.Class, "class", "", "only jobs whose final class is this (syntax, shape, semantic, truncated, refusal, provider, budget, panic)")
	fs.StringVar(&cfg.Model, "model", "", "model of the new run (default: unchanged)")
	fs.StringVar(&cfg.Provider, "provider", "", "provider of the new run: "+strings.Join(llm.ProviderNames(), ", ")+" (default: unchanged)")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 0, "repair attempts per job in the new run (0: unchanged)")
	fs.StringVar(&cfg.MergeModel, "merge-model", "", "strategy parallel: the model that merges the chunks' values in the new run (default: unchanged)")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "print what would be requeued and change nothing")
	if err := parseSub(fs, args, &common); err != nil {
		return err
	}
	cfg.Batch, cfg.Queue, cfg.Strategy = common.batch, common.queue, fixpoint.Strategy(*strategy)
	if err := checkStrategy("--strategy", *strategy); err != nil {
		return err
	}
	if cfg.MergeModel != "" && cfg.Strategy != "" && cfg.Strategy != fixpoint.StrategyParallel {
		return usageError{Err: fmt.Errorf("--merge-model is for --strategy parallel, which merges the values of a document's chunks, not --strategy %s", cfg.Strategy)}
	}
	var err error
	if cfg.Statuses, err = batchaction.ParseStatuses("--status", *statuses); err != nil {
		return usageError{Err: err}
	}
	st, err := openLedger(ctx, common.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	var js jetstream.JetStream
	if !cfg.DryRun {
		conn, err := common.openQueue()
		if err != nil {
			return err
		}
		defer conn.Close()
		js = conn.JS
	}
	rep, err := enqueue.Requeue(ctx, js, st, cfg)
	if err != nil {
		return actionError(err)
	}
	batchaction.WriteRequeued(c.stdout, cfg, rep)
	return nil
}
