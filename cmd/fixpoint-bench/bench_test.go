package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func TestBenchQuickPrintsEveryFigure(t *testing.T) {
	t.Parallel()
	// A database of this test's own on TEST_DATABASE_URL's server, under
	// TEST_DATABASE_PREFIX, that the bench creates and the test drops: a
	// fixed name was reset under another run on a shared server.
	dsn, _ := storetest.MissingDB(t)
	// As long as the test may run: --quick takes about a minute, and over
	// three on a loaded machine (another make test, builds), where a
	// three-minute context ended the last figures in "open stream ...:
	// context deadline exceeded".
	deadline := time.Now().Add(15 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second) // time left to report
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var out, progress bytes.Buffer
	// No --worker-bin: figures 3 and 5 run ./cmd/worker as the bench builds it.
	args := []string{"--quick", "--latency", "250ms", "--rate-seconds", "2", "--database-url", dsn}
	if err := runBench(ctx, args, &out, &progress); err != nil {
		t.Fatalf("runBench: %v\nprogress:\n%s", err, progress.String())
	}
	text := out.String()
	if strings.Contains(text, "error:") {
		t.Errorf("a figure failed to run:\n%s\nprogress:\n%s", text, progress.String())
	}
	n := `[0-9][0-9,.]*`
	for _, want := range []struct{ name, re string }{
		{"machine", `(?m)^machine: [0-9]+ CPU \(.+\), ` + n + ` GiB RAM, go`},
		{"baseline", `(?m)^\| 1 \| baseline: .* \| ` + n + ` jobs/s \(` + n + ` in .*; best of ` + n + ` and ` + n + `; machine CPU ` + n + `% busy, [0-9]+ µs a job, [0-9]+ µs of it in this process(, [0-9]+ µs in Postgres's backends)?\) \| reference \| - \|$`},
		{"end to end", `(?m)^\| 2 \| end to end, .* \| ` + n + ` jobs/s = ` + n + `% of \(1\) \(best of ` + n + ` and ` + n + `; machine CPU ` + n + `% busy, [0-9]+ µs a job, [0-9]+ µs of it in this process(, [0-9]+ µs in Postgres's backends)?\) \| >= 85% of \(1\) \| (PASS|FAIL) \|$`},
		{"latency as shipped", `(?m)^\| 3 \| .*worker run --concurrency [0-9]+. subprocess, defaults otherwise\) \| ` + n + ` jobs/s = ` + n + `% of ideal ` + n + ` .* \| (PASS|FAIL) \|$`},
		{"latency no jobs ahead", `(?m)^\| 3 \| .*worker run --concurrency [0-9]+ --jobs-ahead 0.\) \| ` + n + ` jobs/s = ` + n + `% of ideal ` + n + ` .* \| (PASS|FAIL) \|$`},
		{"rss", `(?m)^\| 3 \| worker peak RSS .* \| ` + n + ` MiB \| < 256 MiB \| (PASS|FAIL) \|$`},
		{"rate, rpm only", `(?m)^\| 4 \| rate-limited preset .*, lane --rpm 600: .* \| ` + n + `/s = ` + n + `% of the .* budget ` + n + `/s \| >= 95% of budget \| (PASS|FAIL) \|$`},
		{"rate, rpm and tpm", `(?m)^\| 4 \| rate-limited preset .*, lane --rpm 600 --tpm 2000000: .* \| ` + n + `/s = ` + n + `% of the .* budget ` + n + `/s(; ` + n + `% of the RPM budget)? \| >= 95% of budget \| (PASS|FAIL) \|$`},
		{"429 share", `(?m)^\| 4 \| share of calls answered 429, lane --rpm 600 \| ` + n + `% \(` + n + ` of ` + n + `\) \| < 2% \| (PASS|FAIL) \|$`},
		{"failed jobs", `(?m)^\| 4 \| jobs failed .*, lane --rpm 600 --tpm 2000000 \| ` + n + ` of ` + n + ` \| 0 \| (PASS|FAIL) \|$`},
		{"budget share", `(?m)^\| 11 \| shared budget, 2 worker\(s\), --rpm 600: successful calls over .* \| ` + n + ` = ` + n + `% of the budget \| >= 90% of budget \| (PASS|FAIL) \|$`},
		{"budget 429s", `(?m)^\| 11 \| share of calls answered 429, 1 worker\(s\), --rpm 600 \| ` + n + `% \(` + n + ` of ` + n + `\) \| < 0.5% \| (PASS|FAIL) \|$`},
		{"budget minute", `(?m)^\| 11 \| busiest 60 s of successful calls \(sliding by 100ms, warm-up included\), 2 worker\(s\), --rpm 600 \| ` + n + ` = ` + n + `% of 600 \(all calls: ` + n + `\) \| <= 102% of budget \| (PASS|FAIL) \|$`},
		{"budget kill", `(?m)^\| 11 \| a worker killed \(SIGKILL\) halfway: from the kill until .* \| (` + n + `m?s|never within the window) \(the first lease after the kill at ` + n + `% of the rate before\) \| within one lease \(5s\) \| (PASS|FAIL) \|$`},
		{"budget ops", `(?m)^\| 11 \| KV operations a second, 2 workers: at 1200 RPM over at 600 RPM \(before the kill\) \| ` + n + ` vs ` + n + ` = ` + n + `x \| 1x \(within 25%\) \| (PASS|FAIL) \|$`},
		{"budget before", `(?m)^\| 11 \| before: 3 workers, --rpm 600 each, --budget local \(the issue's before\): .* \| ` + n + `% of the budget; ` + n + `% of calls answered 429 .* \| contrast \| - \|$`},
		{"memory", `(?m)^\| 5 \| memory flat: .* \| not run \(pass --memory\) \| within 10% \| skipped \|$`},
		{"conversation", `(?m)^\| conversation \| ` + n + ` \| ` + n + `% \| ` + n + `% \| ` + n + ` \| ` + n + ` \| .+ \|$`},
		{"repair", `(?m)^\| repair \| ` + n + ` \| ` + n + `% \| ` + n + `% \| ` + n + ` \| ` + n + ` \| .+ \|$`},
		// Under --evidence off valid values hold inventions (so the count
		// measures something); under require none does.
		{"evidence", `(?m)^\| 10 \| invented values accepted as grounded, --evidence require \(300 messy tickets\) \| 0 of ` + n + ` valid values \(--evidence off: [1-9][0-9]* of ` + n +
			`\); valid rate ` + n + `% vs ` + n + `%; calls a valid job ` + n + ` vs ` + n + ` \| 0 \| PASS \|$`},
		{"evidence off", `(?m)^\| --evidence off \| 300 \| ` + n + `% \| ` + n + ` \| [1-9][0-9]* \| [1-9][0-9]* \| 0 \| .+ \|$`},
		{"evidence require", `(?m)^\| --evidence require \| 300 \| ` + n + `% \| ` + n + ` \| 0 \| 0 \| [1-9][0-9]* \| .+ \|$`},
	} {
		if !regexp.MustCompile(want.re).MatchString(text) {
			t.Errorf("no %s row matching %s in:\n%s", want.name, want.re, text)
		}
	}
	if got := strings.Count(text, "| 3 | worker peak RSS"); got != 2 {
		t.Errorf("got %d RSS rows, want 2 (as shipped and with no jobs ahead)", got)
	}
}

func TestBenchFlagsRejectBadSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "zero jobs", args: []string{"--jobs", "0"}},
		{name: "negative concurrency", args: []string{"--concurrency", "-1"}},
		{name: "zero latency", args: []string{"--latency", "0s"}},
		{name: "zero rounds", args: []string{"--rounds", "0"}},
		{name: "unknown flag", args: []string{"--nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := runBench(context.Background(), tc.args, &out, &out)
			var uerr cliflags.UsageError
			if !errors.As(err, &uerr) {
				t.Fatalf("runBench(%v) = %v, want a usage error", tc.args, err)
			}
		})
	}
}

func TestBenchFormatting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{name: "num small", got: num(999.4), want: "999"},
		{name: "num thousands", got: num(15234.6), want: "15,235"},
		{name: "num millions", got: num(1234567), want: "1,234,567"},
		{name: "pct", got: pct(0.9561), want: "95.6%"},
		{name: "mib", got: mib(137 << 20), want: "137 MiB"},
		{name: "db name", got: dbName("postgres://u:secret@h:5432/fixpoint_bench?sslmode=disable"), want: "fixpoint_bench"},
		{name: "quick keeps explicit flags", got: quickJobs(map[string]bool{"jobs": true}), want: "7"},
		{name: "quick shrinks the rest", got: quickJobs(nil), want: "500"},
		{name: "one run", got: rateList(1200), want: "1,200"},
		{name: "two runs", got: rateList(1200, 1300), want: "1,200 and 1,300"},
		{name: "three runs", got: rateList(1200, 1300, 900), want: "1,200, 1,300 and 900"},
		{name: "best run", got: bestRate(1200, 1300, 900), want: "1,300"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func rateList(rates ...float64) string {
	var r rateRuns
	for _, v := range rates {
		r.add(timedRun{rate: v})
	}
	return r.runs()
}

func bestRate(rates ...float64) string {
	var r rateRuns
	for _, v := range rates {
		r.add(timedRun{rate: v})
	}
	return num(r.best.rate)
}

func quickJobs(set map[string]bool) string {
	c := benchConfig{jobs: 7}
	c.quickSizes(set)
	return num(float64(c.jobs))
}

func TestPollPacerWaitsInProportionToWhatIsLeft(t *testing.T) {
	t.Parallel()
	const least = 10 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var p pollPacer
	steps := []struct {
		after  time.Duration
		queued int64
		want   time.Duration
	}{
		{0, 20000, least},                      // first poll: no rate yet
		{least, 20000, least},                  // nothing drained yet
		{time.Second, 19000, waitFinalMaxPoll}, // 19s left at 1,000/s: capped
		{10 * time.Second, 10000, waitFinalMaxPoll},
		{19*time.Second + 800*time.Millisecond, 200, 100 * time.Millisecond}, // 0.2s left
		{19*time.Second + 990*time.Millisecond, 10, least},                   // 10ms left: the floor
		{20 * time.Second, 30000, least},                                     // a new, larger count restarts the rate
	}
	for i, s := range steps {
		if got := p.wait(t0.Add(s.after), s.queued, least); got != s.want {
			t.Errorf("step %d (%v, %d queued): wait %v, want %v", i, s.after, s.queued, got, s.want)
		}
	}
}

// statCPU reads utime and stime past a command holding spaces and
// parentheses.
func TestStatCPU(t *testing.T) {
	line := "4242 (postgres: 15/main: postgres db (x) idle) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 1 0 100 0 0\n"
	got, ok := statCPU([]byte(line))
	if !ok || got != 3*time.Second {
		t.Errorf("statCPU = %v, %v; want 3s (250 + 50 ticks), true", got, ok)
	}
	if _, ok := statCPU([]byte("4242 (short) S 1")); ok {
		t.Error("statCPU of a truncated line: ok, want not ok")
	}
}
