package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
	t.Run("no rate before a second, and none for work done before the bar", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		p := NewProgressBar(&buf, false, "wait", 100)
		p.Update(42, "", false) // a batch 42 jobs done when the wait starts
		if line := buf.String(); !strings.Contains(line, "42/100") || !strings.Contains(line, "-/s") {
			t.Errorf("first line %q: want no rate yet (it read 6046/s)", line)
		}
		p.baseAt = p.baseAt.Add(-2 * time.Second) // two seconds on
		p.Update(52, "", true)
		if line := buf.String(); !strings.Contains(line, " 5/s") {
			t.Errorf("lines %q: want 10 jobs in 2 s, 5/s", line)
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

// A total known for sure replaces the estimate, and the final line shows
// it (the rows read ended at "3/5 60.0%" where the file had 5 lines).
func TestProgressBarSetTotal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	b := NewProgressBar(&out, false, "check", 5)
	b.Update(3, "0 bad", false)
	b.SetTotal(3)
	b.Update(3, "0 bad", true)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "3/3 100.0%") {
		t.Errorf("final line %q; want 3/3 100.0%%", last)
	}
}
