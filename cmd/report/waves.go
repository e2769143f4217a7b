package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

// wavesLedger is what writeWaveSections reads. *store.Store satisfies it.
type wavesLedger interface {
	Waves(ctx context.Context, batch string) ([]store.Wave, error)
	CacheDelivery(ctx context.Context, batch string) (store.CacheDelivery, error)
	Repairs(ctx context.Context, batch string) (store.RepairFigures, error)
}

var _ wavesLedger = (*store.Store)(nil)

// writeWaveSections follows the summary table with, for each batch that
// has waves (batch delivery), its waves, its prompt-cache hit rate and its
// spend by price basis. Batches without waves add nothing.
func writeWaveSections(ctx context.Context, w io.Writer, l wavesLedger, rows []store.BatchSummary) error {
	for _, r := range rows {
		if r.Batch == "" {
			continue
		}
		waves, err := l.Waves(ctx, r.Batch)
		if err != nil {
			return err
		}
		d, err := l.CacheDelivery(ctx, r.Batch)
		if err != nil {
			return err
		}
		rf, err := l.Repairs(ctx, r.Batch)
		if err != nil {
			return err
		}
		if line := repairsLine(rf); line != "" {
			fmt.Fprintf(w, "\n%s: %s\n", r.Batch, line)
		}
		if len(waves) == 0 {
			// A realtime batch: its prompt cache, when it used one.
			if d.CachedTokens > 0 || d.CacheWriteTokens > 0 {
				fmt.Fprintln(w)
				writeCache(w, r.Batch+": ", d)
			}
			continue
		}
		fmt.Fprintln(w)
		writeWaves(w, r.Batch, waves, d)
	}
	return nil
}

// writeWaves prints a batch's waves, one line each and a total, then its
// prompt-cache and delivery lines.
func writeWaves(w io.Writer, batch string, waves []store.Wave, d store.CacheDelivery) {
	fmt.Fprintf(w, "Waves of batch %s (TIME: submitted to ended at the provider)\n", batch)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tPROVIDER\tSTATUS\tREQUESTS\tSUCCEEDED\tERRORED\tEXPIRED\tCANCELLED\tTIME")
	var tot store.Wave
	for _, v := range waves {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", v.Number, v.Provider, v.Status,
			v.Requests, v.Succeeded, v.Errored, v.Expired, v.Cancelled, waveTime(v))
		tot.Requests += v.Requests
		tot.Succeeded += v.Succeeded
		tot.Errored += v.Errored
		tot.Expired += v.Expired
		tot.Cancelled += v.Cancelled
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t%d\t%d\t%d\t%d\t%s\n", tot.Requests, tot.Succeeded, tot.Errored, tot.Expired, tot.Cancelled, wavesTime(waves))
	tw.Flush()
	// Why a wave failed was only in the log and waves.error; how an open
	// one fares (its provider batch gone, no worker driving it) was
	// nowhere: it read "submitted ... running" for as long.
	for _, v := range waves {
		switch {
		case v.Status == store.WaveFailed && v.Error != "":
			fmt.Fprintf(w, "wave %d failed: %s\n", v.Number, v.Error)
		case v.Status == store.WaveDone || v.Status == store.WaveFailed:
		default:
			if !v.MissingSince.IsZero() {
				fmt.Fprintf(w, "wave %d: the provider has not known its batch %s since %s (404); it is given up 5 minutes after that and its jobs run realtime\n",
					v.Number, v.ProviderBatchID, v.MissingSince.UTC().Format(time.RFC3339))
			}
			if v.Error != "" {
				fmt.Fprintf(w, "wave %d: %s\n", v.Number, v.Error)
			}
			if !v.NextPollAt.IsZero() && time.Since(v.NextPollAt) > 2*time.Minute && time.Now().After(v.LeaseUntil) {
				fmt.Fprintf(w, "wave %d: due to be polled since %s and no worker has: is a worker of its home (%s) running on this ledger?\n",
					v.Number, v.NextPollAt.UTC().Format(time.RFC3339), cmp.Or(v.Home, "any"))
			}
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "prompt cache\t%s\n", cacheLine(d))
	fmt.Fprintf(tw, "delivery\tbatch: %s $%.6f, realtime: %s $%.6f\n",
		cli.Plural(d.Batch.Attempts, "attempt"), d.Batch.CostUSD, cli.Plural(d.Realtime.Attempts, "attempt"), d.Realtime.CostUSD)
	tw.Flush()
}

// writeCache prints the prompt-cache line of a realtime batch.
func writeCache(w io.Writer, prefix string, d store.CacheDelivery) {
	fmt.Fprintf(w, "%sprompt cache %s\n", prefix, cacheLine(d))
}

func cacheLine(d store.CacheDelivery) string {
	return fmt.Sprintf("%.1f%% hit: %d of %d prompt tokens read from the cache, %d written to it",
		100*d.CacheHitRate, d.CachedTokens, d.PromptTokens, d.CacheWriteTokens)
}

// waveTime is how long the provider took over a wave: "-" when it was
// never submitted, "running" while it has not ended.
func waveTime(v store.Wave) string {
	switch {
	case v.SubmittedAt.IsZero():
		return "-"
	case v.EndedAt.IsZero():
		return "running"
	}
	return v.EndedAt.Sub(v.SubmittedAt).Round(time.Second).String()
}

// wavesTime is the span of a batch's waves: from the first submission to
// the last end; "running" while one submitted has not ended, "-" when none
// was submitted.
func wavesTime(waves []store.Wave) string {
	var first, last time.Time
	for _, v := range waves {
		if v.SubmittedAt.IsZero() {
			continue
		}
		if v.EndedAt.IsZero() {
			return "running"
		}
		if first.IsZero() || v.SubmittedAt.Before(first) {
			first = v.SubmittedAt
		}
		if v.EndedAt.After(last) {
			last = v.EndedAt
		}
	}
	if first.IsZero() {
		return "-"
	}
	return last.Sub(first).Round(time.Second).String()
}

// repairsLine says what a batch's local repairs and patch re-asks did, ""
// when they did nothing.
func repairsLine(f store.RepairFigures) string {
	var parts []string
	if len(f.Kinds) > 0 || f.TextSaved > 0 {
		// Both kinds of local repair save a call: a reply with a trailing
		// comma made valid in place is a re-ask not paid for, as is "42"
		// for 42.
		by := []string{fmt.Sprintf("%d by text repairs alone", f.TextSaved)}
		if len(f.Kinds) > 0 {
			var kinds []string
			for _, k := range f.Kinds {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, f.Coercions[k]))
			}
			by = append(by, fmt.Sprintf("%d by schema-guided fixes (%s)", f.CallsSaved, strings.Join(kinds, ", ")))
		}
		parts = append(parts, fmt.Sprintf("local repairs saved %d of the %s the latest runs made: %s", f.TextSaved+f.CallsSaved, cli.Plural(f.Calls, "call"), strings.Join(by, ", ")))
	}
	if len(f.Patches) > 0 {
		tried := int64(0)
		for _, n := range f.Patches {
			tried += n
		}
		var other []string
		for _, k := range []string{"out_of_scope", "apply_error", "parse_error"} {
			if f.Patches[k] > 0 {
				other = append(other, fmt.Sprintf("%s %d", k, f.Patches[k]))
			}
		}
		line := fmt.Sprintf("patches applied %d of %d", f.Patches["applied"], tried)
		if len(other) > 0 {
			line += " (" + strings.Join(other, ", ") + ")"
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
}
