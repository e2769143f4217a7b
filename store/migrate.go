package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"

	"github.com/fixpoint-dev/fixpoint/migrations"
)

// VersionTable is the table in which tern records the applied migration
// version.
const VersionTable = "public.fixpoint_ledger_version"

// unreleasedVersionTable is where builds before v0.1.0 recorded theirs.
// Their migrations were squashed into one baseline, so a ledger that has
// this table cannot be migrated: it is refused with ErrUnreleasedLedger.
const unreleasedVersionTable = "public.fixpoint_schema_version"

// ErrUnreleasedLedger is returned by Migrate, MigrateTo and SchemaVersion
// for a ledger made by a build before v0.1.0, which no release reads.
var ErrUnreleasedLedger = errors.New("the ledger at DATABASE_URL was made by an unreleased build of fixpoint (before v0.1.0) and must be recreated: drop the database and run worker migrate")

// querier is what checkReleased needs of a connection or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkReleased returns ErrUnreleasedLedger when the database holds the
// version table of an unreleased build.
func checkReleased(ctx context.Context, q querier) error {
	var unreleased bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", unreleasedVersionTable).Scan(&unreleased); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if unreleased {
		return ErrUnreleasedLedger
	}
	return nil
}

// Migrate applies every pending migration of migrations.FS to the database at
// dsn, each in its own transaction, under a session advisory lock held for
// the whole run: concurrent callers wait and then find nothing to do. It is
// safe to call any number of times. A ledger made by an unreleased build is
// refused with ErrUnreleasedLedger, and left as it is.
func Migrate(ctx context.Context, dsn string) error {
	if err := namesDatabase(dsn); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect for migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrateConn(ctx, conn)
}

// MigrateTo moves the database at dsn to migration version (0 = no tables;
// the number of files in migrations.FS = latest), running down migrations
// when version is below the current one. Like Migrate it holds the advisory
// lock. Down migrations drop data: meant for development and tests.
func MigrateTo(ctx context.Context, dsn string, version int) error {
	if err := namesDatabase(dsn); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect for migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkReleased(ctx, conn); err != nil {
		return err
	}
	m, err := migrator(ctx, conn)
	if err != nil {
		return err
	}
	if err := m.MigrateTo(ctx, int32(version)); err != nil {
		return fmt.Errorf("migrate to version %d: %w", version, err)
	}
	return nil
}

// Migrate applies pending migrations using one connection of s's pool; see
// the package-level Migrate.
func (s *Store) Migrate(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection for migrate: %w", err)
	}
	defer c.Release()
	return migrateConn(ctx, c.Conn())
}

// SchemaVersion returns the number of migrations applied and the number the
// binary knows; they are equal after Migrate. A ledger made by an
// unreleased build is ErrUnreleasedLedger.
func (s *Store) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	m, err := migrate.NewMigrator(ctx, nil, VersionTable)
	if err != nil {
		return 0, 0, fmt.Errorf("create migrator: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return 0, 0, fmt.Errorf("load migrations: %w", err)
	}
	if err := checkReleased(ctx, s.pool); err != nil {
		return 0, len(m.Migrations), err
	}
	var v int32
	err = s.pool.QueryRow(ctx, "SELECT version FROM "+VersionTable).Scan(&v)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
		return 0, len(m.Migrations), nil // no version table: never migrated
	}
	if err != nil {
		return 0, len(m.Migrations), fmt.Errorf("read schema version: %w", err)
	}
	return int(v), len(m.Migrations), nil
}

func migrator(ctx context.Context, conn *pgx.Conn) (*migrate.Migrator, error) {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("create migrator: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return m, nil
}

func migrateConn(ctx context.Context, conn *pgx.Conn) error {
	if err := checkReleased(ctx, conn); err != nil {
		return err
	}
	m, err := migrator(ctx, conn)
	if err != nil {
		return err
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}
