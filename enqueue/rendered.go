package enqueue

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/fixpoint-dev/fixpoint/store"
)

// renderedRow is a row as the first pass's reader read it and a worker
// rendered it.
type renderedRow struct {
	row  map[string]any
	line int
	// readErr says why the row could not be read; nothing else is set.
	readErr error
	// suspect says why a CSV record may be rows folded into one field.
	suspect string
	// renderErr says why render failed; job, source and doc are render's.
	renderErr error
	job       store.NewJob
	source    string
	doc       *rowDocument
	// fitErr says why the job does not fit the queue or the workers.
	fitErr error
	// key and content are the digests of the job's id and of its content
	// (set with an id field): idIndex.see's.
	key, content [16]byte
}

// renderedBatch is rows read one after another, rendered by one worker;
// done is closed once they are. fatal, on the last batch, is a read
// error after which no row can be read.
type renderedBatch struct {
	rows  []renderedRow
	fatal error
	done  chan struct{}
}

func newRenderedBatch() *renderedBatch {
	return &renderedBatch{rows: make([]renderedRow, 0, renderBatchRows), done: make(chan struct{})}
}

// renderBatchRows is how many rows a worker renders at a time: enough that
// handing them over costs little beside their rendering.
const renderBatchRows = 256

// renderRows reads rows (up to limit; 0: every row) in a goroutine of
// its own, renders them on one worker per CPU and calls each with every
// row, in the order read, from the caller's goroutine. Reading, rendering
// and what each does with a row (checking its id, comparing it with the
// ledger) so overlap, and rendering, the most of a row's time, runs on
// every CPU. An error from each stops it and is returned. limited says the
// reading stopped at limit with rows left. Every goroutine has ended when
// it returns.
func (r *renderer) renderRows(ctx context.Context, rows *rowReader, limit int, each func(*renderedRow) error) (limited bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	workers := runtime.GOMAXPROCS(0)
	// Batches go to the workers, and to the caller in the same order.
	work := make(chan *renderedBatch, 2*workers)
	ordered := make(chan *renderedBatch, 2*workers)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// The reader's own variable, not the result: an early return writes
	// the result while the reader may still be running.
	var readLimited bool
	wg.Go(func() {
		defer close(ordered)
		defer close(work)
		readLimited = r.readBatches(ctx, rows, limit, work, ordered)
	})
	for range workers {
		wg.Go(func() {
			for b := range work {
				for i := range b.rows {
					r.renderRow(&b.rows[i])
				}
				close(b.done)
			}
		})
	}
	for b := range ordered {
		// Every batch is handed to the workers before the caller.
		<-b.done
		for i := range b.rows {
			if err := each(&b.rows[i]); err != nil {
				return false, err
			}
		}
		if b.fatal != nil {
			return false, b.fatal
		}
	}
	// The reader set readLimited before it closed ordered.
	return readLimited, nil
}

// readBatches reads rows into batches and hands each to the workers, then
// to the caller, until the data ends, limit rows are read, or ctx ends.
func (r *renderer) readBatches(ctx context.Context, rows *rowReader, limit int, work, ordered chan<- *renderedBatch) (limited bool) {
	b := newRenderedBatch()
	send := func() bool {
		for _, ch := range [...]chan<- *renderedBatch{work, ordered} {
			select {
			case ch <- b:
			case <-ctx.Done():
				return false
			}
		}
		b = newRenderedBatch()
		return true
	}
	n := 0
	for limit <= 0 || n < limit {
		row, line, err := rows.next()
		if errors.Is(err, io.EOF) {
			break
		}
		var fatal *fatalReadError
		if errors.As(err, &fatal) {
			b.fatal = unreadableError{line, fatal.err}
			send()
			return false
		}
		n++
		b.rows = append(b.rows, renderedRow{row: row, line: line, readErr: err, suspect: rows.suspect})
		if len(b.rows) == renderBatchRows && !send() {
			return false
		}
	}
	if limit > 0 && n >= limit {
		_, _, err := rows.next()
		limited = !errors.Is(err, io.EOF)
	}
	if len(b.rows) > 0 {
		send()
	}
	return limited
}

// renderRow renders a row that was read, and checks that its job fits.
func (r *renderer) renderRow(p *renderedRow) {
	if p.readErr != nil {
		return
	}
	p.job, p.source, p.doc, p.renderErr = r.render(p.row, p.line)
	if p.renderErr != nil {
		return
	}
	if r.cfg.IDField != "" {
		p.key = idKey(p.job.ID)
		p.content = contentDigest(&p.job)
	}
	p.fitErr = r.fits(&p.job, p.source, p.doc.size())
}
