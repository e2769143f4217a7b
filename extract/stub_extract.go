package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// ErrNoJSON is matched (errors.Is) by the error Extract returns when a reply
// holds no JSON value.
var ErrNoJSON = errors.New("no JSON value found")

// Extract returns the candidate JSON values in reply, in order of position.
// TEMPORARY STUB: replaced by the real extractor.
func Extract(reply string) ([]Candidate, error) {
	s := strings.TrimSpace(reply)
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, ErrNoJSON
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, []byte(s))
	return []Candidate{{Value: v, JSON: buf.Bytes(), Source: SourceRaw, Start: 0, End: len(reply)}}, nil
}
