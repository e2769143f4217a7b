package enqueue_test

import (
	"errors"
	"testing"

	"github.com/fixpoint-dev/fixpoint/enqueue"
)

func TestCheckEvidenceSource(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"row", "prompt", "field:text"} {
		if err := enqueue.CheckEvidenceSource(s, false); err != nil {
			t.Errorf("evidence source %q: %v", s, err)
		}
	}
	if err := enqueue.CheckEvidenceSource("document", true); err != nil {
		t.Errorf("evidence source document, jobs with documents: %v", err)
	}
	for _, s := range []string{"", "rows", "field:", "file", "document"} {
		if err := enqueue.CheckEvidenceSource(s, false); !errors.Is(err, enqueue.ErrBadConfig) {
			t.Errorf("evidence source %q: %v; want ErrBadConfig", s, err)
		}
	}
}
