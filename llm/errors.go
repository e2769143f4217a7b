package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// briefDecodeError shortens a JSON type error of a provider body: its text
// names the Go struct type, which for a nested field was 2 KB of type
// literal stored as the attempt's provider_error.
func briefDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s is a JSON %s, not the %s the API sends", te.Field, te.Value, te.Type.Kind())
	}
	return err
}

// tokenCount is a token count as a reply states it. Any JSON value
// decodes, so a count that is no integer (1e300, 12.5, "12") leaves the
// reply readable: the reply was made and billed, and its text stands; the
// count is an anomaly, the call charged by estimate (see plausibleUsage).
// A JSON integer is kept as it is (Usage.Anomaly judges its size); any
// other value is kept as text in bad.
type tokenCount struct {
	n   int
	bad string
}

func (c *tokenCount) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		*c = tokenCount{}
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= math.MinInt && n <= math.MaxInt {
		*c = tokenCount{n: int(n)}
		return nil
	}
	*c = tokenCount{bad: cutUTF8(b, 40)}
	return nil
}

// unreadCounts names the counts of a reply's usage that are no integer,
// "" when all are.
func unreadCounts(counts ...namedCount) string {
	var bad []string
	for _, c := range counts {
		if c.count.bad != "" {
			bad = append(bad, c.name+" "+c.count.bad)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "usage counts that are no integer: " + strings.Join(bad, ", ")
}

type namedCount struct {
	name  string
	count tokenCount
}
