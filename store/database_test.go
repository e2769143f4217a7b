package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func TestEnsureDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	dsn, _ := storetest.MissingDB(t)
	for i := range 2 { // the second call finds it and does nothing
		created, err := store.EnsureDatabase(ctx, dsn)
		if err != nil || created != (i == 0) {
			t.Fatalf("EnsureDatabase #%d: created %v, %v; want created the first time only", i+1, created, err)
		}
	}
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate the ensured database: %v", err)
	}
}

func TestResetDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	dsn, _ := storetest.MissingDB(t)
	if err := store.ResetDatabase(ctx, dsn); err != nil { // creates it when missing
		t.Fatalf("ResetDatabase on a missing database: %v", err)
	}
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSchema(ctx, []byte(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := store.ResetDatabase(ctx, dsn); err != nil {
		t.Fatalf("ResetDatabase: %v", err)
	}
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Counts(ctx, ""); err != nil || c.Jobs != 0 {
		t.Fatalf("after a reset: counts %+v, %v; want an empty ledger", c, err)
	}
	if _, err := st.Schema(ctx, "anything"); err == nil {
		t.Errorf("a schema survived the reset")
	}
	if err := store.ResetDatabase(ctx, storetest.URL()); !errors.Is(err, store.ErrNotScratch) {
		t.Errorf("ResetDatabase of the postgres database: %v, want ErrNotScratch", err)
	}
}

// ResetDatabase drops only what it created or an empty database: a
// --database-url naming a real ledger is refused, its rows kept (the bench
// wiped one that held twelve batches).
func TestResetDatabaseKeepsALedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.NewDB(t) // created and migrated by the tests, not marked
	// A ledger with no batch yet may be someone's, migrated for use.
	if err := store.ResetDatabase(ctx, dsn); !errors.Is(err, store.ErrNotScratch) {
		t.Fatalf("ResetDatabase of a migrated ledger with no batch: %v, want ErrNotScratch", err)
	}
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutBatch(ctx, store.BatchParams{Name: "bench-one-1", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	err = store.ResetDatabase(ctx, dsn)
	if !errors.Is(err, store.ErrNotScratch) || !strings.Contains(err.Error(), "tables, and the bench drops and recreates its database") {
		t.Fatalf("ResetDatabase of a ledger with a batch: %v, want ErrNotScratch saying why", err)
	}
	if _, err := st.Summary(ctx, "bench-one-1"); err != nil {
		t.Fatalf("the ledger after the refused reset: %v", err)
	}
}

func TestClaimDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	// A claim is an advisory lock keyed by the database name: the
	// databases need not exist.
	claimURL := func(name string) string {
		dsn, err := storetest.WithDatabase(storetest.URL(), fmt.Sprintf("fixpoint_test_%s_%d", name, time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		return dsn
	}
	dsn := claimURL("claim")
	release, err := store.ClaimDatabase(ctx, dsn)
	if err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if _, err := store.ClaimDatabase(ctx, dsn); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("second claim while the first holds: %v, want ErrBusy", err)
	}
	// Another database is not affected.
	releaseOther, err := store.ClaimDatabase(ctx, claimURL("claim_other"))
	if err != nil {
		t.Fatalf("claim of another database: %v", err)
	}
	releaseOther()
	release()
	again, err := store.ClaimDatabase(ctx, dsn)
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	again()
}
