package syncbuf

import (
	"fmt"
	"testing"
)

// Written's channel closes once the text is written, across writes, and
// at once for text written before; not for text never written.
func TestWritten(t *testing.T) {
	t.Parallel()
	var b Buffer
	fmt.Fprint(&b, "dashboard at ")
	before := b.Written("dashboard")
	select {
	case <-before:
	default:
		t.Fatal("text written before Written: its channel is open")
	}
	later, never := b.Written("at http://x/"), b.Written("nowhere")
	select {
	case <-later:
		t.Fatal("closed before the text was written")
	default:
	}
	go fmt.Fprint(&b, "http://x/\n")
	<-later
	select {
	case <-never:
		t.Fatal("closed for text never written")
	default:
	}
}
