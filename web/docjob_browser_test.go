package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDocumentJobBrowser loads a document job's page in headless
// Chromium: its steps grouped (a chunk's row opens its folded card), the
// merge's conflict, the document clipped with its spans, a span's link to
// its field and back; no request off the host, no console error, no page
// wider than the window. -screenshots writes docs/img/dashboard-document-*.png.
func TestDocumentJobBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test (-short skips them)")
	}
	t.Parallel()
	f := newDocFixture(t)
	ctx, bl := newBrowser(t, 900)
	b := &browserRun{t: t, ctx: ctx, bl: bl, srv: f.srv}

	b.open("/jobs/"+docParallel, "#steps-0 table.steps")
	b.check("the document job's page")
	if !b.eval(`document.querySelector('#steps-0 details.step-cards').open === false`) {
		t.Error("the chunks' cards are not folded under their table")
	}
	b.scrollTo("#attempts")
	b.shot("document-steps")

	// A chunk's row leads to its card, folded until then.
	card := fmt.Sprintf("attempt-%d", 6)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#steps-0 table.steps a[href="#%s"]`, card)))); err != nil {
		t.Fatal(err)
	}
	shown := fmt.Sprintf(`(() => { const c = document.getElementById(%q); const r = c.getBoundingClientRect();
		return c.closest('details').open && r.top > -2 && r.top < window.innerHeight; })()`, card)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](shown, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const c = document.getElementById(%q); const r = c.getBoundingClientRect();
			return location.hash + ' open=' + c.closest('details').open + ' top=' + r.top + ' h=' + window.innerHeight + ' js=' + typeof htmx; })()`, card)))
		t.Errorf("a chunk's row does not open and show its card: %v (%s)", err, st)
	}

	merge := fmt.Sprintf("#steps-%d", len(f.chunks)+1)
	b.scrollTo(merge)
	if !b.eval(fmt.Sprintf(`(() => { const s = document.querySelector(%q);
		return s.querySelector('table.conflicts li.chosen').textContent.includes('chunks 5, 6') && s.querySelectorAll('table.conflicts li').length === 2; })()`, merge)) {
		t.Error("the merge's conflict is not shown with its chosen value")
	}
	b.shot("document-merge")

	// A span links to its field's row, the row back to the span.
	k := 0 // the provider, on the first page
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#span-%d`, k)))); err != nil {
		t.Fatal(err)
	}
	if !b.eval(fmt.Sprintf(`location.hash === '#field-%d' && document.querySelector('tr:target') === document.getElementById('field-%d')`, k, k)) {
		t.Error("a span does not lead to its field's row")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#field-%d a[href="#span-%d"]`, k, k)))); err != nil {
		t.Fatal(err)
	}
	if !b.eval(fmt.Sprintf(`location.hash === '#span-%d'`, k)) {
		t.Error("a field's row does not lead back to its span")
	}
	b.scrollTo("#document")
	if !b.eval(`document.querySelectorAll('pre.document .gap').length > 0 && getComputedStyle(document.querySelector('pre.document mark.g-exact')).backgroundColor !== getComputedStyle(document.querySelector('pre.document mark.g-normalized')).backgroundColor`) {
		t.Error("the clipped document shows no gap, or its grades share a colour")
	}
	b.shot("document-spans")

	b.open("/jobs/"+docAgent, "#steps-0 table.steps")
	b.scrollTo("#attempts")
	b.shot("document-agent")
	b.check("the agent job's page")
}

// scrollTo scrolls the element of sel to the window's top.
func (b *browserRun) scrollTo(sel string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](fmt.Sprintf(`document.querySelector(%q).scrollIntoView()`, sel))); err != nil {
		b.t.Fatalf("scroll to %s: %v", sel, err)
	}
}

// shotBytes writes a screenshot as name in docs/img (-screenshots), else
// in a temporary directory.
func (b *browserRun) shotBytes(name string, png []byte) {
	b.t.Helper()
	dir := b.t.TempDir()
	if *screenshots {
		dir = filepath.Join("..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
