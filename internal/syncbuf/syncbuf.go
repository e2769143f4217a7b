// Package syncbuf holds a bytes.Buffer safe for concurrent use: the sink
// tests give a command, a server or a logger that writes from other
// goroutines while the test reads.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose Write and String may be called from any
// goroutine. The zero value is empty and ready.
type Buffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	waits []wait
}

// wait is a Written channel not closed yet.
type wait struct {
	text []byte
	ch   chan struct{}
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	kept := s.waits[:0]
	for _, w := range s.waits {
		if bytes.Contains(s.b.Bytes(), w.text) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	s.waits = kept
	return n, err
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Written returns a channel closed once what was written holds text (at
// once when it does already): a test waits on it for a line a command or
// server prints, instead of polling for it.
func (s *Buffer) Written(text string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if bytes.Contains(s.b.Bytes(), []byte(text)) {
		close(ch)
		return ch
	}
	s.waits = append(s.waits, wait{text: []byte(text), ch: ch})
	return ch
}
