package pipeline

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetricsIgnoreNegativeCounts: a negative token count (a ledger row,
// a provider's usage) is not added to a counter, which would panic and
// take the worker down; the positive ones are.
func TestMetricsIgnoreNegativeCounts(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	m.attempt(&store.Attempt{Class: "syntax", TokensIn: -1000000, TokensOut: -99999999, TokensCached: 5})
	m.observeWave([]store.WaveOutcome{{Inserted: true, Attempt: store.Attempt{Valid: true, TokensIn: 7, TokensOut: -3}}})
	for kind, want := range map[string]float64{"input": 7, "output": 0, "cached": 5} {
		if got := counterValue(t, m.Tokens.WithLabelValues(kind)); got != want {
			t.Errorf("%s tokens counted %v, want %v", kind, got, want)
		}
	}
	if got := counterValue(t, m.Attempts.WithLabelValues("syntax")) + counterValue(t, m.Attempts.WithLabelValues("valid")); got != 2 {
		t.Errorf("%v attempts counted, want 2", got)
	}
}
