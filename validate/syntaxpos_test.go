package validate

import (
	"errors"
	"strings"
	"testing"
)

// A schema that is not JSON is refused with the line and column of the
// fault, in characters, so the file can be fixed where it is wrong.
func TestCompileSaysWhereTheSyntaxErrorIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, schema, want string }{
		{"trailing comma", "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {\"type\": \"string\"},\n  }\n}\n", "line 5, column 3"},
		{"after non-ASCII", "{\"description\": \"café\", x}", "line 1, column 25"},
		{"cut short", "{\n  \"type\": \"object\",\n", "line 3, column 1"},
		{"text after", "{\"type\": \"object\"}\n\n  }", "line 3, column 3"},
	} {
		_, err := Compile([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a SchemaError at %s", tc.name, err, tc.want)
		}
	}
}
