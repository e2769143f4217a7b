package enqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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

// EvidenceSource is the text a job's values are checked against (package
// evidence), from its input row (as JSON, the ledger's jobs.metadata) and
// its rendered prompt:
//   - "row": the row's values the template rendered into the prompt, each
//     leaf string or number as the template prints it, those the prompt
//     holds, one a line in the order of their keys. Text the template adds
//     (instructions, few-shot examples) is not in it, so a value found only
//     there, copied from an example, is not grounded.
//   - "prompt": the whole prompt.
//   - "field:NAME": the row's field NAME, as the template prints it; an
//     error when the row has no such field.
//
// It is a function of what the ledger keeps of a job, so a later check of
// the job's values (a revalidation, the dashboard) finds the same text.
func EvidenceSource(row json.RawMessage, prompt, source string) (string, error) {
	if source == fixpoint.EvidenceSourcePrompt {
		return prompt, nil
	}
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(row))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return "", fmt.Errorf("read the input row: %w", err)
	}
	if name, ok := strings.CutPrefix(source, fixpoint.EvidenceSourceFieldPrefix); ok {
		v, ok := fields[name]
		if !ok {
			return "", fmt.Errorf("the input row has no field %q (evidence source %s)", name, source)
		}
		return leafText(viewOf(v)), nil
	}
	var lines []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string, json.Number:
			if t := leafText(x); t != "" && strings.Contains(prompt, t) {
				lines = append(lines, t)
			}
		}
	}
	walk(fields)
	return strings.Join(lines, "\n"), nil
}

// leafText is v as a template prints it.
func leafText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}
