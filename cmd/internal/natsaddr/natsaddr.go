// Package natsaddr reads where the queue is without linking the NATS
// server: a NATS URL checked as nats.Connect will read it, and the address
// a worker's embedded server writes into its directory's lock file. report
// uses it (it must not carry the server); natsconn builds on it.
package natsaddr

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DirDefault is the embedded queue's directory when none is given.
const DirDefault = ".fixpoint/nats"

// LockFile is the file in an embedded queue's directory its server holds
// locked, holding the URL it listens on.
const LockFile = "fixpoint.lock"

// ErrBadURL is wrapped by CheckURL's errors.
var ErrBadURL = errors.New("bad NATS URL")

// CheckURL checks a NATS URL (or a comma-separated list) as nats.Connect
// will read it: each must name a host, with the scheme nats, tls, ws or
// wss, or none (host:port). nats.Connect fills in what is missing from
// the defaults, so "garbage://" reached the server at 127.0.0.1:4222.
func CheckURL(s string) error {
	for _, one := range strings.Split(s, ",") {
		one = strings.TrimSpace(one)
		raw := one
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			return fmt.Errorf("%w %q: %w", ErrBadURL, one, err)
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			return fmt.Errorf("%w %q: scheme %q is not nats, tls, ws or wss", ErrBadURL, one, u.Scheme)
		case u.Hostname() == "":
			return fmt.Errorf("%w %q: it names no host", ErrBadURL, one)
		}
	}
	return nil
}

// RunningURL is where the server holding dir listens, as its lock file
// says; "" when none is written (no server, or one that does not listen).
func RunningURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		return ""
	}
	u := strings.TrimSpace(string(b))
	if !strings.HasPrefix(u, "nats://") || CheckURL(u) != nil {
		return ""
	}
	return u
}
