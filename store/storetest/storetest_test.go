package storetest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func TestNewDBIsFreshMigratedAndDropped(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := storetest.NewDB(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var jobs int
		if err := conn.QueryRow(context.Background(), "SELECT current_database(), (SELECT count(*) FROM jobs)").Scan(&name, &jobs); err != nil {
			t.Fatalf("query fresh database: %v", err)
		}
		if jobs != 0 || !strings.HasPrefix(name, "fixpoint_test_") {
			t.Fatalf("database %s has %d jobs, want an empty fixpoint_test_ database", name, jobs)
		}
		if _, err := conn.Exec(context.Background(), "INSERT INTO batches (name) VALUES ('x')"); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(context.Background(), storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

// fakeTB records Fatalf and Skip instead of ending the real test.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Skip(args ...any) { f.mu.Lock(); f.skipped = true; f.mu.Unlock(); runtime.Goexit() }

// Without a server NewDB fails the test with a hint, never skips it
// (except under -short).
func TestNewDBUnreachableFails(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); storetest.NewDB(f) }()
	<-done
	if testing.Short() {
		if !f.skipped {
			t.Fatal("NewDB under -short did not skip")
		}
		return
	}
	if f.skipped || !strings.Contains(f.fatal, "is Postgres running") || !strings.Contains(f.fatal, "127.0.0.1:1") {
		t.Fatalf("NewDB on an unreachable server: skipped=%v fatal=%q, want a failure naming the server", f.skipped, f.fatal)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, dsn, want string
	}{
		{name: "url", dsn: "postgres://u@h:5432/postgres?sslmode=disable", want: "postgres://u@h:5432/other?sslmode=disable"},
		{name: "postgresql url", dsn: "postgresql://h/db", want: "postgresql://h/other"},
		{name: "key value", dsn: "host=h user=u", want: "host=h user=u dbname=other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := storetest.WithDatabase(tt.dsn, "other")
			if err != nil || got != tt.want {
				t.Fatalf("WithDatabase = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
