package web

import (
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// Waves share one time axis, from the first made to the last end; an open
// wave runs to now and a wave not yet submitted starts when it was made.
func TestWaveBars(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ws := []store.WaveSpan{
		{Number: 1, Created: t0, Submitted: t0.Add(10 * time.Minute), Ended: t0.Add(50 * time.Minute)},
		{Number: 2, Created: t0.Add(50 * time.Minute)},
	}
	bars, from, to := waveBars(ws, t0.Add(100*time.Minute))
	if !from.Equal(t0) || !to.Equal(t0.Add(100*time.Minute)) {
		t.Fatalf("axis %v to %v, want the first creation to now", from, to)
	}
	if b := bars[0]; b.X != 100 || b.Width != 400 || b.Open || b.Y != 2 {
		t.Errorf("wave 1 bar %+v: want x 100, width 400, closed, row 0", b)
	}
	if b := bars[1]; b.X != 500 || b.Width != 500 || !b.Open || b.Y != 2+waveRowHeight {
		t.Errorf("wave 2 bar %+v: want x 500 to the end, open, row 1", b)
	}
	if bars, _, _ := waveBars(nil, t0); bars != nil {
		t.Errorf("no waves gave bars %+v", bars)
	}
	// A wave made and ended at once still shows.
	bars, _, _ = waveBars([]store.WaveSpan{{Created: t0, Ended: t0}}, t0)
	if bars[0].Width < 2 {
		t.Errorf("an instant wave's bar is %d wide, want at least 2", bars[0].Width)
	}
}

// The timeline part renders its waves: a bar and a row each, the status
// in the bar's class, an open wave marked.
func TestTimelineRendersWaves(t *testing.T) {
	h := NewHandler(nil, Config{}).(*handler)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ws := []store.WaveSpan{
		{Number: 1, Run: 1, Status: "done", Created: t0, Submitted: t0, Ended: t0.Add(time.Hour), Requests: 40, Expired: 2},
		{Number: 2, Run: 1, Status: "submitted", Created: t0.Add(time.Hour), Requests: 3},
	}
	v := timelineView{Timeline: store.Timeline{Waves: ws, ByMinute: true}}
	v.WaveBars, v.WaveFrom, v.WaveTo = waveBars(ws, t0.Add(2*time.Hour))
	var b strings.Builder
	if err := h.pages["batch"].ExecuteTemplate(&b, "timeline", v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`class="wave w-done" x="0" y="2" width="500"`, `class="wave w-submitted open" x="500"`,
		"<td>1</td><td>1</td><td>done</td>", `<td class="n">40</td>`, "No job finished yet.", "No realtime call yet.", "its progress is read by the minute"} {
		if !strings.Contains(out, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, out)
		}
	}
}
