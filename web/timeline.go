package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// timelineView is the batch page's plots over time: progress and latency
// as chart data the page's script draws, and the waves as bars the server
// lays out (an SVG: a few rows, no script needed).
type timelineView struct {
	store.Timeline
	ProgressChart string // JSON: unix seconds and cumulative counts
	LatencyChart  string // JSON: bucket bounds (ms) and calls
	WaveBars      []waveBar
	WaveHeight    int
	WaveFrom      time.Time
	WaveTo        time.Time
}

// waveBar is one wave's bar in the timeline: x and width in the SVG's
// units (0-1000), y its row; Ended false for a wave still open (its bar
// runs to now).
type waveBar struct {
	store.WaveSpan
	X, Width, Y int
	Open        bool
}

// waveRowHeight is the height of a wave's row in the SVG.
const waveRowHeight = 22

func (h *handler) timelinePart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	tl, err := h.st.BatchTimeline(ctx, r.PathValue("name"))
	if err != nil {
		h.failPart(w, r, err)
		return
	}
	v := timelineView{Timeline: tl, ProgressChart: progressChart(tl), LatencyChart: latencyChart(tl)}
	v.WaveBars, v.WaveFrom, v.WaveTo = waveBars(tl.Waves, time.Now())
	v.WaveHeight = len(v.WaveBars)*waveRowHeight + 4
	h.render(w, r, http.StatusOK, "batch", "timeline", v)
}

// progressChart is the progress as the chart script reads it.
func progressChart(tl store.Timeline) string {
	c := struct {
		T       []int64 `json:"t"`
		Valid   []int64 `json:"valid"`
		Invalid []int64 `json:"invalid"`
		Failed  []int64 `json:"failed"`
		Other   []int64 `json:"other"`
	}{}
	for _, p := range tl.Progress {
		c.T = append(c.T, p.At.Unix())
		c.Valid, c.Invalid = append(c.Valid, p.Valid), append(c.Invalid, p.Invalid)
		c.Failed, c.Other = append(c.Failed, p.Failed), append(c.Other, p.Other)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// latencyChart is the latency histogram as the chart script reads it: a
// label per bucket ("< 128 ms") and its calls.
func latencyChart(tl store.Timeline) string {
	c := struct {
		Labels []string `json:"labels"`
		Calls  []int64  `json:"calls"`
	}{}
	for _, b := range tl.Latency {
		c.Labels = append(c.Labels, "< "+msLabel(b.UpToMs))
		c.Calls = append(c.Calls, b.Calls)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// msLabel writes a latency bound in ms or s.
func msLabel(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
}

// waveBars lays the waves out on one time axis, from the first wave made
// to the last end (now for a wave still open).
func waveBars(ws []store.WaveSpan, now time.Time) (bars []waveBar, from, to time.Time) {
	if len(ws) == 0 {
		return nil, time.Time{}, time.Time{}
	}
	from, to = ws[0].Created, ws[0].Created
	for _, w := range ws {
		from = minTime(from, w.Created)
		end := w.Ended
		if end.IsZero() {
			end = now
		}
		to = maxTime(to, end)
	}
	span := to.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) int { return int(1000 * t.Sub(from) / span) }
	for i, w := range ws {
		start := w.Submitted
		if start.IsZero() {
			start = w.Created
		}
		end, open := w.Ended, w.Ended.IsZero()
		if open {
			end = now
		}
		b := waveBar{WaveSpan: w, X: x(start), Y: 2 + i*waveRowHeight, Open: open}
		b.Width = max(x(end)-b.X, 2)
		bars = append(bars, b)
	}
	return bars, from, to
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
