package enqueue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"text/template/parse"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint/store"
)

// MaxDocumentBytesDefault bounds a job's document (Config.MaxDocumentBytes).
const MaxDocumentBytesDefault = 8 << 20

// DocumentChunkBytes bounds the documents' text one chunk of the second
// pass holds: a chunk is recorded once it holds this much, however few
// rows it has, so that the chunks in memory at once (the one read and
// those being recorded) stay within a few hundred MiB.
const DocumentChunkBytes = 64 << 20

// documentInput reports whether the batch's jobs have documents.
func (c *Config) documentInput() bool { return c.DocumentField != "" || c.DocumentFileField != "" }

// checkDocuments checks the document settings.
func (c *Config) checkDocuments() error {
	if c.DocumentField != "" && c.DocumentFileField != "" {
		return fmt.Errorf("%w: --document-field %q and --document-file-field %q: a job has one document, give one of them",
			ErrBadConfig, c.DocumentField, c.DocumentFileField)
	}
	if c.MaxDocumentBytes < 0 {
		return fmt.Errorf("%w: max document bytes %d is negative", ErrBadConfig, c.MaxDocumentBytes)
	}
	if c.DocumentField != "" && c.DocumentField == c.IDField {
		return fmt.Errorf("%w: --document-field and --id-field are both %q: the id is a short field of its own", ErrBadConfig, c.IDField)
	}
	return CheckDocumentStrategy(c.Limits, c.documentInput())
}

// templateUsesField reports whether the template reads the row's field
// name ({{.name}}, {{.name.x}}, {{with .name}}).
func templateUsesField(node parse.Node, name string) bool {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if templateUsesField(c, name) {
				return true
			}
		}
	case *parse.ActionNode:
		return templateUsesField(n.Pipe, name)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if templateUsesField(c, name) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if templateUsesField(a, name) {
				return true
			}
		}
	case *parse.FieldNode:
		return len(n.Ident) > 0 && n.Ident[0] == name
	case *parse.ChainNode:
		return templateUsesField(n.Node, name)
	case *parse.IfNode:
		return templateUsesField(n.Pipe, name) || templateUsesField(n.List, name) || templateUsesField(n.ElseList, name)
	case *parse.RangeNode:
		return templateUsesField(n.Pipe, name) || templateUsesField(n.List, name) || templateUsesField(n.ElseList, name)
	case *parse.WithNode:
		return templateUsesField(n.Pipe, name) || templateUsesField(n.List, name) || templateUsesField(n.ElseList, name)
	case *parse.TemplateNode:
		return templateUsesField(n.Pipe, name)
	}
	return false
}

// rowDocument is what the first pass keeps of a job's document beside the
// job's DocumentHash: its size, and its text when it came from
// --document-field, or the file it was read from (--document-file-field),
// which the second pass reads again: the first pass holds no file's text
// longer than it takes to check it, however many rows it has in hand.
type rowDocument struct {
	bytes int
	text  string
	path  string
}

// size is the document's size in bytes, 0 for a job of none (d nil).
func (d *rowDocument) size() int {
	if d == nil {
		return 0
	}
	return d.bytes
}

// document takes a row's document: the text of its --document-field, which
// the row recorded then goes without (the ledger holds the text once, in
// documents), or the file its --document-file-field names, read now. It
// returns the row to render and record, the document's text, and the
// file's path ("" for a field's text); the text is kept byte for byte.
func (r *renderer) document(row map[string]any) (rest map[string]any, text, path string, err error) {
	cfg := r.cfg
	limit := cfg.maxDocumentBytes()
	if f := cfg.DocumentField; f != "" {
		v, ok := row[f]
		if !ok {
			return nil, "", "", fmt.Errorf("the row has no field %q (--document-field)", f)
		}
		if text, ok = v.(string); !ok {
			return nil, "", "", fmt.Errorf("field %q (--document-field) is %s, not a document's text", f, jsonKind(v))
		}
		if text == "" {
			return nil, "", "", fmt.Errorf("field %q (--document-field) is empty: no document", f)
		}
		// The dataset's reader refused rows that are not UTF-8 or hold
		// a NUL: the text needs only its size checked.
		if len(text) > limit {
			return nil, "", "", fmt.Errorf("the document in field %q is %d bytes, over --max-document-bytes %d", f, len(text), limit)
		}
		rest = maps.Clone(row)
		delete(rest, f)
		return rest, text, "", nil
	}
	f := cfg.DocumentFileField
	v, ok := row[f]
	if !ok {
		return nil, "", "", fmt.Errorf("the row has no field %q (--document-file-field)", f)
	}
	if path, ok = v.(string); !ok || strings.TrimSpace(path) == "" {
		return nil, "", "", fmt.Errorf("field %q (--document-file-field) is %s, not a file's path", f, jsonKind(v))
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(cfg.DatasetDir, path)
	}
	if text, err = readDocument(path, limit); err != nil {
		return nil, "", "", err
	}
	return row, text, path, nil
}

// keptDocument is the document the first pass kept with c, the first job
// that names it: its text, or the text of its file read again, which must
// be what the first pass read.
func (r *renderer) keptDocument(c *checkedJob) (store.Document, error) {
	if c.docPath == "" {
		return store.Document{Hash: c.docHash, Body: c.docText}, nil
	}
	text, err := readDocument(c.docPath, r.cfg.maxDocumentBytes())
	if err == nil && store.DocumentHash(text) != c.docHash {
		err = fmt.Errorf("document file %s changed after the rows were checked", c.docPath)
	}
	if err != nil {
		return store.Document{}, fmt.Errorf("line %d: %w", c.line, err)
	}
	return store.Document{Hash: c.docHash, Body: text}, nil
}

func (c *Config) maxDocumentBytes() int {
	if c.MaxDocumentBytes > 0 {
		return c.MaxDocumentBytes
	}
	return MaxDocumentBytesDefault
}

// readDocument reads the document file at path: at most limit bytes of
// UTF-8 text without NUL, byte for byte (a byte order mark, CRLF line
// ends and trailing white space are kept).
func readDocument(path string, limit int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("document file %s does not exist", path)
		}
		return "", fmt.Errorf("document file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("document file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("document file %s is not a regular file", path)
	}
	if fi.Size() > int64(limit) {
		return "", fmt.Errorf("document file %s is %d bytes, over --max-document-bytes %d", path, fi.Size(), limit)
	}
	// A file growing after the Stat is still read no further.
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("read document file %s: %w", path, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("document file %s is over --max-document-bytes %d", path, limit)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("document file %s is empty: no document", path)
	}
	if err := checkText(b); err != nil {
		return "", fmt.Errorf("document file %s %w", path, err)
	}
	return string(b), nil
}

// checkText says where b stops being text the ledger can keep as it is:
// the offset of its first byte that is not UTF-8, or of its first NUL.
func checkText(b []byte) error {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return nil
	}
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			return fmt.Errorf("is not UTF-8 text: byte 0x%02x at offset %d (convert it to UTF-8 first)", b[i], i)
		case r == 0:
			return fmt.Errorf("holds a NUL byte at offset %d: not a text file", i)
		}
		i += w
	}
	return nil
}
