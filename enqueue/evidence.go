package enqueue

import (
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// CheckEvidenceSource reports whether source names a source a job's
// values can be checked against: "row", "prompt" or "field:NAME", or
// "document" for jobs that have documents.
func CheckEvidenceSource(source string, documents bool) error {
	switch {
	case source == fixpoint.EvidenceSourceRow, source == fixpoint.EvidenceSourcePrompt:
		return nil
	case source == fixpoint.EvidenceSourceDocument:
		if !documents {
			return fmt.Errorf("%w: evidence source document: the jobs have no document (give --document-field or --document-file-field)", ErrBadConfig)
		}
		return nil
	case strings.HasPrefix(source, fixpoint.EvidenceSourceFieldPrefix) && len(source) > len(fixpoint.EvidenceSourceFieldPrefix):
		return nil
	}
	return fmt.Errorf("%w: evidence source %q: want row, prompt, field:NAME or document", ErrBadConfig, source)
}

// evidenceSource is the evidence source of the batch: the one asked for,
// or by default the jobs' document when they have one, else their row.
func (c *Config) evidenceSource() string {
	if c.EvidenceSource != "" {
		return c.EvidenceSource
	}
	if c.documentInput() {
		return fixpoint.EvidenceSourceDocument
	}
	return fixpoint.EvidenceSourceRow
}
