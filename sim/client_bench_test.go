package sim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// BenchmarkClient measures the real llm client against the simulator at
// zero latency, over loopback HTTP, for each wire format: requests per second
// and allocations per request (client and server together).
func BenchmarkClient(b *testing.B) {
	schema := []byte(`{"type":"object","properties":{"category":{"enum":["billing","bug","account"]},"priority":{"type":"integer","minimum":1,"maximum":5},"summary":{"type":"string"}},"required":["category","priority","summary"]}`)
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic, llm.ProviderOllama} {
		b.Run(provider, func(b *testing.B) {
			_, url, closeSim, err := sim.Start(sim.Config{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer closeSim()
			if provider == llm.ProviderOpenAI {
				url += "/v1"
			}
			c, err := llm.New(llm.Config{Provider: provider, BaseURL: url, APIKey: "k",
				Lane: llm.LaneConfig{InitialConcurrency: 64, MaxConcurrency: 64}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					_, err := c.Complete(context.Background(), fixpoint.Request{Model: "sim", Mode: fixpoint.ModeJSONSchema, Schema: schema,
						Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: fmt.Sprintf("ticket %d", i)}}, MaxTokens: 256})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
