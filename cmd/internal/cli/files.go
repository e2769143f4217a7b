package cli

import (
	"bytes"
	"os"
)

// utf8BOM is the byte order mark some Windows tools write before UTF-8
// text: not part of the text.
var utf8BOM = []byte("\ufeff")

// ReadTextFile reads a file a user wrote (a schema, a template, a system
// prompt) without its byte order mark: a schema saved by Notepad failed to
// decode ("invalid character 'ï'") while the datasets beside it were read.
func ReadTextFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	return TrimBOM(b), err
}

// TrimBOM drops a UTF-8 byte order mark at the start of b.
func TrimBOM(b []byte) []byte { return bytes.TrimPrefix(b, utf8BOM) }
