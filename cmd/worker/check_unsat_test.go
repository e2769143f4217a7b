package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// worker check warns of a property no value satisfies that the schema
// declares as optional, naming where, and still checks the reply.
func TestCheckWarnsOfAnUnsatisfiableProperty(t *testing.T) {
	t.Parallel()
	schema := filepath.Join(t.TempDir(), "loop.json")
	body := `{"type":"object","properties":{"x":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/properties/x"}}}}}`
	if err := os.WriteFile(schema, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", "--schema", schema}, strings.NewReader(`{}`), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), `"valid":true`) {
		t.Fatalf("exit %d, stdout %q; want 0 and valid", code, out.String())
	}
	if !strings.Contains(errOut.String(), "worker check: warning: the schema at /properties/x: no value satisfies") {
		t.Errorf("stderr %q; want a warning naming /properties/x", errOut.String())
	}
}
