package cli

import (
	"os"
	"path/filepath"
	"strings"
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

// A Latin-1 template or system prompt is refused, naming the byte and
// where it is: read as it was, each such byte was U+FFFD in every prompt.
func TestReadTextFileRefusesNonUTF8(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(name, []byte("Hello\nCaf\xe9 {{.text}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := ReadTextFile(name)
	if err == nil || !strings.Contains(err.Error(), "is not UTF-8 text (byte 0xE9 at line 2, column 4)") {
		t.Errorf("ReadTextFile = %q, %v; want it refused at line 2, column 4", b, err)
	}
	if err := os.WriteFile(name, []byte("é€\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTextFile(name); err == nil || !strings.Contains(err.Error(), "line 1, column 3") {
		t.Errorf("ReadTextFile: %v; want column 3, counted in characters", err)
	}
	// UTF-16 gets its own advice (latin1's made text of NULs).
	if err := os.WriteFile(name, []byte("\xff\xfeH\x00i\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTextFile(name); err == nil || !strings.Contains(err.Error(), "is UTF-16 text") || !strings.Contains(err.Error(), "iconv -f utf-16") {
		t.Errorf("ReadTextFile of UTF-16: %v", err)
	}
	if err := os.WriteFile(name, []byte("\ufeffCafé ✓ {{.text}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadTextFile(name); err != nil || string(b) != "Café ✓ {{.text}}" {
		t.Errorf("ReadTextFile of UTF-8 = %q, %v", b, err)
	}
}
