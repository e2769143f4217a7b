package enqueue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// benchSchema and benchTemplate are a support ticket's, as the demo's.
const (
	benchSchema = `{"type":"object","properties":{"customer":{"type":"string"},"order_id":{"type":"string","pattern":"^ORD-[0-9]{5}$"},
		"amount":{"type":"number"},"category":{"enum":["billing","bug","other"],"x-fixpoint-evidence":false}},
		"required":["customer","order_id","category"],"additionalProperties":false}`
	benchTemplate = "Triage this support ticket from {{.customer}} ({{.plan}} plan) about order {{.order_id}}.\n\nSubject: {{.subject}}\n\n{{.body}}"
)

// ticketRows is n generated support tickets as JSONL, about 300 bytes a
// row, each with an id field.
func ticketRows(n int) string {
	var b strings.Builder
	b.Grow(n * 320)
	customers := []string{"Ada Park", "Bruno Silva", "Chen Wei", "Dana Cohen", "Eli Novak"}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"ticket_id":"T%07d","customer":%q,"plan":"pro","order_id":"ORD-%05d","subject":"Charged twice this month",`+
			`"body":"I was billed twice for my subscription on the 3rd, $%d.%02d each time. Please refund the duplicate charge of order ORD-%05d."}`+"\n",
			i, customers[i%len(customers)], i%100000, 10+i%90, i%100, i%100000)
	}
	return b.String()
}

// timedLedger is a ledger that adds up the time its writes of jobs take:
// the benchmark reports where a row's time goes.
type timedLedger struct {
	*store.Store
	insert, mark atomic.Int64 // nanoseconds recording jobs, marking them published
}

func (l *timedLedger) InsertJobs(ctx context.Context, jobs []store.NewJob) (int, error) {
	defer l.add(&l.insert, time.Now())
	return l.Store.InsertJobs(ctx, jobs)
}

func (l *timedLedger) InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error) {
	defer l.add(&l.insert, time.Now())
	return l.Store.InsertJobsPublishing(ctx, token, jobs)
}

func (l *timedLedger) SettlePublishing(ctx context.Context, pc store.PublishingChunk, unpublished []string) error {
	defer l.add(&l.mark, time.Now())
	return l.Store.SettlePublishing(ctx, pc, unpublished)
}

func (l *timedLedger) MarkPublished(ctx context.Context, ids []string) error {
	defer l.add(&l.mark, time.Now())
	return l.Store.MarkPublished(ctx, ids)
}

func (l *timedLedger) add(sum *atomic.Int64, start time.Time) { sum.Add(int64(time.Since(start))) }

// BenchmarkEnqueue records and publishes a generated dataset of
// FIXPOINT_BENCH_JOBS rows (10,000 unless set; FIXPOINT_BENCH_CHUNK rows
// a chunk, enqueue.ChunkDefault unless set) into a fresh ledger and an
// embedded JetStream server storing to disk, as enqueue does: both passes,
// the ledger's COPY and the queue's acknowledgements. It reports the rows
// recorded and published a second, and per row: the first pass (check),
// the second (publish), the time spent in the ledger's COPY (insert-µs)
// and in marking jobs published or settling a chunk recorded as published
// (mark-µs), which overlap the queue's publishing, and the process's CPU
// time (cpu-µs: user and system, the embedded server's included), which
// depends less than the rest on what else the machine runs.
func BenchmarkEnqueue(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	data := ticketRows(n)
	for b.Loop() {
		b.StopTimer()
		st, err := store.Open(ctx, storetest.NewDB(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		js := jetStream(b)
		cfg := enqueue.Config{
			Batch: "bench", Schema: []byte(benchSchema), Template: benchTemplate, Format: enqueue.FormatJSONL,
			IDField: "ticket_id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3},
			Queue: queue.Config{Stream: "BENCH", Subject: "bench.jobs", Consumer: "bench"},
		}
		if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_CHUNK")); err == nil && v > 0 {
			cfg.Chunk = v
		}
		led := &timedLedger{Store: st}
		var second time.Time
		cfg.ProgressFunc = func(p enqueue.Progress) {
			if p.Phase == enqueue.PhasePublish && second.IsZero() {
				second = time.Now()
			}
		}
		b.StartTimer()
		cpu0 := processCPU(b)
		start := time.Now()
		prog, err := enqueue.Run(ctx, js, led, cfg, strings.NewReader(data))
		elapsed := time.Since(start)
		cpu := processCPU(b) - cpu0
		b.StopTimer()
		st.Close()
		if err != nil {
			b.Fatal(err)
		}
		if prog.Recorded != n || prog.Published != n {
			b.Fatalf("recorded %d, published %d of %d rows", prog.Recorded, prog.Published, n)
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "rows/s")
		perRow := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
		b.ReportMetric(perRow(second.Sub(start)), "check-µs/row")
		b.ReportMetric(perRow(start.Add(elapsed).Sub(second)), "publish-µs/row")
		b.ReportMetric(perRow(time.Duration(led.insert.Load())), "insert-µs/row")
		b.ReportMetric(perRow(time.Duration(led.mark.Load())), "mark-µs/row")
		b.ReportMetric(perRow(cpu), "cpu-µs/row")
		b.StartTimer()
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
