package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fixpoint-dev/fixpoint/enqueue"
)

// dataset is the file enqueue reads, twice: a file named on the command
// line, or stdin kept in a temporary file.
type dataset struct {
	file   *os.File
	format string
	// rows is the file's lines less a CSV header: the progress bar's
	// total until the check has counted the rows.
	rows  int
	spool bool
}

// openDataset opens the dataset name ("-" for stdin) in format, which is
// detected from the name when empty.
func openDataset(name, format string, stdin io.Reader) (*dataset, error) {
	ds := &dataset{format: format}
	var err error
	if name == "-" {
		if format == "" {
			return nil, usageError{Err: errors.New("reading stdin: pass --format jsonl or csv")}
		}
		if ds.file, err = spool(stdin); err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		ds.spool = true
	} else {
		if ds.format == "" {
			if ds.format, err = enqueue.DetectFormat(name); err != nil {
				return nil, usageError{Err: err}
			}
		}
		if ds.file, err = os.Open(name); err != nil {
			return nil, usageError{Err: err}
		}
	}
	// Count lines for the progress bar, then read from the start.
	if ds.rows, err = countLines(ds.file); err != nil {
		ds.Close()
		return nil, usageError{Err: fmt.Errorf("read %s: %w", name, err)}
	}
	if ds.format == enqueue.FormatCSV && ds.rows > 0 {
		ds.rows--
	}
	return ds, nil
}

// total is the progress bar's total; 0 for no dataset (--resume).
func (ds *dataset) total() int {
	if ds == nil {
		return 0
	}
	return ds.rows
}

// Close closes the file, and removes a spool of stdin.
func (ds *dataset) Close() {
	ds.file.Close()
	if ds.spool {
		os.Remove(ds.file.Name())
	}
}

// spool copies r into a temporary file and returns it at its start.
func spool(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "fixpoint-enqueue-*.data")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

func countLines(f *os.File) (int, error) {
	buf := make([]byte, 256<<10)
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	_, err := f.Seek(0, io.SeekStart)
	return n, err
}
