package natsconn

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// With no URL, Open serves the embedded store itself; when a running
// worker's server holds the store, it connects to that server at Running
// (enqueue while a worker runs), and without Running it refuses.
func TestOpenEmbedded(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), freePort(t)
	worker, err := Open(Config{Dir: dir, Listen: fmt.Sprintf("127.0.0.1:%d", port), Name: "worker"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	if !worker.Embedded() {
		t.Fatal("the first Open does not run the embedded server")
	}
	shared, err := Open(Config{Dir: dir, Running: fmt.Sprintf("127.0.0.1:%d", port), Name: "enqueue"}, nil)
	if err != nil {
		t.Fatalf("Open while a worker holds the store: %v", err)
	}
	if shared.Embedded() {
		t.Error("the second Open started a second server on the same store")
	}
	if _, err := shared.JS.AccountInfo(t.Context()); err != nil {
		t.Errorf("the shared connection does not reach JetStream: %v", err)
	}
	shared.Close()
	// An enqueue told a wrong address finds the server where its lock
	// file says it listens (a worker's hint named the wrong port).
	if got, want := RunningURL(dir), fmt.Sprintf("nats://127.0.0.1:%d", port); got != want {
		t.Errorf("RunningURL = %q, want %q", got, want)
	}
	elsewhere, err := Open(Config{Dir: dir, Running: "127.0.0.1:1", Name: "enqueue"}, nil)
	if err != nil {
		t.Fatalf("Open told the wrong address: %v", err)
	}
	elsewhere.Close()
	if _, err := Open(Config{Dir: dir, Name: "second worker"}, nil); !errors.Is(err, ErrStoreDirInUse) {
		t.Errorf("a second server on the store: %v, want ErrStoreDirInUse", err)
	}
	if _, err := Open(Config{Dir: dir, Listen: "nope"}, nil); err == nil {
		t.Error("a listen address without a port was accepted")
	}
}

// A NATS URL nats.Connect would complete from its defaults is refused:
// "garbage://" reached the server at 127.0.0.1:4222.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"nats://127.0.0.1:4222", "127.0.0.1:4222", "tls://nats.example:4443", "nats://a:1, nats://b:2", "ws://h:80"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"garbage://", "nats://", "http://x:4222", "nats://a:1,garbage://b", "nats://:4222"} {
		if err := CheckURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrBadURL", bad, err)
		}
	}
	if _, err := Open(Config{URL: "garbage://"}, nil); !errors.Is(err, ErrBadURL) {
		t.Errorf("Open(garbage://) = %v, want ErrBadURL before connecting", err)
	}
}
