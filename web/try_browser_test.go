package web_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/web"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

// TestTryBrowser runs the playground in headless Chromium: a messy job
// that needs a repair, posted from the form, followed over its event
// stream to its cards, with no console error, no request off the host and
// no page wider than the window. -screenshots writes docs/img/try.png.
func TestTryBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test (-short skips them)")
	}
	// The simulator thinks for a while, so that the post is answered with
	// the run going and the page follows it on its stream.
	ts := newTryServer(t, sim.Latency{RequestP50: 150 * time.Millisecond, RequestP99: 300 * time.Millisecond})

	ctx, bl := newBrowser(t, 1000)

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.srv.URL+"/try"), chromedp.WaitVisible(chromedp.CSS("form.try"))); err != nil {
		t.Fatalf("open /try: %v", err)
	}
	// The form's example job; a seed whose messy run needs a repair,
	// found through the same playground (the draws are a function of the
	// input and the seed, not of the latency).
	schema, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('textarea[name=schema]').value`))
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('textarea[name=prompt]').value`))
	if err != nil {
		t.Fatal(err)
	}
	source, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('select[name=source]').value`))
	if source != "sim:messy" {
		t.Errorf("the form starts on %q, want the messy preset", source)
	}
	seed, attempts := repairSeed(t, schema, prompt)

	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`input[name=seed]`), seed),
		chromedp.Click(chromedp.CSS(`form.try button`)),
	); err != nil {
		t.Fatal(err)
	}
	done := fmt.Sprintf(`!!document.querySelector('#try-verdict') && document.querySelectorAll('#try-run article.card').length === %d`, attempts)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#try-run').innerHTML`))
		t.Fatalf("the run did not end with %d cards: %v\n%s", attempts, err, html)
	}
	checks := map[string]string{
		"the first card failed, with its errors and the feedback sent next": `(() => { const c = document.querySelector('#try-attempt-1');
			return c.classList.contains('bad') && !!c.querySelector('ul.errors li, table.repairs') && c.textContent.includes('Sent next'); })()`,
		"the last card is valid, with a diff from the one before": fmt.Sprintf(`(() => { const c = document.querySelector('#try-attempt-%d');
			return c.classList.contains('ok') && !!c.querySelector('pre.diff'); })()`, attempts),
		"the diagram shows the last attempt's stages lit":      `document.querySelectorAll('ol.pipeline li.st-ok').length >= 3 && document.querySelector('[data-stage=end]').classList.contains('st-ok')`,
		"the verdict says valid after the repair":              fmt.Sprintf(`document.querySelector('#try-verdict').textContent.includes('valid after %d attempts')`, attempts),
		"no script ran from the replies (only the page's own)": `document.scripts.length === 4 && document.querySelectorAll('img, iframe, object, embed').length === 0`,
		"the page is no wider than the window":                 `document.documentElement.scrollWidth <= window.innerWidth`,
		// The text of each choice fits its menu beside the menu's arrow.
		"no menu of the form cuts its choices off": `(() => { const c = document.createElement('canvas').getContext('2d');
			return [...document.querySelectorAll('form.try select')].every(s => { const cs = getComputedStyle(s); c.font = cs.font;
				const need = Math.max(...[...s.options].map(o => c.measureText(o.text).width));
				return s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20 >= need; }); })()`,
		"the retry stage says the run retried to get there": fmt.Sprintf(`document.querySelector('[data-stage=retry]').textContent.includes('valid after %d retr')`, attempts-1),
	}
	for what, js := range checks {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !ok {
			t.Errorf("%s: no (%v)", what, err)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.scrollTo(0, 0)`)); err != nil {
		t.Fatal(err)
	}
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if *screenshots {
		dir = filepath.Join("..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, "try.png"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	requests, problems, dialogs := bl.take()
	host := ts.srv.Listener.Addr().String()
	streamed := false
	for _, r := range requests {
		_, r, _ = strings.Cut(r, " ")
		u, err := url.Parse(r)
		if err != nil || u.Host != host {
			t.Errorf("a request off the host: %s", r)
		}
		streamed = streamed || err == nil && strings.HasPrefix(u.Path, "/try/runs/") && strings.HasSuffix(u.Path, "/events")
	}
	if !streamed {
		t.Errorf("the page did not follow the run on its stream: requests %q", requests)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, d := range dialogs {
		t.Errorf("a dialog opened: %s", d)
	}
}

// repairSeed is a seed under which the messy preset's run of schema and
// prompt (the form's other settings) is valid after a repair, and its
// attempts.
func repairSeed(t *testing.T, schema, prompt string) (string, int) {
	t.Helper()
	tr := playground.New(playground.Config{Simulator: testSims(t, sim.Latency{})})
	for i := 1; i <= 50; i++ {
		seed := fmt.Sprint(i)
		run, err := tr.Prepare(web.TryRequest{Preset: "messy", Seed: seed, Prompt: prompt, Schema: []byte(schema),
			Mode: fixpoint.ModePrompt, Limits: fixpoint.Limits{MaxAttempts: fixpoint.MaxAttemptsDefault, Strategy: fixpoint.StrategyConversation, Coerce: fixpoint.CoerceSafe}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run(context.Background(), func(web.TryEvent) {})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == fixpoint.StatusValid && len(res.Attempts) >= 2 && len(res.Attempts[0].Errors) > 0 && res.Attempts[0].Source != "" {
			return seed, len(res.Attempts)
		}
	}
	t.Fatal("no seed from 1 to 50 gives the form's job a repair on the messy preset")
	return "", 0
}
