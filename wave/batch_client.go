package wave

import (
	"context"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// BatchClient is what the wave driver needs of a provider with a batch
// API. *llm.Client satisfies it.
type BatchClient interface {
	SupportsBatch() bool
	EncodeBatchItem(it llm.BatchItem) ([]byte, error)
	BatchLimits() (maxRequests int, maxBytes int64)
	UploadBatchFile(ctx context.Context, items []llm.BatchItem) (string, error)
	CreateBatch(ctx context.Context, fileID string, items []llm.BatchItem, metadata map[string]string) (llm.BatchStatus, error)
	RetrieveBatch(ctx context.Context, id string) (llm.BatchStatus, error)
	CancelBatch(ctx context.Context, id string) (llm.BatchStatus, error)
	ListBatchesSince(ctx context.Context, since time.Time, max int) ([]llm.BatchStatus, error)
	BatchResults(ctx context.Context, st llm.BatchStatus, request func(customID string) (fixpoint.Request, bool), fn func(llm.BatchResult) error) error
}

var _ BatchClient = (*llm.Client)(nil)
