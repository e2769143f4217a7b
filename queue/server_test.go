package queue_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serverJS starts an embedded server on dir (its warnings to warn, when
// set) for the test, and returns a JetStream client of it.
func serverJS(t *testing.T, dir string, warn io.Writer) jetstream.JetStream {
	t.Helper()
	ns, err := server.NewServer(&server.Options{ServerName: "fixpoint-queue-test", JetStream: true, StoreDir: dir,
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	if warn != nil {
		ns.SetLogger(warnLogger{warn}, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		t.Fatal(errors.New("test NATS server not ready after 15s"))
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// warnLogger writes a NATS server's warnings and errors, one a line.
type warnLogger struct{ w io.Writer }

func (l warnLogger) Noticef(string, ...any) {}
func (l warnLogger) Debugf(string, ...any)  {}
func (l warnLogger) Tracef(string, ...any)  {}
func (l warnLogger) Warnf(format string, v ...any) {
	fmt.Fprintf(l.w, "WARN "+format+"\n", v...)
}
func (l warnLogger) Errorf(format string, v ...any) {
	fmt.Fprintf(l.w, "ERROR "+format+"\n", v...)
}
func (l warnLogger) Fatalf(format string, v ...any) {
	fmt.Fprintf(l.w, "FATAL "+format+"\n", v...)
}
