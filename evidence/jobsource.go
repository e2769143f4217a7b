package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// JobSource is the text a row job's values are checked against, from its
// input row (as JSON, the ledger's jobs.metadata), its rendered prompt and
// the batch's evidence source setting:
//   - "row" (fixpoint.EvidenceSourceRow): the row's values the template
//     rendered into the prompt, each leaf string or number as the template
//     prints it, those the prompt holds, one a line in the order of their
//     keys. Text the template adds (instructions, few-shot examples) is not
//     in it, so a value found only there, copied from an example, is not
//     grounded.
//   - "prompt": the whole prompt.
//   - "field:NAME": the row's field NAME, as the template prints it; an
//     error when the row has no such field.
//
// It is a function of what the ledger keeps of a job, so that whatever
// reads a job back (the worker's message, a revalidation, the dashboard's
// highlights) finds the text the spans index.
func JobSource(row json.RawMessage, prompt, setting string) (string, error) {
	if setting == fixpoint.EvidenceSourcePrompt {
		return prompt, nil
	}
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(row))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return "", fmt.Errorf("read the input row: %w", err)
	}
	return RowSource(fields, prompt, setting)
}

// RowSource is JobSource of a row decoded already, as JobSource decodes
// it (json.Decoder.UseNumber): enqueue, which has each row so, gives the
// same text without encoding and decoding it again.
func RowSource(fields map[string]any, prompt, setting string) (string, error) {
	if setting == fixpoint.EvidenceSourcePrompt {
		return prompt, nil
	}
	if name, ok := strings.CutPrefix(setting, fixpoint.EvidenceSourceFieldPrefix); ok {
		v, ok := fields[name]
		if !ok {
			return "", fmt.Errorf("the input row has no field %q (evidence source %s)", name, setting)
		}
		return templateText(v), nil
	}
	var lines []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string, json.Number:
			if t := templateText(x); t != "" && strings.Contains(prompt, t) {
				lines = append(lines, t)
			}
		}
	}
	walk(fields)
	return strings.Join(lines, "\n"), nil
}

// templateText is a value of a row (decoded with UseNumber) as enqueue's
// prompt template prints it: a string as its text, a number as written,
// true, false and null as such, an object or an array as compact JSON
// (keys sorted, numbers as written, <, > and & as themselves).
// enqueue's TestJobSourcePrintsAsTheTemplate holds the two to one output.
func templateText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(x)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.TrimSuffix(b.String(), "\n")
}
