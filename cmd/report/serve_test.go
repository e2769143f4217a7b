package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
)

func TestLoopbackAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8090": true, "localhost:1": true, "[::1]:8090": true, "127.9.9.9:80": true,
		"0.0.0.0:8090": false, ":8090": false, "[::]:8090": false, "10.0.0.1:80": false, "example.org:80": false,
	} {
		got, err := loopbackAddr(addr)
		if err != nil || got != want {
			t.Errorf("loopbackAddr(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	for _, bad := range []string{"8090", "127.0.0.1:", ""} {
		if _, err := loopbackAddr(bad); err == nil {
			t.Errorf("loopbackAddr(%q): no error", bad)
		}
	}
}

// A non-loopback address without a token is a usage error, before the
// ledger is reached.
func TestServeRefusesPublicAddrWithoutToken(t *testing.T) {
	t.Setenv("FIXPOINT_ADMIN_TOKEN", "")
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.0.2.1:80"} {
		var out, errOut strings.Builder
		code := run(context.Background(), []string{"serve", "--addr", addr, "--database-url", "postgres://nobody@127.0.0.1:1/none"}, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "admin token") {
			t.Errorf("serve --addr %s: exit %d, %q; want 2 asking for an admin token", addr, code, errOut.String())
		}
	}
}

// A blank, padded or short admin token is a usage error naming where it
// came from and the minimum, before the ledger is reached.
func TestServeRefusesWeakToken(t *testing.T) {
	for _, c := range []struct{ flag, env, want string }{
		{flag: " ", want: "the admin token (--admin-token) is blank"},
		{flag: "x", want: "the admin token (--admin-token) is 1 character long: give at least 16"},
		{flag: "0123456789abcde", want: "(--admin-token) is 15 characters long: give at least 16"},
		{env: "                ", want: "the admin token (FIXPOINT_ADMIN_TOKEN) is blank"},
		{env: "0123456789abcdef\n", want: "the admin token (FIXPOINT_ADMIN_TOKEN) starts or ends with white space"},
		{env: "short", want: "(FIXPOINT_ADMIN_TOKEN) is 5 characters long: give at least 16"},
	} {
		t.Setenv("FIXPOINT_ADMIN_TOKEN", c.env)
		args := []string{"serve", "--addr", "127.0.0.1:0", "--database-url", "postgres://nobody@127.0.0.1:1/none"}
		if c.flag != "" {
			args = append(args, "--admin-token", c.flag)
		}
		var out, errOut strings.Builder
		code := run(context.Background(), args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("token %q (env %q): exit %d, %q; want 2 saying %q", c.flag, c.env, code, errOut.String(), c.want)
		}
	}
}

func TestServeRefusesBadClientStreams(t *testing.T) {
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"serve", "--client-streams", "0", "--database-url", "postgres://nobody@127.0.0.1:1/none"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--client-streams 0: give 1 or more") {
		t.Errorf("serve --client-streams 0: exit %d, %q; want 2", code, errOut.String())
	}
}

// startServe runs report serve until ctx ends and returns the URL it
// prints.
func startServe(t *testing.T, ctx context.Context, args ...string) (string, chan int) {
	t.Helper()
	out, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), out, errOut) }()
	select {
	case <-out.Written("dashboard at "): // the line is written whole
	case code := <-done:
		t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve printed no address in 30 s: %s %s", out.String(), errOut.String())
	}
	m := regexp.MustCompile(`dashboard at (http://\S+/)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("serve printed no address: %s %s", out.String(), errOut.String())
	}
	return m[1], done
}

func TestServe(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := startServe(t, ctx, "--addr", "127.0.0.1:0", "--database-url", dsn)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "b1") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /: %d, CSP %q\n%s", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), body)
	}
	// A live stream is open (b1 has a queued job) when the signal comes:
	// the stop does not wait for it.
	stream, err := http.Get(url + "batches/b1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("stream: %d", stream.StatusCode)
	}
	start := time.Now()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve stopped with exit %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10 s of the signal")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the stop took %s with a stream open", took)
	}
}

// testAdminToken is an admin token report serve takes.
const testAdminToken = "s3cret-s3cret-s3cret"

func TestServeWithToken(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := startServe(t, ctx, "--addr", "127.0.0.1:0", "--database-url", dsn, "--admin-token", testAdminToken)
	for _, c := range []struct {
		user, pass string
		want       int
	}{{"", "", 401}, {"admin", "wrong", 401}, {"anyone", testAdminToken, 200}} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if c.pass != "" {
			req.SetBasicAuth(c.user, c.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("password %q: %d, want %d", c.pass, resp.StatusCode, c.want)
		}
	}
	cancel()
	<-done
}
