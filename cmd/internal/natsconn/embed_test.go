package natsconn

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
)

// TestEmbeddedNATSLogs: the embedded server's own lines reach the logger
// given, at their level, so an error it answers generically (a stream whose
// store cannot be created) can be traced to its cause.
func TestEmbeddedNATSLogs(t *testing.T) {
	// The server may still log from its start goroutine after
	// WaitForShutdown: its log is read under a lock, and the second part
	// writes to a buffer of its own.
	var started lockedBuffer
	log := slog.New(slog.NewTextHandler(&started, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ns, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	out := started.String()
	if !strings.Contains(out, "level=DEBUG msg=\"embedded nats: Starting nats-server\"") {
		t.Fatalf("the server's start notice is not in the log:\n%s", out)
	}

	var buf bytes.Buffer
	l := natsLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	l.Noticef("notice %d", 1)
	l.Debugf("debug %d", 2)
	l.Tracef("trace %d", 3)
	l.Warnf("Stream create failed for '%s > %s': %v", "$G", "JOBS", "storage directory is not writable")
	l.Errorf("error %d", 4)
	got := buf.String()
	for _, want := range []string{
		`level=WARN msg="embedded nats: Stream create failed for '$G > JOBS': storage directory is not writable"`,
		`level=ERROR msg="embedded nats: error 4"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	for _, not := range []string{"notice 1", "debug 2", "trace 3"} {
		if strings.Contains(got, not) {
			t.Errorf("log at warn level has %q:\n%s", not, got)
		}
	}
}

// Two servers on one store directory would corrupt each other's streams:
// the second is refused while the first runs, and the directory is free
// again once the first has shut down.
func TestEmbeddedNATSLocksItsDirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := StartServer(ServerConfig{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := StartServer(ServerConfig{StoreDir: dir, Port: -1}); !errors.Is(err, ErrStoreDirInUse) {
		if b != nil {
			b.Shutdown()
		}
		t.Fatalf("second server on %s: %v, want ErrStoreDirInUse", dir, err)
	}
	a.Shutdown()
	a.WaitForShutdown()
	c, err := StartServer(ServerConfig{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatalf("restart on the directory after shutdown: %v", err)
	}
	c.Shutdown()
	c.WaitForShutdown()
}

// lockedBuffer is a bytes.Buffer safe for writers in other goroutines.
type lockedBuffer = syncbuf.Buffer
