package pipeline

import (
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the worker's Prometheus metrics. Labels never carry prompts,
// replies, job ids or keys.
type Metrics struct {
	Registry       *prometheus.Registry
	Jobs           *prometheus.CounterVec // by final status
	Attempts       *prometheus.CounterVec // by class ("valid" for a valid attempt)
	Tokens         *prometheus.CounterVec // by kind: input, output, cached
	ProviderCalls  *prometheus.CounterVec // by provider and result class ("ok" or a fixpoint.ErrorClass)
	Dispositions   *prometheus.CounterVec // ack, nak, term, skip
	JobSeconds     prometheus.Histogram
	InFlight       prometheus.Gauge
	LaneLimit      *prometheus.GaugeVec // adaptive concurrency limit by lane
	LanePauses     *prometheus.CounterVec
	QuotaExhausted *prometheus.GaugeVec // 1 while a lane's quota is exhausted
	// LaneStopped is 1 for a lane (provider, model) this worker stopped:
	// the provider has no such model.
	LaneStopped  *prometheus.GaugeVec
	WriteBatches prometheus.Histogram
	WritePending prometheus.Gauge
	// ForeignJobs counts deliveries of jobs this worker's ledger never
	// recorded (a worker on the wrong DATABASE_URL): handed back, not run.
	ForeignJobs prometheus.Counter
	// Waves counts batch-delivery waves by provider and event (recorded,
	// submitted, done).
	Waves *prometheus.CounterVec
	// BudgetOps counts the operations on the shared lane-budget bucket
	// (cluster budgets), by operation and outcome (ok, error).
	BudgetOps *prometheus.CounterVec
}

// NewMetrics registers the worker's metrics on a new registry, together with
// the Go and process collectors.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_jobs_total", Help: "Jobs finished, by final status.",
		}, []string{"status"}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_attempts_total", Help: "Repair-loop attempts, by class (valid, syntax, shape, semantic, truncated, refusal, provider).",
		}, []string{"class"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_tokens_total", Help: "Tokens used, by kind (input, output, cached).",
		}, []string{"kind"}),
		ProviderCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_provider_calls_total", Help: "HTTP calls to providers including transport retries, by provider and outcome (ok or a failure class).",
		}, []string{"provider", "outcome"}),
		Dispositions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_messages_total", Help: "Queue messages by disposition (ack, skip, nak, term).",
		}, []string{"disposition"}),
		JobSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fixpoint_job_duration_seconds", Help: "Wall time of a job's repair loop.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fixpoint_jobs_in_flight", Help: "Jobs being worked on by this process.",
		}),
		LaneStopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fixpoint_lane_stopped", Help: "1 for a lane (provider, model) stopped because the provider has no such model: its jobs stay queued.",
		}, []string{"provider", "model"}),
		LaneLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fixpoint_lane_concurrency_limit", Help: "Adaptive concurrency limit of a provider lane.",
		}, []string{"provider", "model"}),
		LanePauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_lane_pauses_total", Help: "Times a provider lane was paused by a Retry-After.",
		}, []string{"provider", "model"}),
		QuotaExhausted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fixpoint_quota_exhausted", Help: "1 while a provider reports its quota exhausted and pulling is paused.",
		}, []string{"provider"}),
		WriteBatches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fixpoint_ledger_write_batch_size", Help: "Jobs per ledger write transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		WritePending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fixpoint_ledger_write_pending_bytes", Help: "Estimated bytes of results waiting for their ledger commit (bounded by the write buffer).",
		}),
		ForeignJobs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fixpoint_foreign_jobs_total", Help: "Deliveries of jobs this worker's ledger never recorded (is DATABASE_URL the one enqueue used?), handed back unrun.",
		}),
		Waves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_waves_total", Help: "Batch-delivery waves (provider batches), by provider and event (recorded, submitted, done).",
		}, []string{"provider", "event"}),
		BudgetOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fixpoint_budget_kv_ops_total", Help: "Operations on the NATS KV bucket holding the lanes' shared budgets (get, update, create), by outcome (ok, error).",
		}, []string{"op", "outcome"}),
	}
	r.MustRegister(m.Jobs, m.Attempts, m.Tokens, m.ProviderCalls, m.Dispositions, m.JobSeconds,
		m.InFlight, m.LaneLimit, m.LaneStopped, m.LanePauses, m.QuotaExhausted, m.WriteBatches, m.WritePending, m.ForeignJobs, m.Waves, m.BudgetOps,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// pendingBytes adds delta to the write backlog gauge.
func (m *Metrics) pendingBytes(delta int64) {
	if m != nil {
		m.WritePending.Add(float64(delta))
	}
}

// observe counts a result written: its attempts and tokens (calls made and
// paid) but those the ledger had before (r.Recorded: a batch-delivery job's
// wave attempts, counted by observeWave), and, when it won (it is its job's
// result), the job finished. A result that lost to the ledger's row (the
// job cancelled, requeued or finished by another delivery) is no job
// finished: counted, a cancelled batch showed jobs valid that the ledger
// says are cancelled.
func (m *Metrics) observe(r *store.Result, won bool) {
	if m == nil || r == nil {
		return
	}
	if won {
		m.Jobs.WithLabelValues(string(r.Status)).Inc()
	}
	for i := min(max(r.Recorded, 0), len(r.AttemptRows)); i < len(r.AttemptRows); i++ {
		m.attempt(&r.AttemptRows[i])
	}
	if won && !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() {
		m.JobSeconds.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	}
}

// observeWave counts the outcomes of a wave's requests the ledger took
// (store.WaveOutcome's Inserted and Finished): each attempt and its
// tokens, and each job it finished. fixpoint_job_duration_seconds is the
// repair loop's wall time in realtime only: a wave's job takes hours.
func (m *Metrics) observeWave(outs []store.WaveOutcome) {
	if m == nil {
		return
	}
	for i := range outs {
		o := &outs[i]
		if o.Inserted {
			m.attempt(&o.Attempt)
			// A document job's merge, recorded with its last chunk's reply.
			for j := range o.Also {
				m.attempt(&o.Also[j])
			}
		}
		if o.Finished && o.Result != nil {
			m.Jobs.WithLabelValues(string(o.Result.Status)).Inc()
		}
	}
}

// attempt counts one attempt written and its tokens.
func (m *Metrics) attempt(a *store.Attempt) {
	class := a.Class
	if a.Valid {
		class = "valid"
	}
	m.Attempts.WithLabelValues(class).Inc()
	addCount(m.Tokens.WithLabelValues("input"), a.TokensIn)
	addCount(m.Tokens.WithLabelValues("output"), a.TokensOut)
	addCount(m.Tokens.WithLabelValues("cached"), a.TokensCached)
}

// addCount adds n to c, nothing when n is below zero: a counter panics on
// a negative Add, and a count from outside (a provider's usage, a ledger
// row) must not take a worker down.
func addCount(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}
