package enqueue

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// checkedJobs holds the jobs the first pass checked, in line order, in a
// temporary file that the second pass reads back: the second pass records
// and publishes exactly the jobs the first checked, without reading the
// dataset again or rendering any row twice (rendering was a third of a
// row's time in the process). On a system that allows it the file is
// removed as soon as it is made, so a run killed leaves nothing behind.
type checkedJobs struct {
	f       *os.File
	removed bool
	w       *bufio.Writer
	r       *bufio.Reader
	buf     []byte
	// n counts the jobs written.
	n int
}

// checkedJob is one job as the first pass checked it: its line, the rows
// the pass had read when it reached it, and what render made of it. A job
// with a document names it by docHash; the first job to name it carries
// its text (docText) or the file to read it from again (docPath), the
// others neither, so that a document shared by many rows is written once.
type checkedJob struct {
	line, rows         int
	id, prompt, source string
	metadata           []byte
	docHash, docPath   string
	docText            string
}

// newCheckedJobs makes the temporary file, in the system's temporary
// directory ($TMPDIR).
func newCheckedJobs() (*checkedJobs, error) {
	f, err := os.CreateTemp("", "fixpoint-enqueue-*.jobs")
	if err != nil {
		return nil, fmt.Errorf("make the temporary file of the checked rows: %w", err)
	}
	c := &checkedJobs{f: f, w: bufio.NewWriterSize(f, 256<<10)}
	c.removed = os.Remove(f.Name()) == nil
	return c, nil
}

// add appends a job: its line and rows read, then its id, prompt,
// evidence source, input row, document hash, document file and document
// text, each after its length.
func (c *checkedJobs) add(j *checkedJob) error {
	b := binary.AppendUvarint(c.buf[:0], uint64(j.line))
	b = binary.AppendUvarint(b, uint64(j.rows))
	for _, s := range [...]string{j.id, j.prompt, j.source} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(j.metadata)))
	b = append(b, j.metadata...)
	for _, s := range [...]string{j.docHash, j.docPath} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	// The text, up to MaxDocumentBytes, goes to the file without a copy
	// in buf, which lives as long as the run.
	b = binary.AppendUvarint(b, uint64(len(j.docText)))
	c.buf = b
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("keep the checked rows in a temporary file: %w", err)
	}
	if _, err := c.w.WriteString(j.docText); err != nil {
		return fmt.Errorf("keep the checked rows in a temporary file: %w", err)
	}
	c.n++
	return nil
}

// rewind ends the writing and starts the reading from the first job.
func (c *checkedJobs) rewind() error {
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("keep the checked rows in a temporary file: %w", err)
	}
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the checked rows back: %w", err)
	}
	c.r = bufio.NewReaderSize(c.f, 256<<10)
	return nil
}

// next returns the next job, io.EOF after the last.
func (c *checkedJobs) next() (checkedJob, error) {
	var j checkedJob
	line, err := binary.ReadUvarint(c.r)
	if errors.Is(err, io.EOF) {
		return j, io.EOF
	}
	if err != nil {
		return j, c.short(err)
	}
	rows, err := binary.ReadUvarint(c.r)
	if err != nil {
		return j, c.short(err)
	}
	j.line, j.rows = int(line), int(rows)
	for _, s := range [...]*string{&j.id, &j.prompt, &j.source} {
		b, err := c.bytes()
		if err != nil {
			return j, c.short(err)
		}
		*s = string(b)
	}
	if j.metadata, err = c.bytes(); err != nil {
		return j, c.short(err)
	}
	for _, s := range [...]*string{&j.docHash, &j.docPath} {
		b, err := c.bytes()
		if err != nil {
			return j, c.short(err)
		}
		if len(b) > 0 {
			*s = string(b)
		}
	}
	if j.docText, err = c.text(); err != nil {
		return j, c.short(err)
	}
	return j, nil
}

// text reads a length and that many bytes into a string, copied once: a
// document's text can be megabytes.
func (c *checkedJobs) text() (string, error) {
	n, err := binary.ReadUvarint(c.r)
	if err != nil || n == 0 {
		return "", err
	}
	var b strings.Builder
	b.Grow(int(n))
	_, err = io.CopyN(&b, c.r, int64(n))
	return b.String(), err
}

// bytes reads a length and that many bytes.
func (c *checkedJobs) bytes() ([]byte, error) {
	n, err := binary.ReadUvarint(c.r)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(c.r, b)
	return b, err
}

func (c *checkedJobs) short(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read the checked rows back: %w", err)
}

// close closes the file and removes it.
func (c *checkedJobs) close() {
	c.f.Close()
	if !c.removed {
		os.Remove(c.f.Name())
	}
}
