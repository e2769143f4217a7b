package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ProgressBar reports progress on long work: a redrawn bar on a terminal,
// plain lines at most every few seconds otherwise (logs, CI).
type ProgressBar struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	label string
	total int
	start time.Time
	last  time.Time
	every time.Duration
	shown string // the last line written
	// lastDone and lastNote are what the last line showed.
	lastDone int
	lastNote string
	// based says base is set: the units done at the first update, which
	// were done before the bar (a batch half done when report wait
	// starts), and do not count in the rate.
	based  bool
	base   int
	baseAt time.Time
}

// NewProgressBar returns a bar for total units (0 when unknown). tty says
// whether w is a terminal.
func NewProgressBar(w io.Writer, tty bool, label string, total int) *ProgressBar {
	every := 2 * time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	return &ProgressBar{w: w, tty: tty, label: label, total: total, start: time.Now(), every: every}
}

// SetTotal sets the total once it is known for sure (the rows read, where
// the bar began with the file's lines).
func (p *ProgressBar) SetTotal(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total != p.total {
		p.total, p.shown = total, "" // the line on screen shows the old total
	}
}

// Update shows done units and an extra note; it redraws at most every
// 100ms on a terminal and every 2s elsewhere, unless final.
func (p *ProgressBar) Update(done int, note string, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !final && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	if !p.based {
		p.based, p.base, p.baseAt = true, done, now
	}
	// The rate of the units done since the bar started, once it has run a
	// second: a first line read "6046/s" for 42 jobs done before it.
	rate := "-/s"
	if elapsed := now.Sub(p.baseAt); elapsed >= time.Second {
		rate = fmt.Sprintf("%.0f/s", float64(done-p.base)/elapsed.Seconds())
	}
	var line string
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		const width = 30
		filled := int(frac * width)
		bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
		line = fmt.Sprintf("%s %s %d/%d %5.1f%% %s", p.label, bar, done, p.total, 100*frac, rate)
	} else {
		line = fmt.Sprintf("%s %d %s", p.label, done, rate)
	}
	if note != "" {
		line += "  " + note
	}
	if final && p.shown != "" && p.lastDone == done && p.lastNote == note && !p.tty {
		return // the final state is already on screen
	}
	p.shown, p.lastDone, p.lastNote = line, done, note
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, line)
}
