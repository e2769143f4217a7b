package repair

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// slowPattern backtracks exponentially on slowString: the lookahead puts
// it on the backtracking engine, (a+)+ tries every split of the a's.
const (
	slowPattern = `^(?=a)(a+)+$`
	slowString  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"
)

// Check with schema-guided repair validates a reply many times: all of
// them share one budget.
func TestPatternBudgetCheckWith(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, strings.ReplaceAll(`{"type":"object","properties":{"n":{"type":"integer"},"items":{"type":"array","items":{"type":"string","pattern":SLOW}}}}`, "SLOW", strconv.Quote(slowPattern)))
	var sb strings.Builder
	sb.WriteString("```json\n{\"n\":\"7\",\"items\":[")
	for i := range 50 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%q", slowString+strconv.Itoa(i))
	}
	sb.WriteString("]}\n```")
	start := time.Now()
	res := checkWith(s, sb.String(), fixpoint.CoerceSafe)
	took := time.Since(start)
	if res.Valid {
		t.Fatal("valid; want the unchecked strings reported")
	}
	t.Logf("took %v; the budget is 1s for the whole check", took)
	// The passes of the check shared one budget: once it was spent, the
	// strings left were reported at once, not each after a timeout.
	spent := 0
	for _, e := range res.Errors {
		if strings.Contains(e.Message, "in all") {
			spent++
		}
	}
	if spent == 0 {
		t.Errorf("no string reported unchecked for the spent budget: %v", res.Errors)
	}
}
