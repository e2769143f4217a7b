package enqueue_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// BenchmarkRevalidate checks a generated batch of FIXPOINT_BENCH_JOBS jobs
// (10,000 unless set) against a schema with a rule, with the evidence
// stage on, and records the outcome as a new run: no provider is
// configured at all. It reports the jobs checked a second and the highest
// heap seen, which stays flat as the batch grows (the jobs are read and
// written a chunk at a time).
func BenchmarkRevalidate(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	schema := []byte(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"}},
		"x-fixpoint-rules":[{"rule":"self.name != ''","message":"a name"}]}`)
	for b.Loop() {
		b.StopTimer()
		dsn := storetest.NewDB(b)
		if _, err := storetest.Generate(ctx, dsn, storetest.GenSpec{Batch: "big", Jobs: n, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		// A revalidation takes a batch that is done.
		if _, err := conn.Exec(ctx, `UPDATE jobs SET status = 'cancelled' WHERE status = 'queued'`); err != nil {
			b.Fatal(err)
		}
		conn.Close(ctx)
		st, err := store.Open(ctx, dsn, nil)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		b.StartTimer()
		start := time.Now()
		rep, err := enqueue.Revalidate(ctx, st, enqueue.RevalidateConfig{Batch: "big", Schema: schema})
		elapsed := time.Since(start)
		b.StopTimer()
		close(stop)
		st.Close()
		if err != nil {
			b.Fatal(err)
		}
		if rep.Checked == 0 || rep.Run < 2 {
			b.Fatalf("revalidation %+v: nothing checked or recorded", rep)
		}
		b.ReportMetric(float64(rep.Checked), "jobs")
		b.ReportMetric(float64(rep.Checked)/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
		b.StartTimer()
	}
}
