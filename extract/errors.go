package extract

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrNoJSON is matched (errors.Is) by the error Extract returns when a reply
// holds no JSON value, and by the error RepairText returns when a text cannot
// be repaired into one.
var ErrNoJSON = errors.New("no JSON value")

// SyntaxError says what was seen in a reply that holds no usable JSON value.
// It wraps ErrNoJSON.
type SyntaxError struct {
	// Offset is the byte offset in the reply where the problem was seen; 0 for
	// problems with the reply as a whole (empty, prose only).
	Offset int
	// Msg describes what was seen, e.g. `unexpected '}'` or
	// `prose only ("I'm sorry, I can't...")`.
	Msg string

	whole bool // Msg is about the whole reply: no offset is printed
}

// Error returns e.g. `no JSON value: unexpected '}' at offset 17`.
func (e *SyntaxError) Error() string {
	if e.whole {
		return "no JSON value: " + e.Msg
	}
	return "no JSON value: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns ErrNoJSON.
func (e *SyntaxError) Unwrap() error { return ErrNoJSON }

func newSyntaxError(off int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func wholeError(msg string) *SyntaxError {
	return &SyntaxError{Msg: msg, whole: true}
}
