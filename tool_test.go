package fixpoint_test

import (
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// CheckArguments passes a JSON object only, and says what else it got,
// naming the call and quoting the start of the arguments.
func TestToolCallCheckArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want string // "" for no error
	}{
		{`{"name":"Ada"}`, ""},
		{` {} `, ""},
		{``, `arguments are empty: ""`},
		{`{"name": "Ada`, `arguments are not valid JSON (unexpected end of JSON input at byte 13): "{\"name\": \"Ada"`},
		{`{"a":1}{"b":2}`, `arguments are not valid JSON (invalid character '{' after top-level value at byte 8)`},
		{`[1,2]`, `arguments are JSON array, not an object`},
		{`"x"`, `arguments are JSON string, not an object`},
		{`null`, `arguments are JSON null, not an object`},
		{`{"s":"` + strings.Repeat("é", 60) + `"}`, ""},
		{`{"s":"` + strings.Repeat("é", 60), `é"...`}, // cut on a rune boundary
	} {
		err := fixpoint.ToolCall{ID: "call_1", Name: "set_output", Arguments: tc.args}.CheckArguments()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want nil", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tool call call_1 (set_output): ")):
			t.Errorf("%q: %v, want an error naming call_1 (set_output) with %q", tc.args, err, tc.want)
		}
	}
}
