package enqueue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// BenchmarkEnqueueDocuments enqueues FIXPOINT_BENCH_JOBS rows (default
// 2,000) whose --document-field holds one of 20 documents of 64 KiB each:
// the rows carry 125 MiB of text, the ledger stores 1.25 MiB of it once.
// It reports rows a second and the document bytes the ledger holds after.
func BenchmarkEnqueueDocuments(b *testing.B) {
	n := 2_000
	if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	docs := make([]string, 20)
	for i := range docs {
		docs[i] = fmt.Sprintf("Contract %d.\n", i) + strings.Repeat(fmt.Sprintf("Clause %d applies to both parties. ", i), 64<<10/36)
	}
	var data strings.Builder
	for i := range n {
		fmt.Fprintf(&data, `{"id":"c%06d","body":%q}`+"\n", i, docs[i%len(docs)])
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		st, err := store.Open(ctx, storetest.NewDB(b), nil)
		if err != nil {
			b.Fatal(err)
		}
		js := jetStream(b)
		cfg := enqueue.Config{
			Batch: "bench", Schema: []byte(docSchema), Template: "name the party of contract {{.id}}.", Format: enqueue.FormatJSONL,
			IDField: "id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3}, DocumentField: "body",
			Queue: queue.Config{Stream: "BENCHDOC", Subject: "benchdoc.jobs", Consumer: "benchdoc"},
		}
		b.StartTimer()
		start := time.Now()
		prog, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(data.String()))
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if prog.Recorded != n || prog.Published != n {
			b.Fatalf("recorded %d, published %d of %d rows", prog.Recorded, prog.Published, n)
		}
		stored, err := st.PutDocuments(ctx, []store.Document{store.NewDocument(docs[0])})
		if err != nil || stored != 0 {
			b.Fatalf("a document enqueued was stored again: %d, %v", stored, err)
		}
		st.Close()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "rows/s")
		b.ReportMetric(float64(data.Len())/elapsed.Seconds()/(1<<20), "MiB-read/s")
		b.StartTimer()
	}
}
