package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A worker that creates its database says so: a typo in DATABASE_URL's
// database name made a new, empty ledger without a word, and the worker
// then found none of enqueue's jobs. One whose database exists says
// nothing.
func TestOpenStoreSaysItCreatedTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := fmt.Sprintf("fixpoint_test_created_%d", time.Now().UnixNano())
	dsn, err := storetest.WithDatabase(storetest.URL(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), storetest.URL())
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	for i, want := range []bool{true, false} {
		var logs bytes.Buffer
		st, err := openStore(ctx, dsn, true, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if said := strings.Contains(logs.String(), "created the database") && strings.Contains(logs.String(), name); said != want {
			t.Errorf("open #%d: said it created the database %v, want %v:\n%s", i+1, said, want, logs.String())
		}
	}
}
