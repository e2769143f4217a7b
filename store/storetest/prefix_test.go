package storetest

import (
	"context"
	"fmt"
	"os"
	oexec "os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func dbExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func dropNow(t *testing.T, name string) {
	t.Helper()
	if err := exec(context.Background(), URL(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Error(err)
	}
}

// uniquePrefix is a prefix no other run uses.
func uniquePrefix(tag string) string { return "fptest_" + tag + "_" + randomHex(3) + "_" }

// NewDB names its database under TEST_DATABASE_PREFIX, and builds the
// template under it too: two runs given different prefixes share nothing.
func TestNewDBUnderPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	prefix := uniquePrefix("p")
	t.Setenv("TEST_DATABASE_PREFIX", prefix)
	t.Cleanup(func() {
		if tmpl := tmplNames[prefix]; tmpl != "" {
			dropNow(t, tmpl)
		}
	})
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := NewDB(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.HasPrefix(name, prefix) {
		t.Fatalf("NewDB under TEST_DATABASE_PREFIX=%s made %s", prefix, name)
	}
	if tmpl := tmplNames[prefix]; !strings.HasPrefix(tmpl, prefix) {
		t.Errorf("the template %q is not under the prefix %s", tmpl, prefix)
	}
	if dbExists(t, name) {
		t.Errorf("database %s still exists after its test ended", name)
	}
	t.Setenv("TEST_DATABASE_PREFIX", "Bad-Prefix")
	f := &recTB{TB: t}
	f.run(func() { NewDB(f) })
	if !strings.Contains(f.fatal, "TEST_DATABASE_PREFIX") {
		t.Errorf("a prefix that is no identifier: %q, want a failure naming TEST_DATABASE_PREFIX", f.fatal)
	}
}

// A failed test's database is dropped too (a run leaves none behind),
// unless TEST_KEEP_FAILED_DB asks to keep it.
func TestFailedTestsDatabaseIsDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	for _, keep := range []bool{false, true} {
		v := ""
		if keep {
			v = "1"
		}
		t.Setenv("TEST_KEEP_FAILED_DB", v)
		f := &recTB{TB: t, failed: true}
		var dsn string
		f.run(func() { dsn = NewDB(f) })
		if f.fatal != "" {
			t.Fatal(f.fatal)
		}
		name := dbName(t, dsn)
		f.cleanup()
		if got := dbExists(t, name); got != keep {
			t.Errorf("TEST_KEEP_FAILED_DB=%q: a failed test's database exists after cleanup: %v, want %v", v, got, keep)
		}
		dropNow(t, name)
	}
}

// Sweep drops what a dead process of this host left under its own prefix,
// and nothing else: not another prefix's, not a live process's.
func TestSweepDropsOnlyItsOwnDeadRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	cmd := oexec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	if alive(dead) {
		t.Skipf("pid %d was reused at once", dead)
	}
	a, b := uniquePrefix("a"), uniquePrefix("b")
	mk := func(prefix string, pid int) string {
		name := fmt.Sprintf("%s%s_%d_%s", prefix, hostTag(), pid, randomHex(6))
		if err := exec(ctx, URL(), "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dropNow(t, name) })
		return name
	}
	deadA, liveA, deadB := mk(a, dead), mk(a, os.Getpid()), mk(b, dead)
	otherHost := a + "ffffff_" + fmt.Sprint(dead) + "_" + randomHex(6)
	if hostTag() == "ffffff" {
		otherHost = a + "eeeeee_" + fmt.Sprint(dead) + "_" + randomHex(6)
	}
	if err := exec(ctx, URL(), "CREATE DATABASE "+otherHost+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNow(t, otherHost) })

	dropped, err := Sweep(ctx, URL(), a)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0] != deadA {
		t.Errorf("Sweep(%s) dropped %v, want only %s", a, dropped, deadA)
	}
	for name, want := range map[string]bool{deadA: false, liveA: true, deadB: true, otherHost: true} {
		if got := dbExists(t, name); got != want {
			t.Errorf("after Sweep(%s): %s exists %v, want %v", a, name, got, want)
		}
	}
	if dropped, err := Sweep(ctx, URL(), b); err != nil || len(dropped) != 1 || dropped[0] != deadB {
		t.Errorf("Sweep(%s) = %v, %v; want [%s]", b, dropped, err, deadB)
	}
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// recTB records Fatalf and the cleanups instead of running them with the
// real test; failed makes Failed report a failed test.
type recTB struct {
	testing.TB
	failed   bool
	fatal    string
	cleanups []func()
}

func (f *recTB) Helper()             {}
func (f *recTB) Failed() bool        { return f.failed }
func (f *recTB) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *recTB) Logf(string, ...any) {}
func (f *recTB) Errorf(format string, args ...any) {
	f.TB.Errorf(format, args...)
}
func (f *recTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run runs fn in a goroutine of its own, so Fatalf ends only it.
func (f *recTB) run(fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	<-done
}

func (f *recTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}
