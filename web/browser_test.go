package web_test

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fixpoint-dev/fixpoint/store"
)

// screenshots, when set, makes the browser tests write their screenshots
// to docs/img (go test ./web -run TestDashboard -screenshots).
var screenshots = flag.Bool("screenshots", false, "write the dashboard's screenshots to docs/img")

// browserLog is what the browser reported while the tests ran.
type browserLog struct {
	mu       sync.Mutex
	requests []string
	problems []string
	dialogs  []string
	// dialog receives each dialog's message as it opens (dropped when
	// nobody waits and the buffer is full).
	dialog chan string
}

func (b *browserLog) add(to *[]string, s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*to = append(*to, s)
}

// take returns and clears the log.
func (b *browserLog) take() (requests, problems, dialogs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	requests, problems, dialogs = b.requests, b.problems, b.dialogs
	b.requests, b.problems, b.dialogs = nil, nil, nil
	return
}

// chromium is the browser's path. The browser tests do not skip without
// one (only -short skips them, with the ledger tests): they fail saying
// what to install.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the dashboard's browser tests need Debian's chromium package " +
		"(apt-get install chromium; .ci/services installs it), or run go test -short to skip integration tests")
	return ""
}

// newBrowser starts headless Chromium for one test, a window of 1360 by
// height pixels, bounded to two minutes, and logs what it reports: each
// request ("METHOD URL"), console errors and warnings, exceptions, log
// entries and dialogs (refused, so a script's alert does not block).
func newBrowser(t *testing.T, height int) (context.Context, *browserLog) {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(1360, height),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("hide-scrollbars", true))...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	bl := &browserLog{dialog: make(chan string, 8)}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			bl.add(&bl.requests, ev.Request.Method+" "+ev.Request.URL)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				bl.add(&bl.problems, fmt.Sprintf("console %s: %v", ev.Type, ev.Args))
			}
		case *runtime.EventExceptionThrown:
			bl.add(&bl.problems, fmt.Sprintf("exception: %s %s:%d", ev.ExceptionDetails.Text, ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				bl.add(&bl.problems, fmt.Sprintf("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *page.EventJavascriptDialogOpening:
			bl.add(&bl.dialogs, string(ev.Type)+": "+ev.Message)
			select {
			case bl.dialog <- ev.Message:
			default:
			}
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, bl
}

// browserRun is a browser test's tab on the dashboard under test.
type browserRun struct {
	t   *testing.T
	ctx context.Context
	bl  *browserLog
	srv *httptest.Server
}

// check fails for any request off the test server, console error, CSP
// report, exception or dialog since the last check, and for a page wider
// than the window (long names and lines wrap or scroll inside their box).
func (b *browserRun) check(page string) {
	t := b.t
	t.Helper()
	host := b.srv.Listener.Addr().String()
	if wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); err != nil || wide {
		t.Errorf("%s: the page is wider than the window (%v)", page, err)
	}
	requests, problems, dialogs := b.bl.take()
	if len(requests) == 0 {
		t.Errorf("%s: the browser reported no request", page)
	}
	for _, r := range requests {
		_, r, _ = strings.Cut(r, " ")
		u, err := url.Parse(r)
		if err != nil || u.Host != host || !strings.HasPrefix(u.Host, "127.0.0.1:") {
			t.Errorf("%s: a request off the host: %s", page, r)
		}
	}
	for _, p := range problems {
		t.Errorf("%s: %s", page, p)
	}
	for _, d := range dialogs {
		t.Errorf("%s: a dialog opened (script ran): %s", page, d)
	}
}

// shot writes a screenshot of the window as it is to
// docs/img/dashboard-NAME.png (-screenshots), else to a temporary directory.
func (b *browserRun) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := b.t.TempDir()
	if *screenshots {
		dir = filepath.Join("..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// open loads path and waits for waitFor to show.
func (b *browserRun) open(path string, waitFor string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(waitFor))); err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
}

// eval is what a script of the page that says yes or no says.
func (b *browserRun) eval(js string) bool {
	b.t.Helper()
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return ok
}

// probeDialogs checks that a script that runs is seen (else "no dialog
// opened" would prove nothing): an alert of the page's is reported.
func (b *browserRun) probeDialogs() {
	t := b.t
	b.open("/", "table.batches")
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](`setTimeout(() => alert("probe"), 0)`)); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-b.bl.dialog:
		if msg != "probe" {
			t.Fatalf("a dialog %q opened, want the probe's", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the probe's alert was not seen: the dialog check is blind")
	}
	b.bl.take()
}

// testBrowserSearch: the batch's search, text of its jobs (an invalid
// job's error), then the header's box, a job id typed, to the job's page.
func testBrowserSearch(b *browserRun, l *dashLedger) {
	t, ctx := b.t, b.ctx
	invalid, _, err := l.st.JobPage(ctx, l.demo, store.JobFilter{Status: "invalid", Limit: 1})
	if err != nil || len(invalid) == 0 || len(invalid[0].Error) < 12 {
		t.Fatalf("no invalid demo job with an error (%v)", err)
	}
	words := invalid[0].Error[:12]
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#jobs form.search input[name=q]`), words),
		chromedp.Submit(chromedp.CSS(`#jobs form.search input[name=q]`)),
		chromedp.WaitVisible(chromedp.CSS("#search-note")),
	); err != nil {
		t.Fatalf("search %q from the batch's page: %v", words, err)
	}
	if !b.eval(fmt.Sprintf(`location.pathname === '/search' && [...document.querySelectorAll('#job-list tbody tr')].some(r => r.cells[0].textContent.startsWith(%q)) &&
			[...document.querySelectorAll('#job-list tbody tr')].every(r => r.textContent.includes('found in'))`, invalid[0].ID)) {
		t.Errorf("the search for %q does not list job %s", words, invalid[0].ID)
	}
	b.shot("search")
	b.check("/search")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`header form.find input[name=q]`), invalid[0].ID),
		chromedp.Submit(chromedp.CSS(`header form.find input[name=q]`)),
		chromedp.WaitVisible(chromedp.CSS("article.card")),
	); err != nil {
		t.Fatalf("find job %s from the header: %v", invalid[0].ID, err)
	}
	if !b.eval(fmt.Sprintf(`location.pathname === %q`, "/jobs/"+url.PathEscape(invalid[0].ID))) {
		t.Errorf("the header's search for job %s did not open its page", invalid[0].ID)
	}
	b.bl.take()
}

// testBrowserRuns: a requeued job's runs side by side; an earlier run's
// attempts open from its summary.
func testBrowserRuns(b *browserRun) {
	t, ctx := b.t, b.ctx
	b.open("/jobs/"+rerunJob, "table.runs")
	if !b.eval(`document.querySelectorAll('table.runs tbody tr').length === 2 && !document.querySelector('details#run-1').open`) {
		t.Error("the requeued job's page does not show its 2 runs, the earlier one closed")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("details#run-1 > summary"))); err != nil {
		t.Fatal(err)
	}
	if !b.eval(`document.querySelector('details#run-1').open && [...document.querySelectorAll('details#run-1 article.card')].filter(c => c.offsetHeight > 0).length === 2`) {
		t.Error("run 1's section did not open on its 2 attempt cards")
	}
	if *screenshots {
		shotTo(ctx, t, "dashboard-job-runs.png", "#runs")
	}
	b.check("/jobs/" + rerunJob)

}

// testBrowserCosts: the costs over time, plotted.
func testBrowserCosts(b *browserRun) {
	t := b.t
	b.open("/costs", "#costs-chart canvas")
	if !b.eval(`document.querySelectorAll('table.costs tbody tr').length >= 3 && document.querySelectorAll('#costs-chart .u-legend .u-series').length >= 2`) {
		t.Error("the costs page lacks its table or its chart's legend")
	}
	b.shot("costs")
	b.check("/costs")

}

func testBrowser(t *testing.T, l *dashLedger, srv *httptest.Server) {
	ctx, bl := newBrowser(t, 900)
	b := &browserRun{t: t, ctx: ctx, bl: bl, srv: srv}
	b.probeDialogs()

	// The batch list, the live batch streaming.
	b.open("/", "table.batches")
	if !b.eval(`document.querySelectorAll('table.batches tbody tr').length === 5 && !!window.htmx`) {
		t.Error("the batch list does not show 5 batches with htmx loaded")
	}
	b.shot("batches")
	// The progress bars colour each status: invalid jobs are not green.
	if !b.eval(`(() => { const fill = c => { const r = document.querySelector('svg.pbar rect.' + c); return r && getComputedStyle(r).fill; };
			return !!fill('pb-valid') && !!fill('pb-invalid') && fill('pb-valid') !== fill('pb-invalid'); })()`) {
		t.Error("the progress bars do not show invalid jobs in a colour of their own")
	}
	// Live progress moves: a job of the running batch finishes, and its
	// row shows it without a reload.
	l.finish(t, live+"-1")
	row := `document.querySelector('table.batches tbody tr:first-child')`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](row+`.textContent.includes('1/3')`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the running batch's row did not show its finished job: %v", err)
	}
	b.check("/")

	// A batch: the funnel plotted (uPlot draws a canvas), clusters, jobs.
	batch := "/batches/" + url.PathEscape(l.demo)
	b.open(batch, "#funnel-chart canvas")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('table.clusters tbody tr').length > 0 &&
			document.querySelectorAll('#costs tbody tr').length > 0 && document.querySelectorAll('#repairs tbody tr').length > 0 && document.querySelectorAll('#job-list tbody tr').length === 50`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the batch page lacks failure clusters, costs or a first page of 50 jobs: %v", err)
	}
	// The plots over time arrive by htmx after the page: drawn too.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('#progress-chart canvas') && !!document.querySelector('#latency-chart canvas')`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the progress and latency plots were not drawn: %v", err)
	}
	if b, err := chromedp.Run(ctx, chromedp.Screenshot("#timeline")); err != nil {
		t.Errorf("screenshot of the plots over time: %v", err)
	} else if *screenshots {
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "dashboard-timeline.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.shot("batch")
	b.check(batch)

	// The job list filters (htmx swaps the list, the URL follows): the
	// jobs valid at their second attempt, which the messy demo always has.
	wantRows, _, err := l.st.JobPage(ctx, l.demo, store.JobFilter{Status: "valid", Attempts: 2})
	if err != nil || len(wantRows) == 0 {
		t.Fatalf("no demo job valid at attempt 2 (%v)", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`select[name=status]`), "valid"),
		chromedp.SetValue(chromedp.CSS(`input[name=attempts]`), "2"),
		chromedp.Click(chromedp.CSS(`form.filter button`)),
	); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`(() => { const rows = [...document.querySelectorAll('#job-list tbody tr')];
		return location.search.includes('status=valid') && location.search.includes('attempts=2') && rows.length === %d &&
			rows.every(r => r.querySelector('.badge').textContent === 'valid' && r.cells[4].textContent === '2') &&
			rows[0].cells[0].textContent === %q; })()`, len(wantRows), wantRows[0].ID)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](want, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("after filtering on valid at attempt 2, the list does not show those %d jobs alone: %v", len(wantRows), err)
	}
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS("#jobs"))); err != nil {
		t.Fatal(err)
	}
	b.shot("jobs")
	b.check(batch + " filtered")

	testBrowserSearch(b, l)

	// A job with a repair: its cards.
	rows, _, err := l.st.JobPage(ctx, l.demo, store.JobFilter{Status: "valid", Attempts: 2, Limit: 1})
	if err != nil || len(rows) == 0 {
		t.Fatalf("no demo job valid at attempt 2 (%v)", err)
	}
	job := "/jobs/" + url.PathEscape(rows[0].ID)
	b.open(job, "article.card")
	if !b.eval(`document.querySelectorAll('article.card').length === 2 && !!document.querySelector('article.card.ok')`) {
		t.Error("the job page does not show 2 attempt cards, the last valid")
	}
	b.shot("job")
	b.check(job)

	testBrowserRuns(b)
	testBrowserCosts(b)
	testBrowserTruth(b, l)

	testBrowserHostile(b, l)
}

// testBrowserHostile: the hostile replies shown, nothing run, nothing
// overflowing; a value diff single-spaced.
func testBrowserHostile(b *browserRun, l *dashLedger) {
	t, ctx := b.t, b.ctx
	for _, p := range []string{"/jobs/" + url.PathEscape(l.xssJob), "/jobs/" + url.PathEscape(l.hugeJob), "/batches/" + url.PathEscape(xssBatch)} {
		b.open(p, "main")
		if !b.eval(`document.scripts.length === 4 && document.querySelectorAll('img, iframe, object, embed').length === 0 &&
				[...document.querySelectorAll('a')].every(a => !a.href.startsWith('javascript:'))`) {
			t.Errorf("%s: the page holds an element or script from the replies", p)
		}
		b.check(p)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.innerText.includes('alert(1)')`)); err != nil {
		t.Error(err)
	}
	b.open("/jobs/"+url.PathEscape(l.xssJob), "article.card")
	// Its value diff (attempt 3's against attempt 1's) is single-spaced:
	// each line starts where the one before ends.
	if !b.eval(`(() => { const ls = [...document.querySelectorAll('pre.diff span')];
			return ls.length > 3 && ls.every((l, i) => i === 0 || Math.abs(l.getBoundingClientRect().top - ls[i-1].getBoundingClientRect().bottom) < 1); })()`) {
		t.Error("the value diff's lines are not one under the other (a blank line between them?)")
	}
	b.shot("job-hostile")
	b.check("hostile job")
}
