package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// ErrBatchFailed is matched by BatchVerdict's error: the batch is done but
// failed its gate.
var ErrBatchFailed = errors.New("batch failed")

// Statuses is the line of a batch's jobs by status, every status named.
func Statuses(p store.Progress) string {
	return fmt.Sprintf("valid %d, invalid %d, failed %d, rejected %d, dead %d, cancelled %d, over_budget %d, queued %d",
		p.Valid, p.Invalid, p.Failed, p.Rejected, p.Dead, p.Cancelled, p.OverBudget, p.Queued)
}

// BatchVerdict is what `worker --drain --batch` and `report wait` say of a
// batch whose jobs are all final: the line to print, notes for the
// operator (dead jobs, jobs the spend cap stopped, and how to run them
// again), and an error matching ErrBatchFailed when more than maxFail of
// its jobs are not valid, or when none is valid though some were not
// cancelled: a batch whose every job died (the provider unreachable, a
// wrong base URL) is not a success whatever the rate allowed. sp is the
// batch's spend and cap (OverBudgetSpend), nil when not read.
func BatchVerdict(batch string, p store.Progress, sp *store.Spend, maxFail float64) (line string, notes []string, err error) {
	rate := 0.0
	if p.Total > 0 {
		rate = float64(p.Total-p.Valid) / float64(p.Total)
	}
	line = fmt.Sprintf("batch %s done: %s, %s%% not valid (%s)", batch, Plural(p.Total, "job"), Pct(rate), Statuses(p))
	if p.Queued > 0 || p.Recording != nil {
		// Not done: queued jobs are no failures, and the share not valid
		// is of a batch that is not all there.
		line = fmt.Sprintf("batch %s not done: %s, %d queued (%s)", batch, Plural(p.Total, "job"), p.Queued, Statuses(p))
	}
	if p.Dead > 0 {
		notes = append(notes, fmt.Sprintf("%s of batch %s %s dead: delivered the most times without a result (report failures %s shows why); once the cause is fixed, run them again with: enqueue requeue --batch %s --status dead",
			Plural(p.Dead, "job"), batch, Are(p.Dead), batch, batch))
	}
	switch {
	case p.Recording != nil:
		err = NotFullyEnqueued(batch, p.Recording)
	case p.Total == 0:
		err = fmt.Errorf("%w: batch %s holds no job (the enqueue that created it recorded none: run it again)", ErrBatchFailed, batch)
	case p.Valid == 0 && p.Cancelled < p.Total:
		err = fmt.Errorf("%w: no job of batch %s is valid", ErrBatchFailed, batch)
	case rate > maxFail:
		err = fmt.Errorf("%w: %s%% of batch %s not valid, limit %s%%", ErrBatchFailed, percent(rate), batch, percent(maxFail))
	}
	if p.OverBudget > 0 {
		// What a cron mail shows is the error: it names the cap that
		// stopped the batch, and the way on, when the cap made it fail.
		stopped := capStopped(batch, p, sp)
		if err != nil && p.Recording == nil && p.Total > 0 {
			err = fmt.Errorf("%w: %s", err, stopped)
		} else {
			notes = append(notes, stopped)
		}
	}
	return line, notes, err
}

// capStopped says how many jobs of the batch the spend cap stopped, the
// cap and what the batch spent, and how to run them: raise the cap, then
// requeue them.
func capStopped(batch string, p store.Progress, sp *store.Spend) string {
	var spent, raise, above []string
	if sp != nil && sp.MaxCostUSD != nil {
		spent = append(spent, fmt.Sprintf("$%.6f spent of its $%g cost cap", sp.CostUSD, *sp.MaxCostUSD))
		raise, above = append(raise, "--max-cost-usd N"), append(above, fmt.Sprintf("$%g", *sp.MaxCostUSD))
	}
	if sp != nil && sp.MaxTotalTokens != nil {
		spent = append(spent, fmt.Sprintf("%s spent of its %d token cap", Plural(sp.Tokens, "token"), *sp.MaxTotalTokens))
		raise, above = append(raise, "--max-total-tokens T"), append(above, Plural(*sp.MaxTotalTokens, "token"))
	}
	why := "the batch's spend cap stopped them"
	switch {
	case sp == nil:
	case len(spent) == 0:
		why += fmt.Sprintf(" (the batch has no cap now; $%.6f and %s spent)", sp.CostUSD, Plural(sp.Tokens, "token"))
	default:
		why += " (" + strings.Join(spent, ", ") + ")"
	}
	how := "enqueue cap --batch " + batch + " --max-cost-usd N, a cap above what it spent"
	if len(raise) > 0 {
		how = fmt.Sprintf("enqueue cap --batch %s %s, a cap above %s", batch, strings.Join(raise, " "), strings.Join(above, " and "))
	}
	return fmt.Sprintf("%s of batch %s ended over_budget: %s. To run them: %s, then enqueue requeue --batch %s --status over_budget "+
		"(when the workers had no price for the model, give them one with worker --prices instead; report failures %s says why each job ended)",
		Plural(p.OverBudget, "job"), batch, why, how, batch, batch)
}

// SpendLedger is what OverBudgetSpend reads. *store.Store satisfies it.
type SpendLedger interface {
	BatchSpend(ctx context.Context, batch string) (store.Spend, error)
}

var _ SpendLedger = (*store.Store)(nil)

// OverBudgetSpend is the batch's spend and cap when some of its jobs
// ended over_budget (what BatchVerdict says of them), nil otherwise or
// when it cannot be read: the verdict then names the jobs without the
// figures.
func OverBudgetSpend(ctx context.Context, l SpendLedger, batch string, p store.Progress) *store.Spend {
	if p.OverBudget == 0 {
		return nil
	}
	sp, err := l.BatchSpend(ctx, batch)
	if err != nil {
		return nil
	}
	return &sp
}

// percent writes a share as a percentage with as many digits as it has, up
// to four decimals: a limit of 0.0005 is 0.05%, not 0.1% (a failure read
// "0.1% not valid, limit 0.1%").
func percent(share float64) string {
	return strconv.FormatFloat(math.Round(share*1e6)/1e4, 'f', -1, 64)
}

// NotFullyEnqueued is the failure of a batch an enqueue has not finished
// recording: still at it (rec.Live), or killed, its dataset only partly
// recorded.
func NotFullyEnqueued(batch string, rec *store.Recording) error {
	if rec.Live {
		return fmt.Errorf("%w: batch %s is not fully enqueued: an enqueue is recording its rows now (since %s)",
			ErrBatchFailed, batch, rec.Since.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: batch %s is not fully enqueued: the enqueue that began recording its rows at %s stopped before it had recorded them all (failed, interrupted or killed); run that enqueue command again with its dataset (sha256 %s; rows already recorded are skipped), or enqueue cancel --batch %s to end the batch as it is",
		ErrBatchFailed, batch, rec.Since.UTC().Format(time.RFC3339), rec.Dataset, batch)
}
