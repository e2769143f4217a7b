package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnsureDatabase creates the database named in dsn when it does not exist,
// connecting to the server's "postgres" database to do so. It lets the demo
// and a first `worker migrate` run on a fresh server.
func EnsureDatabase(ctx context.Context, dsn string) (created bool, err error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return false, err
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return false, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		return false, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return false, fmt.Errorf("connect to %s: %w", name, err)
	}
	conn, err = adminConn(ctx, cfg, "create")
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if isDuplicateDatabase(err) {
		return false, nil // created meanwhile by another
	}
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", name, err)
	}
	return true, nil
}

func isDuplicateDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")
}

// ErrNotScratch is matched by the error ResetDatabase returns for a
// database it will not drop: one that may hold someone's ledger.
var ErrNotScratch = errors.New("is not a scratch database")

// scratchComment marks a database ResetDatabase created: the next reset
// may drop it.
const scratchComment = "fixpoint scratch database: fixpoint-bench drops and recreates it on every run"

// ResetDatabase drops the database named in dsn (ending its sessions) and
// creates it empty, marked as a scratch database. It is for throwaway
// databases such as the bench's, whose figures must not depend on what
// earlier runs left behind. It drops only a database it created (marked)
// or one with no tables; any other is refused with ErrNotScratch, so a
// --database-url naming a real ledger loses nothing.
func ResetDatabase(ctx context.Context, dsn string) error {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return err
	}
	name := cfg.Database
	if name == "" || name == "postgres" || name == "template0" || name == "template1" {
		return fmt.Errorf("database %q %w: refusing to drop a system database", name, ErrNotScratch)
	}
	conn, err := adminConn(ctx, cfg, "reset")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var comment *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, name).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("reset database %s: %w", name, err)
	case comment == nil || *comment != scratchComment:
		if err := mayDrop(ctx, cfg); err != nil {
			return err
		}
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+quoteLiteral(scratchComment)); err != nil {
		return fmt.Errorf("mark database %s as scratch: %w", name, err)
	}
	return nil
}

// mayDrop checks that the unmarked database cfg names holds no table.
func mayDrop(ctx context.Context, cfg *pgx.ConnConfig) error {
	name := cfg.Database
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("reset database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	var tables int
	err = conn.QueryRow(ctx, `
		SELECT count(*)::int FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables)
	if err != nil {
		return fmt.Errorf("reset database %s: %w", name, err)
	}
	if tables == 0 {
		return nil
	}
	return fmt.Errorf("database %s %w: it holds %d tables, and the bench drops and recreates its database; name another database (one that does not exist yet, say)",
		name, ErrNotScratch, tables)
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// ClaimDatabase takes exclusive use of the database named in dsn for as long
// as the returned release is not called: a session advisory lock named
// after the database, held on a connection to the server's "postgres"
// database (so that resetting the claimed database does not drop it). A
// second claim fails at once with ErrBusy. The bench claims its database so
// two runs cannot reset and load it under each other and print figures of
// the mix.
func ClaimDatabase(ctx context.Context, dsn string) (release func(), err error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	name := cfg.Database
	conn, err := adminConn(ctx, cfg, "claim")
	if err != nil {
		return nil, err
	}
	var ok bool
	err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('fixpoint: exclusive use of database ' || $1))`, name).Scan(&ok)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("claim database %s: %w", name, err)
	}
	if !ok {
		conn.Close(ctx)
		return nil, fmt.Errorf("%w: database %s is claimed by another process", ErrBusy, name)
	}
	// Closing the session would release the lock too, but only once the
	// server has ended the backend, after Close returns: a claim right
	// after a release could still find it held. Unlock first.
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('fixpoint: exclusive use of database ' || $1))`, name)
		conn.Close(ctx)
	}, nil
}

func parseDSN(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if err := namesDatabase(dsn); err != nil {
		return nil, err
	}
	return cfg, nil
}

// namesDatabase refuses a database URL that names no database: Postgres
// (and pgx) would use the user's name for it, which is "postgres" for the
// usual superuser, and the ledger would be built in the maintenance
// database without a word. PGDATABASE names one too.
func namesDatabase(dsn string) error {
	if os.Getenv("PGDATABASE") != "" {
		return nil
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if strings.Trim(u.Path, "/") != "" || u.Query().Get("dbname") != "" {
			return nil
		}
		return fmt.Errorf("%w: %s names no database (add one: postgres://host:5432/fixpoint)", ErrBadURL, u.Redacted())
	}
	if strings.Contains(dsn, "://") || strings.Contains(dsn, "dbname=") {
		return nil
	}
	return fmt.Errorf("%w: the connection string names no database (add dbname=fixpoint)", ErrBadURL)
}

// adminConn connects to the server's "postgres" database with cfg's
// credentials, to do (create, reset, claim) something to the database cfg
// names.
func adminConn(ctx context.Context, cfg *pgx.ConnConfig, do string) (*pgx.Conn, error) {
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect to %s database %s: %w", do, cfg.Database, err)
	}
	return conn, nil
}

// DatabaseName returns the database a URL names, "" when it cannot be read.
func DatabaseName(dsn string) string {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return ""
	}
	return cfg.Database
}

// LedgerName names the ledger a URL points at without its credentials:
// host:port/database, "" when the URL cannot be read. Two setups on one
// machine compare it to tell their ledgers apart.
func LedgerName(dsn string) string {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// IsNoDatabase reports whether err says the database named does not exist.
func IsNoDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000" // invalid_catalog_name
}

// BackendPIDs returns the process ids of the server's backends connected
// to this store's database (every pool's and client's, not only this
// one's), so that a bench on the server's host can read their CPU time.
func (s *Store) BackendPIDs(ctx context.Context) ([]int, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}
