package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadTextFileDropsTheBOM(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(name, []byte("\ufeff{\"type\":\"object\"}\ufeff"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := ReadTextFile(name)
	if err != nil || string(b) != "{\"type\":\"object\"}\ufeff" {
		t.Errorf("ReadTextFile = %q, %v; want the text without its leading BOM only", b, err)
	}
	if _, err := ReadTextFile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("ReadTextFile of a missing file: no error")
	}
}
