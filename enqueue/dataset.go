package enqueue

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// fatalReadError is a read error after which no further row can be read.
type fatalReadError struct{ err error }

func (e *fatalReadError) Error() string { return e.err.Error() }

// rowReader yields dataset rows as field maps with their 1-based line (JSONL)
// or record (CSV, header excluded, counted from the file's first line) number.
type rowReader struct {
	format string
	// startErr refuses the data before any row: a compressed file.
	startErr error
	br       *bufio.Reader
	buf      []byte // the current JSONL line
	csv      *csv.Reader
	header   []string
	line     int
	// suspect, after a CSV record read, says why it may be rows folded
	// into one field by a stray quote ("" when it does not look so).
	suspect string

	// cols are the column names seen so far in file order: the CSV header,
	// or each JSONL row's keys as written, first sighting first.
	cols    []string
	colSeen map[string]bool

	// csvIn counts what the CSV reader has read, to bound one record.
	csvIn *boundedReader
	// csvLine is the line of the last CSV record read. (csv.Reader's
	// FieldPos panics after a parse error left no record.)
	csvLine int
}

// boundedReader fails a read that would take the bytes read since mark past
// limit: one CSV record over it stops the reading instead of being held in
// memory whole (encoding/csv reads a record at once).
type boundedReader struct {
	r                 io.Reader
	read, mark, limit int64
}

var errRecordTooLong = fmt.Errorf("a CSV record over the %d MiB a row may have", maxLineBytes>>20)

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.read-b.mark > b.limit {
		return 0, errRecordTooLong
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func newRowReader(format string, r io.Reader) *rowReader {
	rr := &rowReader{format: format, colSeen: map[string]bool{}}
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(8)
	rr.startErr = compressedStart(head)
	r = br
	if format == FormatCSV {
		// A byte order mark, as Excel writes one, is not data: left in the
		// stream it makes a quoted first header field a "bare quote".
		if bytes.HasPrefix(head, []byte("\ufeff")) {
			_, _ = br.Discard(3)
		}
		// The csv reader buffers ahead of the record it returns: the bound
		// allows for that.
		rr.csvIn = &boundedReader{r: r, limit: maxLineBytes + 64<<10}
		rr.csv = csv.NewReader(rr.csvIn)
		rr.csv.FieldsPerRecord = -1
		rr.csv.ReuseRecord = false
	} else {
		rr.br = br
	}
	return rr
}

// maxLineBytes is the longest JSONL line a row may be. A longer one is a
// bad row, skipped to its end; the rows after it are read.
const maxLineBytes = 16 << 20

// readLine returns the next line without its newline; a line over
// maxLineBytes is read to its end and reported by its length, with
// tooLong set. It returns io.EOF after the last line.
func (rr *rowReader) readLine() (line []byte, n int, tooLong bool, err error) {
	rr.buf = rr.buf[:0]
	for {
		chunk, err := rr.br.ReadSlice('\n')
		n += len(chunk)
		if !tooLong {
			if len(rr.buf)+len(chunk) > maxLineBytes+1 { // +1: the newline
				tooLong, rr.buf = true, rr.buf[:0]
			} else {
				rr.buf = append(rr.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && n > 0:
			return rr.buf, n, tooLong, nil
		case err != nil:
			return nil, n, tooLong, err
		}
		return rr.buf, n, tooLong, nil
	}
}

// columns returns the column names read so far, in file order.
func (rr *rowReader) columns() []string {
	if rr.format == FormatCSV {
		return rr.header
	}
	return rr.cols
}

func (rr *rowReader) next() (map[string]any, int, error) {
	if rr.startErr != nil {
		return nil, 1, &fatalReadError{rr.startErr}
	}
	if rr.format == FormatCSV {
		return rr.nextCSV()
	}
	for {
		raw, n, tooLong, err := rr.readLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, rr.line + 1, &fatalReadError{err}
		}
		rr.line++
		if tooLong {
			return nil, rr.line, fmt.Errorf("line is %d bytes, over the %d MiB a row may have", n, maxLineBytes>>20)
		}
		text := bytes.TrimSpace(raw)
		if rr.line == 1 {
			if err := utf16Mark(text); err != nil {
				return nil, rr.line, &fatalReadError{err}
			}
			// A byte order mark, as some Windows tools write: not data.
			text = bytes.TrimPrefix(text, []byte("\ufeff"))
		}
		if len(text) == 0 {
			continue
		}
		if err := checkUTF8(text); err != nil {
			return nil, rr.line, err
		}
		if kind := jsonKindAt(text[0]); kind != "" {
			// (decoding said "cannot unmarshal array into Go value of type
			// map[string]interface {}")
			return nil, rr.line, notAnObject(text, kind)
		}
		row, err := decodeRow(text, len(rr.cols))
		if err != nil {
			return nil, rr.line, err
		}
		if at, key, dup := extract.DuplicateKey(text); dup {
			return nil, rr.line, fmt.Errorf("key %q appears twice in one object (at %s): a JSON reader keeps only one of the two values", key, at)
		}
		// JSON writes a NUL in a key or a value only as \u0000 (a raw
		// one is refused by the decoder): a line without it needs no walk.
		if bytes.Contains(text, []byte(`\u0000`)) {
			if at := nulValue(row, ""); at != "" {
				return nil, rr.line, fmt.Errorf("the value at %s holds a NUL character (\\u0000): %s", at, nulWhy)
			}
			for k := range row {
				if strings.ContainsRune(k, 0) {
					// The batch records its columns as text, which cannot hold it.
					return nil, rr.line, fmt.Errorf("field name %q holds a NUL character (\\u0000)", k)
				}
			}
		}
		rr.noteColumns(row, text)
		return row, rr.line, nil
	}
	return nil, rr.line, io.EOF
}

// decodeRow decodes a line that holds one JSON object, its numbers as
// written (json.Number), into a map made for about fields fields. The
// one-pass decoder of the hot path reads it; a line it does not take as
// one object is read again by encoding/json, whose errors name what is
// wrong, and which decodes the same values (TestDecodeRowAsEncodingJSON).
func decodeRow(text []byte, fields int) (map[string]any, error) {
	// The decoder makes a map of 64 entries when given none: 4 KB a row
	// of a few fields, a third of the first pass's allocations.
	row := make(map[string]any, max(fields, 8))
	if rest, err := fastjson.Parse(text, &row, fastjson.UseNumber); err == nil && row != nil && len(bytes.TrimSpace(rest)) == 0 {
		return row, nil
	}
	row = nil
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&row); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if row == nil {
		return nil, errors.New("not a JSON object: null")
	}
	if dec.More() {
		rest := bytes.TrimSpace(text[dec.InputOffset():])
		if len(rest) > 0 && (rest[0] == '{' || rest[0] == '[' || rest[0] == '"' || jsonKindAt(rest[0]) != "") {
			return nil, errors.New("more than one JSON value on the line")
		}
		return nil, fmt.Errorf("text after the JSON object: %q", snippet(rest, 40))
	}
	return row, nil
}

// marshalRow is a row as JSON, its keys sorted, as encoding/json writes
// it, by the hot path's encoder: a job's input row, as the ledger keeps it.
func marshalRow(row map[string]any) ([]byte, error) { return fastjson.Marshal(row) }

// noteColumns adds the row's keys not seen before, in the order the line
// writes them (a map does not keep it).
func (rr *rowReader) noteColumns(row map[string]any, text []byte) {
	fresh := false
	for k := range row {
		if !rr.colSeen[k] {
			fresh = true
			break
		}
	}
	if !fresh {
		return
	}
	for _, k := range objectKeys(text) {
		if _, ok := row[k]; ok && !rr.colSeen[k] {
			rr.colSeen[k] = true
			rr.cols = append(rr.cols, k)
		}
	}
}

// objectKeys returns the top-level keys of a JSON object in the order
// written.
func objectKeys(text []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

func (rr *rowReader) nextCSV() (map[string]any, int, error) {
	if rr.header == nil {
		h, err := rr.csv.Read()
		if errors.Is(err, io.EOF) {
			return nil, 0, io.EOF
		}
		if err != nil {
			return nil, 1, &fatalReadError{fmt.Errorf("read CSV header: %w", err)}
		}
		rr.csvIn.mark = rr.csv.InputOffset()
		if len(h) > 0 {
			if err := utf16Mark([]byte(h[0])); err != nil {
				return nil, 1, &fatalReadError{err}
			}
		}
		for _, name := range h {
			if strings.ContainsRune(name, '\r') {
				return nil, 1, &fatalReadError{errors.New(`the CSV header holds a carriage return: the file's lines end in CR alone (classic Mac), so it reads as one line; convert them first, e.g. tr '\r' '\n' < in.csv > out.csv`)}
			}
			if err := checkUTF8([]byte(name)); err != nil {
				return nil, 1, &fatalReadError{fmt.Errorf("the CSV header is %w", err)}
			}
			if strings.ContainsRune(name, 0) {
				return nil, 1, &fatalReadError{fmt.Errorf("the CSV header's column %q holds a NUL character", name)}
			}
		}
		rr.header = append([]string(nil), h...)
		if len(rr.header) > 0 {
			rr.header[0] = strings.TrimPrefix(rr.header[0], "\ufeff")
		}
		first := map[string]int{}
		for i, name := range rr.header {
			if strings.TrimSpace(name) == "" {
				// Its values would reach neither a template nor an export
				// column anyone can name.
				return nil, 1, &fatalReadError{fmt.Errorf("the CSV header's column %d has no name: name it, or remove the column", i+1)}
			}
			if j, ok := first[name]; ok {
				return nil, 1, &fatalReadError{fmt.Errorf("the CSV header names column %q twice (columns %d and %d): each row would keep only one of them", name, j+1, i+1)}
			}
			first[name] = i
		}
	}
	rr.suspect = ""
	rec, err := rr.csv.Read()
	for err == nil && allEmpty(rec) && len(rec) > 1 {
		// ",,,," is the blank line of a spreadsheet's export: skipped as
		// blank lines are (it would be a job with no content).
		rec, err = rr.csv.Read()
	}
	if err == nil && len(rec) > 0 {
		rr.csvLine, _ = rr.csv.FieldPos(0)
	}
	line := rr.csvLine
	if errors.Is(err, io.EOF) {
		return nil, line, io.EOF
	}
	if errors.Is(err, errRecordTooLong) {
		// Where it starts: the line after the last record read.
		return nil, line + 1, &fatalReadError{fmt.Errorf("%w (a quote left open makes the rest of the file one field)", err)}
	}
	rr.csvIn.mark = rr.csv.InputOffset()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if pe.Line > pe.StartLine {
				// The reader went on to pe.Line looking for the field's
				// end: the rows in between are gone from the reading, and
				// a bad row would count them as one.
				return nil, pe.StartLine, &fatalReadError{fmt.Errorf("malformed CSV: a quoted field opens on line %d and runs on to line %d, where its quoting breaks (%v): the rows between cannot be told apart, so none of the file is taken; a quote inside a quoted field is written twice (\"\"); fix the quoting and run again",
					pe.StartLine, pe.Line, pe.Err)}
			}
			return nil, pe.StartLine, fmt.Errorf("malformed CSV: %v", pe.Err)
		}
		return nil, line, &fatalReadError{err}
	}
	if len(rec) != len(rr.header) {
		return nil, line, fmt.Errorf("has %d fields, the header has %d", len(rec), len(rr.header))
	}
	for i, f := range rec {
		if err := checkUTF8([]byte(f)); err != nil {
			return nil, line, fmt.Errorf("column %q: %w", rr.header[i], err)
		}
		if strings.IndexByte(f, 0) >= 0 {
			return nil, line, fmt.Errorf("column %q holds a NUL character: %s", rr.header[i], nulWhy)
		}
	}
	rr.suspect = foldedRows(rec, rr.header)
	row := make(map[string]any, len(rec))
	for i, h := range rr.header {
		row[h] = rec[i]
	}
	return row, line, nil
}

func allEmpty(rec []string) bool {
	for _, f := range rec {
		if f != "" {
			return false
		}
	}
	return true
}

// foldedRows says which field of a CSV record holds lines that read as
// whole rows of the file (as many fields as the header, at least 3): the
// mark of a stray quote that a later stray quote closed, folding the rows
// between into one field. "" when none does.
func foldedRows(rec, header []string) string {
	if len(header) < 3 {
		return ""
	}
	for i, f := range rec {
		if !strings.Contains(f, "\n") {
			continue
		}
		lines := strings.Split(f, "\n")
		n := 0
		for _, l := range lines[1:] {
			r := csv.NewReader(strings.NewReader(l))
			r.FieldsPerRecord = -1
			if rec, err := r.Read(); err == nil && len(rec) == len(header) {
				n++
			}
		}
		// One line that reads as a row is common in text (an address of
		// three parts in a file of three columns); two, or one in a file
		// of five columns or more, are not.
		if n >= 2 || n == 1 && len(header) >= 5 {
			return fmt.Sprintf("column %q spans %d lines, and %d of them read as rows of this file (%d fields): if a stray quote folded rows into it, fix the quote; if the text is meant, ignore this",
				header[i], len(lines), n, len(header))
		}
	}
	return ""
}

// jsonKindAt names the JSON value a line starting with c holds when it is
// not an object; "" for an object or what is not JSON at all.
// notAnObject is the error of a line that begins as a JSON value of kind
// other than an object would: it says so only of a line that is such a
// value ("true", "[1,2]"), and of any other ("this is text") that it is
// not JSON.
func notAnObject(line []byte, kind string) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	var v any
	switch err := dec.Decode(&v); {
	case err != nil:
		return fmt.Errorf("not JSON: the line begins %q, which is no JSON value; each line is one row, a JSON object of fields", snippet(line, 40))
	case dec.More():
		return fmt.Errorf("not a JSON object: the line begins with a JSON %s and goes on; each line is one row, an object of fields", kind)
	}
	return fmt.Errorf("not a JSON object: the line holds a JSON %s; each line is one row, an object of fields", kind)
}

func jsonKindAt(c byte) string {
	switch {
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == '-' || c >= '0' && c <= '9':
		return "number"
	case c == 't' || c == 'f':
		return "boolean"
	}
	return ""
}

// nulWhy says why a NUL in a row's value makes it a bad row.
const nulWhy = "Postgres cannot store it, and the row, its prompt and its export would hold U+FFFD in its place"

// nulValue returns the JSON pointer of the first string value under v
// (at is v's pointer) that holds a NUL, or "". A NUL in a key is refused
// apart, by name.
func nulValue(v any, at string) string {
	switch x := v.(type) {
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return cmp.Or(at, "/")
		}
	case []any:
		for i, e := range x {
			if p := nulValue(e, at+"/"+strconv.Itoa(i)); p != "" {
				return p
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p := nulValue(x[k], at+"/"+extract.PointerToken(k)); p != "" {
				return p
			}
		}
	}
	return ""
}

// checkUTF8 refuses text that is not UTF-8: decoding it would replace each
// bad byte with U+FFFD, changing the row without a word (a Latin-1 export's
// "café" would reach the model as "caf\uFFFD").
func checkUTF8(text []byte) error {
	if utf8.Valid(text) {
		return nil
	}
	at := 0
	for at < len(text) {
		r, size := utf8.DecodeRune(text[at:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		at += size
	}
	return fmt.Errorf("not UTF-8 (byte 0x%02x at offset %d): convert the dataset to UTF-8, e.g. iconv -f latin1 -t utf-8", text[at], at)
}

// utf16Mark refuses a file that starts with a UTF-16 byte order mark: read
// as UTF-8 its rows (or header) would be noise.
func utf16Mark(first []byte) error {
	if bytes.HasPrefix(first, []byte{0xff, 0xfe}) || bytes.HasPrefix(first, []byte{0xfe, 0xff}) {
		return errors.New("the dataset is UTF-16 (it starts with a UTF-16 byte order mark): convert it to UTF-8, e.g. iconv -f utf-16 -t utf-8")
	}
	return nil
}

// compressedStart refuses a compressed file, by its first bytes: read as
// text it was hundreds of "not UTF-8" bad rows, or a CSV parse error.
func compressedStart(first []byte) error {
	for _, c := range compressions {
		if bytes.HasPrefix(first, c.magic) {
			return fmt.Errorf("the dataset is %s-compressed: decompress it first, e.g. %s FILE | enqueue ... --format jsonl|csv -", c.name, c.cat)
		}
	}
	return nil
}

// compressions are the file formats a dataset is often shipped in, by the
// bytes they start with.
var compressions = []struct {
	name, ext, cat string
	magic          []byte
}{
	{"gzip", "gz", "gzip -dc", []byte{0x1f, 0x8b}},
	{"zstd", "zst", "zstd -dc", []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{"xz", "xz", "xz -dc", []byte{0xfd, '7', 'z', 'X', 'Z', 0}},
	{"bzip2", "bz2", "bzip2 -dc", []byte("BZh")},
	{"zip", "zip", "unzip -p", []byte("PK\x03\x04")},
}

// DetectFormat picks the dataset format from a file name, in any case
// (.CSV too).
func DetectFormat(name string) (string, error) {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".jsonl"), strings.HasSuffix(lower, ".ndjson"):
		return FormatJSONL, nil
	case strings.HasSuffix(lower, ".csv"):
		return FormatCSV, nil
	}
	for _, c := range compressions {
		if strings.HasSuffix(lower, "."+c.ext) {
			return "", fmt.Errorf("%s is %s-compressed: decompress it first, e.g. %s %s | enqueue ... --format jsonl|csv -", strconv.Quote(name), c.name, c.cat, name)
		}
	}
	return "", fmt.Errorf("cannot tell the format of %s from its name; pass --format jsonl or csv", strconv.Quote(name))
}

// snippet is the first n runes of b, with "..." when cut.
func snippet(b []byte, n int) string {
	s := string(b)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}
