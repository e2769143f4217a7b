package natsconn

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
)

// checkListen fails with ErrListenInUse when host:port is taken, saying
// by what (another fixpoint setup's embedded server, another NATS server,
// another program) and which address is free instead. Port 0 (no
// listener) and -1 (any free port) are never taken.
func checkListen(host string, port int) error {
	if port <= 0 {
		return nil
	}
	if host == "" {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err == nil {
		l.Close()
		return nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("embedded nats: listen on %s: %w", addr, err)
	}
	how := "choose another address with --nats-listen or FIXPOINT_NATS_LISTEN"
	if free := freeNear(host, port); free != "" {
		how += " (" + free + " is free)"
	}
	how += ", and give enqueue the same FIXPOINT_NATS_LISTEN"
	return fmt.Errorf("%w: %s is taken by %s: %s", ErrListenInUse, addr, holder(addr), how)
}

// holder says what listens at addr: a NATS server greets a client with an
// INFO line naming itself.
func holder(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "another program"
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	info, ok := strings.CutPrefix(line, "INFO ")
	if err != nil || !ok {
		return "another program"
	}
	var v struct {
		Name string `json:"server_name"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(info)), &v) != nil {
		return "another program"
	}
	if id, ok := natsaddr.ParseServerName(v.Name); ok {
		return "the embedded NATS of another fixpoint worker (" + id.String() + ")"
	}
	return fmt.Sprintf("a NATS server (named %q) that is not a fixpoint worker's", v.Name)
}

// freeNear is the first free address after port on host, "" when none
// of the next few is.
func freeNear(host string, port int) string {
	for p := port + 1; p <= port+20 && p < 65536; p++ {
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	return ""
}
