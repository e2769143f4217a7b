package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fixpoint-dev/fixpoint/sim"
)

// TestTryDocumentBrowser runs the example document in headless Chromium
// under the parallel strategy: the form loads it, the run's cards come
// grouped by step (the chunks' table, the merge). -screenshots writes
// docs/img/try-document.png.
func TestTryDocumentBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test (-short skips them)")
	}
	t.Parallel()
	ts := newTryServer(t, sim.Latency{RequestP50: 100 * time.Millisecond, RequestP99: 200 * time.Millisecond})
	ctx, bl := newBrowser(t, 900)
	b := &browserRun{t: t, ctx: ctx, bl: bl, srv: ts.srv}
	b.open("/try", "form.try")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#try-example-document")), chromedp.WaitVisible(chromedp.CSS("form.try"))); err != nil {
		t.Fatal(err)
	}
	if !b.eval(`document.querySelector('select[name=strategy]').value === 'parallel' && document.querySelector('textarea[name=document]').value.length > 50000`) {
		t.Fatal("the example does not fill the form with a document under parallel")
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`select[name=source]`), "sim:clean"),
		chromedp.SetValue(chromedp.CSS(`input[name=seed]`), "7"),
		chromedp.Click(chromedp.CSS(`form.try button`)),
	); err != nil {
		t.Fatal(err)
	}
	done := `!!document.querySelector('#try-verdict') && !!document.querySelector('#try-run section.steps-merge')`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#try-run').innerHTML`))
		t.Fatalf("the run did not end with its merge: %v\n%.2000s", err, html)
	}
	if !b.eval(`document.querySelectorAll('#try-run section.steps-chunk table.steps tbody tr').length >= 4`) {
		t.Error("the chunks' table has fewer than 4 rows")
	}
	b.scrollTo("#try-run")
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	b.shotBytes("try-document.png", png)
	b.check("the playground's document run")
}
