package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/enqueue"
)

// progress draws a bar per phase of an enqueue run (the check of every
// row, then the recording and publishing): redrawn on a terminal, lines
// otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	bars  map[string]*cli.ProgressBar
	last  enqueue.Progress
}

func newProgress(w io.Writer, total int) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, tty: tty, total: total, bars: map[string]*cli.ProgressBar{}}
}

func (p *progress) bar(phase string) *cli.ProgressBar {
	if p.bars[phase] == nil {
		label := "enqueue"
		if phase == enqueue.PhaseCheck {
			label = "check  "
		}
		p.bars[phase] = cli.NewProgressBar(p.w, p.tty, label, p.total)
	}
	return p.bars[phase]
}

func note(p enqueue.Progress) string {
	if p.Phase == enqueue.PhaseCheck {
		return fmt.Sprintf("%d bad, %d repeated", len(p.Bad), p.Repeated)
	}
	return fmt.Sprintf("%d published, %d already enqueued, %d republished", p.Published, p.Existing, p.Republished)
}

// update is enqueue.Config.ProgressFunc.
func (p *progress) update(now enqueue.Progress) {
	if p.last.Phase != "" && p.last.Phase != now.Phase {
		// The check read every row: their number, not the file's lines
		// (a quoted line break, a blank line), is the total.
		b := p.bar(p.last.Phase)
		b.SetTotal(p.last.Rows)
		b.Update(p.last.Rows, note(p.last), true)
		p.total = p.last.Rows
	}
	p.last = now
	p.bar(now.Phase).Update(now.Rows, note(now), false)
}

// finish draws the last phase's bar as done; a nil p draws nothing.
func (p *progress) finish(end enqueue.Progress) {
	if p == nil || end.Phase == "" {
		return
	}
	p.bar(end.Phase).Update(end.Rows, note(end), true)
}
