package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrActionInProgress is returned by LockBatch when another action holds
// the batch: the error is an *ActionInProgressError saying which.
var ErrActionInProgress = errors.New("another action on the batch is in progress")

// ActionInProgressError says which action holds a batch, and since when.
type ActionInProgressError struct {
	Batch string
	// Action is the holder's action ("requeue", "cancel"), "action" when
	// the ledger does not say.
	Action string
	// Since is when the holder took the batch; zero when the ledger does
	// not say (a role that may not see other sessions).
	Since time.Time
}

func (e *ActionInProgressError) Error() string {
	since := "at an unknown time"
	if !e.Since.IsZero() {
		since = "at " + e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("another %s of batch %s is in progress (started %s): run this again when it has ended", e.Action, e.Batch, since)
}

func (e *ActionInProgressError) Is(target error) bool { return target == ErrActionInProgress }

// actionLockClass is the first key of the batch action locks (the second
// is the hash of the batch name), apart from any other advisory lock.
const actionLockClass = 0x66697870 // "fixp"

// actionAppName prefixes the application_name of the session that holds a
// batch action lock: how another action learns which one holds it.
const actionAppName = "fixpoint action "

// LockBatch takes the batch's action lock for action (requeue, cancel)
// and returns its release. An action runs ledger transactions and then
// publishes; two at once interleaved (the second found no job and then
// published the first's). The lock is a Postgres session advisory lock on
// a connection of its own, so it is freed when the process dies. When
// another action holds it, LockBatch does not wait: it returns an
// *ActionInProgressError.
func (s *Store) LockBatch(ctx context.Context, batch, action string) (release func(), err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = actionAppName + action
	lctx, cancel := s.timeout(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(lctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lock batch %s: %w", batch, err)
	}
	var got bool
	if err := conn.QueryRow(lctx, `SELECT pg_try_advisory_lock($1::int4, hashtext($2))`, actionLockClass, batch).Scan(&got); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("lock batch %s: %w", batch, err)
	}
	if !got {
		e := &ActionInProgressError{Batch: batch, Action: "action"}
		var app *string
		var since *time.Time
		err := conn.QueryRow(lctx, `
			SELECT a.application_name, a.backend_start
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND l.classid = $1::int4::oid AND l.objid = hashtext($2)::oid AND l.objsubid = 2
			LIMIT 1`, actionLockClass, batch).Scan(&app, &since)
		conn.Close(context.Background())
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("lock batch %s: %w", batch, err)
		}
		if app != nil && strings.HasPrefix(*app, actionAppName) {
			e.Action = strings.TrimPrefix(*app, actionAppName)
		}
		if since != nil {
			e.Since = *since
		}
		return nil, e
	}
	return func() {
		// Unlocked before the session closes: the server ends a closed
		// session a moment after the client, so an action right after this
		// one (a second click) would find the batch still held. Closing
		// the session frees the lock anyway if the unlock fails.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1::int4, hashtext($2))`, actionLockClass, batch)
		conn.Close(ctx)
	}, nil
}
