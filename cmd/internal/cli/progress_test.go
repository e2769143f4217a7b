package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressBar(t *testing.T) {
	t.Parallel()
	t.Run("plain lines are throttled and the final state printed once", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		p := NewProgressBar(&buf, false, "jobs", 10)
		p.Update(1, "a", false)
		p.Update(2, "b", false) // within the 2s throttle: dropped
		p.Update(10, "done", true)
		p.Update(10, "done", true) // the same final state: not repeated
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
		}
		if !strings.Contains(lines[1], "10/10 100.0%") || !strings.Contains(lines[1], "done") {
			t.Errorf("final line = %q", lines[1])
		}
	})
	t.Run("terminal redraws in place", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		p := NewProgressBar(&buf, true, "jobs", 0)
		p.Update(5, "", true)
		if !strings.HasPrefix(buf.String(), "\r\033[K") || !strings.HasSuffix(buf.String(), "\n") || !strings.Contains(buf.String(), "jobs 5") {
			t.Errorf("terminal output = %q", buf.String())
		}
	})
}
