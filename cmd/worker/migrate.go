package main

import (
	"context"
	"fmt"
	"io"
)

const migrateUsage = `Usage: worker migrate [flags]

Creates the ledger database if it does not exist and applies the embedded
migrations under an advisory lock, so several workers may start at once.
The worker also migrates at start; this command is for an init job.

  worker migrate --database-url postgres://fixpoint@db:5432/fixpoint   (an init container, before the workers)

Exit status: 0 migrated (or already up to date), 1 failed, 2 bad usage.`

// migrateCommand is worker migrate.
type migrateCommand struct{ stdout io.Writer }

func (c *migrateCommand) Run(ctx context.Context, args []string) error {
	stdout := c.stdout
	fs := newFlagSet("worker migrate", migrateUsage, "  DATABASE_URL  Postgres ledger (default "+databaseURLDefault+")", stdout)
	dbURL := fs.String("database-url", env("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	st, err := openStore(ctx, *dbURL, true, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, known, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ledger at migration %d of %d\n", applied, known)
	return nil
}
