package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A worker that creates its database says so: a typo in DATABASE_URL's
// database name made a new, empty ledger without a word, and the worker
// then found none of enqueue's jobs. One whose database exists says
// nothing.
func TestOpenStoreSaysItCreatedTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, name := storetest.MissingDB(t)
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
