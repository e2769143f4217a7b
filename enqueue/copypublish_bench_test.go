package enqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// BenchmarkCopyPublish is the ceiling of enqueue's second pass: the same
// FIXPOINT_BENCH_JOBS jobs as BenchmarkEnqueue's (about the same prompt
// and input row), made before the clock starts, recorded a chunk at a
// time (store.InsertJobsPublishing) and published (queue.PublishAll),
// with no reading, rendering or checking of rows. copy records only,
// publish publishes only, and both does the two as enqueue does: the
// chunk published while the next is recorded, each chunk settled.
func BenchmarkCopyPublish(b *testing.B) {
	n, chunk := 10_000, enqueue.ChunkDefault
	if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("FIXPOINT_BENCH_CHUNK")); err == nil && v > 0 {
		chunk = v
	}
	for _, mode := range []string{"copy", "copy2", "publish", "both"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				elapsed := copyPublish(b, mode, n, chunk)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "rows/s")
				b.StartTimer()
			}
		})
	}
}

// copyPublish records and/or publishes n jobs in chunks on a fresh
// ledger and stream and returns how long that took.
func copyPublish(b *testing.B, mode string, n, chunk int) time.Duration {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	js := jetStream(b)
	q := queue.Config{Stream: "BARE", Subject: "bare.jobs", Consumer: "bare"}
	if _, _, err := queue.EnsureStream(ctx, js, q); err != nil {
		b.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "bare", Settings: json.RawMessage(`{}`), SchemaHash: hash}); err != nil {
		b.Fatal(err)
	}
	token, err := st.StartRecording(ctx, "bare", "sha")
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]store.NewJob, n)
	envs := make([]queue.Envelope, n)
	limits := fixpoint.Limits{MaxAttempts: 3}.WithDefaults()
	for i := range jobs {
		prompt := fmt.Sprintf("Triage this support ticket from Ada Park (pro plan) about order ORD-%05d.\n\nSubject: Charged twice this month\n\n"+
			"I was billed twice for my subscription on the 3rd, $%d.%02d each time. Please refund the duplicate charge of order ORD-%05d.", i%100000, 10+i%90, i%100, i%100000)
		meta := fmt.Sprintf(`{"ticket_id":"T%07d","customer":"Ada Park","plan":"pro","order_id":"ORD-%05d","subject":"Charged twice this month",`+
			`"body":"I was billed twice for my subscription on the 3rd, $%d.%02d each time. Please refund the duplicate charge of order ORD-%05d."}`,
			i+1, i%100000, 10+i%90, i%100, i%100000)
		jobs[i] = store.NewJob{ID: fmt.Sprintf("bare:T%07d", i+1), Batch: "bare", RowNo: i + 1, SchemaHash: hash, Prompt: prompt,
			Provider: "openai", Model: "sim-typical", Metadata: json.RawMessage(meta)}
		envs[i] = queue.Envelope{V: queue.EnvelopeVersion, JobID: jobs[i].ID, Batch: "bare", RowNo: i + 1, Prompt: prompt,
			SchemaHash: hash, Provider: "openai", Model: "sim-typical", Mode: fixpoint.ModeJSONSchema, Limits: limits}
	}
	publish := func(envs []queue.Envelope) {
		res, err := queue.PublishAll(ctx, js, q, envs)
		if err != nil {
			b.Error(err)
			return
		}
		for _, r := range res {
			if r.Err != nil {
				b.Error(r.Err)
				return
			}
		}
	}
	start := time.Now()
	if mode == "copy2" {
		// Two chunks copied at once, on two connections.
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for lo := w * chunk; lo < n; lo += 2 * chunk {
					if _, _, err := st.InsertJobsPublishing(ctx, token, jobs[lo:min(lo+chunk, n)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var done chan struct{}
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		var pc store.PublishingChunk
		if mode != "publish" {
			if _, pc, err = st.InsertJobsPublishing(ctx, token, jobs[lo:hi]); err != nil {
				b.Fatal(err)
			}
		}
		if mode == "copy" {
			continue
		}
		if done != nil {
			<-done
		}
		done = make(chan struct{})
		go func(envs []queue.Envelope, pc store.PublishingChunk, done chan struct{}) {
			defer close(done)
			publish(envs)
			if err := st.SettlePublishing(ctx, pc, nil); err != nil {
				b.Error(err)
			}
		}(envs[lo:hi], pc, done)
	}
	if done != nil {
		<-done
	}
	return time.Since(start)
}
