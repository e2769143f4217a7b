package pipeline_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpProxy stands between the worker and Postgres so a test can cut the
// database away (every connection closed, new ones refused) or slow it down
// (a delay before each chunk the server sends), without touching the
// machine's Postgres that other tests use.
type tcpProxy struct {
	ln       net.Listener
	target   string
	down     atomic.Bool
	latency  atomic.Int64 // nanoseconds added before each server->client chunk
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
	accepted atomic.Int64
}

func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		p.accepted.Add(1)
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, up)
		p.wg.Add(2)
		go p.pipe(up, c, false)
		go p.pipe(c, up, true)
	}
}

func (p *tcpProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

// pipe copies src to dst; slow marks the server-to-client direction.
func (p *tcpProxy) pipe(dst, src net.Conn, slow bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); slow && d > 0 {
				time.Sleep(d) // the injected fault, not synchronization
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// cut closes every connection and refuses new ones until restore.
func (p *tcpProxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) restore() { p.down.Store(false) }

func (p *tcpProxy) setLatency(d time.Duration) { p.latency.Store(int64(d)) }

func (p *tcpProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// pgProxy is a proxy to Postgres that a harness starts for its workers
// (harnessConfig.DSN: p.dsn(t)) and the test then cuts or slows.
type pgProxy struct{ *tcpProxy }

func (p *pgProxy) dsn(t testing.TB) func(direct string) string {
	return func(direct string) string {
		p.tcpProxy = startProxy(t, "127.0.0.1:5432")
		return strings.Replace(direct, "127.0.0.1:5432", p.addr(), 1)
	}
}
