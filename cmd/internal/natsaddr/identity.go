package natsaddr

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// identityPrefix begins the server name of a fixpoint embedded server.
const identityPrefix = "fixpoint-embedded"

// Identity says whose queue an embedded server serves: its store
// directory and the ledger its worker records to. Two setups on one
// machine that keep the default listen address would otherwise reach each
// other's server; a client compares the identity the server announces with
// its own before it publishes.
type Identity struct {
	// Dir is the store directory, absolute.
	Dir string
	// Ledger names the worker's database without credentials
	// (host:port/name); "" when the server was started without one.
	Ledger string
}

// NewIdentity is the identity of the queue in dir recorded to ledger,
// with dir made absolute so that relative paths from two working
// directories compare as the places they are.
func NewIdentity(dir, ledger string) Identity {
	return Identity{Dir: AbsDir(dir), Ledger: ledger}
}

// AbsDir is dir absolute, cleaned and with symbolic links resolved when it
// exists.
func AbsDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Clean(dir)
}

// ServerName is the identity as a NATS server name (which may hold no
// spaces): the prefix and the query-escaped fields.
func (id Identity) ServerName() string {
	v := url.Values{}
	v.Set("dir", id.Dir)
	if id.Ledger != "" {
		v.Set("ledger", id.Ledger)
	}
	return identityPrefix + "?" + v.Encode()
}

// ParseServerName reads a server name ServerName wrote; ok is false for
// any other server's name.
func ParseServerName(name string) (id Identity, ok bool) {
	rest, found := strings.CutPrefix(name, identityPrefix+"?")
	if !found {
		return Identity{}, false
	}
	v, err := url.ParseQuery(rest)
	if err != nil || v.Get("dir") == "" {
		return Identity{}, false
	}
	return Identity{Dir: v.Get("dir"), Ledger: v.Get("ledger")}, true
}

// String says the identity for a message.
func (id Identity) String() string {
	if id.Ledger == "" {
		return "queue directory " + id.Dir
	}
	return fmt.Sprintf("queue directory %s, ledger %s", id.Dir, id.Ledger)
}

// Mismatch says how the server's identity differs from want's, "" when
// it is the same queue: the same directory, and the same ledger when both
// name one. Ledgers compare by port and database, not host: one server
// is reached as localhost by one command and 127.0.0.1 (or its name) by
// another, and refusing those would stop a setup that is right.
func (id Identity) Mismatch(want Identity) string {
	switch {
	case id.Dir != want.Dir:
		return fmt.Sprintf("it serves the queue directory %s, not %s", id.Dir, want.Dir)
	case id.Ledger != "" && want.Ledger != "" && ledgerKey(id.Ledger) != ledgerKey(want.Ledger):
		return fmt.Sprintf("its worker records to the ledger %s, not %s", id.Ledger, want.Ledger)
	}
	return ""
}

// ledgerKey is a ledger name (host:port/database) without its host.
func ledgerKey(ledger string) string {
	// The host may be a socket directory: the database follows the last
	// slash.
	addr, db := ledger, ""
	if i := strings.LastIndexByte(ledger, '/'); i >= 0 {
		addr, db = ledger[:i], ledger[i+1:]
	}
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		addr = addr[i+1:]
	}
	return addr + "/" + db
}
