package cli

import (
	"bytes"
	"fmt"
	"os"
	"unicode/utf8"
)

// utf8BOM is the byte order mark some Windows tools write before UTF-8
// text: not part of the text.
var utf8BOM = []byte("\ufeff")

// ReadTextFile reads a file a user wrote (a schema, a template, a system
// prompt) without its byte order mark: a schema saved by Notepad failed to
// decode ("invalid character 'ï'") while the datasets beside it were read.
//
// Text that is not UTF-8 (a Latin-1 file) is refused, naming where: read
// as it is, each bad byte became U+FFFD in every prompt sent, in silence,
// while a dataset row with the same byte is a bad row.
func ReadTextFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	b = TrimBOM(b)
	if bytes.HasPrefix(b, []byte{0xFF, 0xFE}) || bytes.HasPrefix(b, []byte{0xFE, 0xFF}) {
		return nil, fmt.Errorf("%s is UTF-16 text; convert it to UTF-8 first, e.g. iconv -f utf-16 -t utf-8 %s", name, name)
	}
	if !utf8.Valid(b) {
		at := 0
		for at < len(b) {
			r, size := utf8.DecodeRune(b[at:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		line := 1 + bytes.Count(b[:at], []byte("\n"))
		col := 1 + utf8.RuneCount(b[bytes.LastIndexByte(b[:at], '\n')+1:at]) // characters, as an editor counts
		return nil, fmt.Errorf("%s is not UTF-8 text (byte 0x%02X at line %d, column %d); convert it first, e.g. iconv -f latin1 -t utf-8 %s", name, b[at], line, col, name)
	}
	return b, nil
}

// TrimBOM drops a UTF-8 byte order mark at the start of b.
func TrimBOM(b []byte) []byte { return bytes.TrimPrefix(b, utf8BOM) }
