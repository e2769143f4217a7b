package enqueue_test

import (
	"errors"
	"testing"

	"github.com/fixpoint-dev/fixpoint/enqueue"
)

func TestCheckEvidenceSource(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"row", "prompt", "field:text"} {
		if err := enqueue.CheckEvidenceSource(s); err != nil {
			t.Errorf("evidence source %q: %v", s, err)
		}
	}
	for _, s := range []string{"", "rows", "field:", "file"} {
		if err := enqueue.CheckEvidenceSource(s); !errors.Is(err, enqueue.ErrBadConfig) {
			t.Errorf("evidence source %q: %v; want ErrBadConfig", s, err)
		}
	}
}
