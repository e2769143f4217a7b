// Package storetest gives integration tests a fresh, migrated Postgres
// database of their own.
//
// The first call in a process builds (or reuses) a template database named
// after a hash of the embedded migrations, under an advisory lock so that
// parallel test binaries build it once; every NewDB then clones it with
// CREATE DATABASE ... TEMPLATE (a few milliseconds) and drops the clone in
// t.Cleanup. A test that failed keeps its database and logs its URL.
//
// The server comes from TEST_DATABASE_URL (default DefaultURL). When it is
// unreachable the test fails with a clear message; only `go test -short`
// skips.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/migrations"
	"github.com/fixpoint-dev/fixpoint/store"
)

// DefaultURL is the server used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLock is the advisory lock key serializing template builds.
const templateLock = 0x66697870 // "fixp"

// URL returns TEST_DATABASE_URL, or DefaultURL when it is unset.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	tmplMu   sync.Mutex
	tmplName string
)

// NewDB returns the URL of a fresh database holding the full schema and no
// data, dropped when the test ends (kept, with its URL logged, if the test
// failed). It skips under -short and fails when Postgres is unreachable.
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
	name := "fixpoint_test_" + randomHex(6)
	if err := exec(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		t.Fatalf("storetest: create database %s on %s: %v\n"+
			"(is Postgres running? set TEST_DATABASE_URL, or run go test -short to skip integration tests)", name, redact(admin), err)
	}
	dsn, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("storetest: kept database of failed test: %s", redact(dsn))
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
	name = "fixpoint_test_missing_" + randomHex(6)
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
	if tmplName != "" {
		return tmplName, nil
	}
	h, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "fixpoint_tmpl_" + h
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
		rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'fixpoint_tmpl_%_build'")
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
	tmplName = name
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
