package enqueue

import (
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// CheckEvidenceSource reports whether source names a source a row job's
// values can be checked against: "row", "prompt" or "field:NAME".
func CheckEvidenceSource(source string) error {
	switch {
	case source == fixpoint.EvidenceSourceRow, source == fixpoint.EvidenceSourcePrompt:
		return nil
	case strings.HasPrefix(source, fixpoint.EvidenceSourceFieldPrefix) && len(source) > len(fixpoint.EvidenceSourceFieldPrefix):
		return nil
	}
	return fmt.Errorf("%w: evidence source %q: want row, prompt or field:NAME", ErrBadConfig, source)
}
