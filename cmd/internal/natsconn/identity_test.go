package natsconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
)

// Two setups on one machine with the same listen address: an enqueue whose
// own directory is held by a server that does not listen (a worker still
// starting, another enqueue) must not publish into the other setup's
// server, nor into its own directory's server when that one records to
// another ledger.
func TestOpenRefusesAnotherSetupsServer(t *testing.T) {
	t.Parallel()
	dirA, dirB, port := t.TempDir(), t.TempDir(), freePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	a, err := Open(Config{Dir: dirA, Listen: listen, Name: "worker A", Ledger: "127.0.0.1:5432/a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	holdB, err := StartServer(ServerConfig{StoreDir: dirB, Ledger: "127.0.0.1:5432/b"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { holdB.Shutdown(); holdB.WaitForShutdown() }()

	c, err := Open(Config{Dir: dirB, Running: listen, Name: "enqueue B", Ledger: "127.0.0.1:5432/b"}, nil)
	if !errors.Is(err, ErrForeignQueue) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("enqueue B reached worker A's server: %v, want ErrForeignQueue", err)
	}
	for _, want := range []string{natsaddr.AbsDir(dirA), natsaddr.AbsDir(dirB), "FIXPOINT_NATS_LISTEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}

	c, err = Open(Config{Dir: dirA, Running: listen, Name: "enqueue of another ledger", Ledger: "127.0.0.1:5432/other"}, nil)
	if !errors.Is(err, ErrForeignQueue) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("an enqueue of another ledger reached worker A's server: %v, want ErrForeignQueue", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:5432/a") {
		t.Errorf("the refusal does not name the worker's ledger: %v", err)
	}

	own, err := Open(Config{Dir: dirA, Running: listen, Name: "enqueue A", Ledger: "127.0.0.1:5432/a"}, nil)
	if err != nil {
		t.Fatalf("enqueue A refused its own worker's server: %v", err)
	}
	own.Close()
}

// A worker whose listen address is taken says so at once, by what, and
// which address is free, instead of a server never ready after 15s.
func TestStartServerSaysWhoHoldsThePort(t *testing.T) {
	t.Parallel()
	dirA, port := t.TempDir(), freePort(t)
	a, err := StartServer(ServerConfig{StoreDir: dirA, Port: port, Ledger: "127.0.0.1:5432/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Shutdown(); a.WaitForShutdown() }()
	start := time.Now()
	b, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Port: port})
	if !errors.Is(err, ErrListenInUse) {
		if b != nil {
			b.Shutdown()
		}
		t.Fatalf("second server on port %d: %v, want ErrListenInUse", port, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %s", took)
	}
	for _, want := range []string{"fixpoint worker", natsaddr.AbsDir(dirA), "127.0.0.1:5432/a", "--nats-listen", "FIXPOINT_NATS_LISTEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := l.Addr().(*net.TCPAddr).Port
	_, err = StartServer(ServerConfig{StoreDir: t.TempDir(), Port: other})
	if !errors.Is(err, ErrListenInUse) || !strings.Contains(err.Error(), "another program") {
		t.Errorf("a port another program holds: %v, want ErrListenInUse naming another program", err)
	}
}

func TestServerNameRoundTrip(t *testing.T) {
	t.Parallel()
	id := natsaddr.Identity{Dir: "/home/a b/.fixpoint/nats", Ledger: "db.example:5432/fix point"}
	name := id.ServerName()
	if strings.ContainsAny(name, " \t") {
		t.Fatalf("server name %q holds a space (NATS refuses it)", name)
	}
	got, ok := natsaddr.ParseServerName(name)
	if !ok || got != id {
		t.Errorf("ParseServerName(%q) = %+v, %v; want %+v", name, got, ok, id)
	}
	if _, ok := natsaddr.ParseServerName("fixpoint-embedded"); ok {
		t.Error("a name without an identity was read as one")
	}
}
