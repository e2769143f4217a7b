package wave

import (
	"context"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// Ledger is what the wave driver needs from the ledger. *store.Store
// satisfies it; a worker whose ledger does not runs batch-delivery jobs
// realtime.
type Ledger interface {
	RecordWave(ctx context.Context, p store.WaveParams) (*store.Wave, []store.WaveRequest, error)
	WaveRequests(ctx context.Context, waveID int64) ([]store.WaveRequest, error)
	ClaimWave(ctx context.Context, owner string, lease time.Duration, homes []string) (*store.Wave, error)
	StrayWaves(ctx context.Context, homes []string) (map[[2]string]int, error)
	UpdateWave(ctx context.Context, id int64, owner string, u store.WaveUpdate) error
	RecordWaveOutcomes(ctx context.Context, outs []store.WaveOutcome) (int, error)
	ReleaseWaveJobs(ctx context.Context, waveID int64, ids []string) error
	PlacedJobs(ctx context.Context, waveID int64) ([]store.WaveRequest, error)
	WaveAttempts(ctx context.Context, waveID int64) (map[string][]store.Attempt, error)
	JobAttempts(ctx context.Context, jobID string, run int) ([]store.Attempt, error)
	ProviderBatchRecorded(ctx context.Context, provider, id string) (bool, error)
	OpenWaves(ctx context.Context, providers, homes []string) (int, error)
}

var _ Ledger = (*store.Store)(nil)
