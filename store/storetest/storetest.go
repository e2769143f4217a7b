// Package storetest gives integration tests a fresh, migrated Postgres
// database of their own.
//
// The first call in a process builds (or reuses) a template database named
// after a hash of the embedded migrations, under an advisory lock so that
// parallel test binaries build it once; every NewDB then clones it with
// CREATE DATABASE ... TEMPLATE (a few milliseconds) and drops the clone in
// t.Cleanup, whether the test passed or failed (TEST_KEEP_FAILED_DB=1 keeps
// a failed test's database and logs its URL).
//
// The server comes from TEST_DATABASE_URL (default DefaultURL). When it is
// unreachable the test fails with a clear message; only `go test -short`
// skips.
//
// Every database a test gets is named TEST_DATABASE_PREFIX (default
// DefaultPrefix), this host's tag, the test process's id and a random
// suffix, so runs sharing a server never touch each other's databases:
// a run drops what it made, and the first NewDB of a process drops only
// databases under its own prefix made on this host by a process no longer
// alive (a run that crashed). The template is kept, under the prefix, for
// the next run.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/migrations"
	"github.com/fixpoint-dev/fixpoint/store"
)

// DefaultURL is the server used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DefaultPrefix begins test databases' names when TEST_DATABASE_PREFIX is
// unset.
const DefaultPrefix = "fixpoint_test_"

// templateLock is the advisory lock key serializing template builds.
const templateLock = 0x66697870 // "fixp"

// URL returns TEST_DATABASE_URL, or DefaultURL when it is unset.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Prefix returns TEST_DATABASE_PREFIX, or DefaultPrefix when it is unset.
func Prefix() string {
	if p := os.Getenv("TEST_DATABASE_PREFIX"); p != "" {
		return p
	}
	return DefaultPrefix
}

// validPrefix is what a prefix may be: the start of an unquoted
// identifier, short enough to leave room for the rest of the name.
var validPrefix = regexp.MustCompile(`^[a-z][a-z0-9_]{0,29}$`)

func checkPrefix(p string) error {
	if !validPrefix.MatchString(p) {
		return fmt.Errorf("TEST_DATABASE_PREFIX %q: want 1 to 30 lower-case letters, digits and '_', starting with a letter", p)
	}
	return nil
}

// hostTag tells this host's databases from another's on a shared server:
// a process id means something only on its own host.
var hostTag = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:])[:6]
})

// newName is a fresh database name under prefix: the host's tag, this
// process's id and a random suffix.
func newName(prefix string) string {
	return fmt.Sprintf("%s%s_%d_%s", prefix, hostTag(), os.Getpid(), randomHex(6))
}

// ownerPID returns the process id in a name newName made under prefix on
// this host; ok is false for any other name.
func ownerPID(prefix, name string) (pid int, ok bool) {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix+hostTag()) + `_([0-9]+)_[0-9a-f]{12}$`)
	m := re.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, err == nil
}

// alive reports whether a process pid runs on this host.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Sweep drops the databases under prefix that a process on this host made
// and that process is gone (a crashed run left them); any other database,
// another prefix's, another host's, a live run's, is left alone. It
// returns the names dropped.
func Sweep(ctx context.Context, admin, prefix string) ([]string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", prefix)
	if err != nil {
		return nil, fmt.Errorf("list test databases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list test databases: %w", err)
	}
	var dropped []string
	for _, n := range names {
		pid, ok := ownerPID(prefix, n)
		if !ok || alive(pid) {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
			return dropped, fmt.Errorf("drop %s: %w", n, err)
		}
		dropped = append(dropped, n)
	}
	return dropped, nil
}

var (
	tmplMu sync.Mutex
	// tmplNames holds the template built in this process, by prefix.
	tmplNames = map[string]string{}
)

// NewDB returns the URL of a fresh database holding the full schema and no
// data, dropped when the test ends (a failed test's is kept, with its URL
// logged, only under TEST_KEEP_FAILED_DB). It skips under -short and fails when Postgres is unreachable.
func NewDB(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("storetest: integration test needs Postgres; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tmpl, err := template(ctx, URL())
	if err != nil {
		t.Fatalf("storetest: prepare template database on %s: %v\n"+
			"(is Postgres running? set TEST_DATABASE_URL, or run go test -short to skip integration tests)", redact(URL()), err)
	}
	return newDB(t, tmpl)
}

func newDB(t testing.TB, tmpl string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("storetest: integration test needs Postgres; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := URL()
	prefix := Prefix()
	if err := checkPrefix(prefix); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name := newName(prefix)
	if err := exec(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("storetest: create database %s on %s: %v\n"+
			"(is Postgres running? set TEST_DATABASE_URL, or run go test -short to skip integration tests)", name, redact(admin), err)
	}
	dsn, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("TEST_KEEP_FAILED_DB") != "" {
			t.Logf("storetest: kept database of failed test (TEST_KEEP_FAILED_DB): %s", redact(dsn))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	return dsn
}

// MissingDB returns the URL of a database that does not exist, for a test
// of what creates one, and its name; whatever created it is dropped when
// the test ends. It skips under -short.
func MissingDB(t testing.TB) (dsn, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("storetest: integration test needs Postgres; skipped with -short")
	}
	prefix := Prefix()
	if err := checkPrefix(prefix); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name = newName(prefix)
	dsn, err := WithDatabase(URL(), name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, URL(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	return dsn, name
}

// NewEmptyDB returns the URL of a fresh database with no tables at all (not
// migrated), dropped when the test ends; for testing migrations themselves.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	return newDB(t, "template0")
}

// NewStore opens a Store (small pool) on a fresh database from NewDB and
// closes it when the test ends.
func NewStore(t testing.TB) *store.Store {
	t.Helper()
	dsn := NewDB(t)
	s, err := store.Open(context.Background(), dsn, &store.Config{MaxConns: 4})
	if err != nil {
		t.Fatalf("storetest: open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// WithDatabase returns dsn (URL or key=value form) pointing at database name.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse database url: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

// template returns the name of the migrated template database, building it
// on first use.
func template(ctx context.Context, admin string) (string, error) {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	prefix := Prefix()
	if err := checkPrefix(prefix); err != nil {
		return "", err
	}
	if name := tmplNames[prefix]; name != "" {
		return name, nil
	}
	h, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := prefix + "tmpl_" + h
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLock) //nolint:errcheck // closing the session unlocks too
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if !exists {
		// Builds left over by a crashed run are unfinished: nobody else
		// builds while we hold the lock.
		rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND right(datname, 6) = '_build'", prefix+"tmpl_")
		if err != nil {
			return "", fmt.Errorf("list stale templates: %w", err)
		}
		stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("list stale templates: %w", err)
		}
		for _, s := range stale {
			if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", s)); err != nil {
				return "", fmt.Errorf("drop stale template %s: %w", s, err)
			}
		}
		build := name + "_build"
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+build); err != nil {
			return "", fmt.Errorf("create template: %w", err)
		}
		dsn, err := WithDatabase(admin, build)
		if err != nil {
			return "", err
		}
		if err := store.Migrate(ctx, dsn); err != nil {
			return "", fmt.Errorf("migrate template: %w", err)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", build, name)); err != nil {
			return "", fmt.Errorf("rename template: %w", err)
		}
	}
	// What a crashed run of this host left under the prefix; under the
	// lock, so one process of a run sweeps at a time.
	if _, err := Sweep(ctx, admin, prefix); err != nil {
		return "", fmt.Errorf("sweep: %w", err)
	}
	tmplNames[prefix] = name
	return name, nil
}

// migrationsHash hashes the names and contents of the embedded migrations.
func migrationsHash() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", fmt.Errorf("read migration %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides a password in a URL for logging.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
