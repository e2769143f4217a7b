// Package migrations holds the ledger's numbered SQL migrations, embedded so
// that every binary carries the schema it was built against.
//
// Files are named in the style of github.com/jackc/tern/v2 (NNN_description.sql);
// each file holds the up migration, then the line
// "---- create above / drop below ----", then the down migration. The store
// package applies them; this package has no logic. Tern evaluates each file as
// a Go text/template, so the SQL must not contain "{{".
//
// 001_baseline.sql is the ledger of the first release. Migrations are
// append-only from there: README.md in this directory says how to add one.
package migrations

import "embed"

// FS holds every migration file (*.sql) at its root.
//
//go:embed *.sql
var FS embed.FS
