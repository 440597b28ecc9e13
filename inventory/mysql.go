package inventory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/lock"
)

// mysqlLocksTable is the lock table of 《常见分布式锁方案对比》: the unique key on name is the lock.
const mysqlLocksTable = `CREATE TABLE IF NOT EXISTS lockstep_locks (
	name VARCHAR(191) NOT NULL PRIMARY KEY,
	owner CHAR(32) NOT NULL,
	locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB`

// MySQL's errors that mean the row, so the lock, is another's: a duplicate
// key (ER_DUP_ENTRY); and, when the INSERT races the holder's DELETE, a
// deadlock InnoDB broke by rolling ours back (ER_LOCK_DEADLOCK) or a row
// lock wait that timed out (ER_LOCK_WAIT_TIMEOUT).
const (
	mysqlDuplicateKey  = 1062
	mysqlDeadlock      = 1213
	mysqlLockWaitTimed = 1205
)

// mysqlGuard is the unique-index lock of 《常见分布式锁方案对比》: INSERT a row to lock, DELETE
// it to unlock, busy at once on a duplicate key. It has the flaws the seed
// lists: no expiry (a holder that dies leaves its row, and the SKU is stuck
// until a reset), no reentrancy, no waiting.
//
// What a live process does not leave behind is a row whose request lost its
// answer. Each request, lost, run twice, or arriving late:
//   - INSERT, reply lost (or the sale's deadline reached, when
//     go-sql-driver closes the connection and MariaDB completes the INSERT
//     anyway): the guard answers unavailable and deletes the owner's row in
//     the background (deleteOwners). One never sent (a refused dial, no usable
//     connection: internal/outcome) inserted nothing, and is not resolved:
//     an outage costs no background work.
//   - INSERT run twice: the driver retries only a request it could not
//     send (driver.ErrBadConn), so never; a second INSERT of one owner
//     would get a duplicate key, and the first is forgotten as above.
//   - INSERT arriving late, after the connection closed: the sweep looks for
//     the row for lateInsert after the failure; one arriving later still
//     (a partition that held the packet longer) stays like a crashed
//     holder's row, until a reset.
//   - DELETE, reply lost or failed: deleted again in the background until
//     a DELETE has run (it is conditional on the owner, so it never
//     removes another's row, twice or late).
//
// The background deletions of all owners are one queue, swept by one
// goroutine with one DELETE per 500 owners (resolver).
type mysqlGuard struct {
	db   *sql.DB
	rows *resolutions
}

// lateInsert is how long after an INSERT without an answer its row is
// looked for: one sent before the connection closed arrives within it.
const lateInsert = 5 * time.Second

// newMySQLGuard creates the lock table when it is missing.
func newMySQLGuard(ctx context.Context, db *sql.DB, r *resolver) (mysqlGuard, error) {
	if _, err := db.ExecContext(ctx, mysqlLocksTable); err != nil {
		return mysqlGuard{}, fmt.Errorf("inventory: create the MySQL lock table: %w", err)
	}
	g := mysqlGuard{db: db}
	g.rows = r.queue("mysql lock rows", g.deleteOwners)
	return g, nil
}

func (g mysqlGuard) acquire(ctx context.Context, key string, _ Faults) (context.Context, func(context.Context) error, error) {
	owner := randomOwner()
	_, err := g.db.ExecContext(ctx, "INSERT INTO lockstep_locks (name, owner) VALUES (?, ?)", key, owner)
	var answered *mysql.MySQLError
	switch {
	case errors.As(err, &answered) && (answered.Number == mysqlDuplicateKey || answered.Number == mysqlDeadlock || answered.Number == mysqlLockWaitTimed):
		return nil, nil, fmt.Errorf("%w: row %s is another's: %w", ErrLockBusy, key, err)
	case errors.As(err, &answered): // MySQL refused it: nothing inserted
		return nil, nil, mysqlUnavailable("insert lock row", err)
	case err != nil:
		if outcome.MayHaveRunErr(err) {
			g.rows.add(owner, time.Now().Add(lateInsert))
		}
		return nil, nil, mysqlUnavailable("insert lock row", err)
	}
	release := func(ctx context.Context) error {
		res, err := g.db.ExecContext(ctx, "DELETE FROM lockstep_locks WHERE name = ? AND owner = ?", key, owner)
		if err != nil {
			g.rows.add(owner, time.Time{}) // the row stays unless this DELETE ran
			return mysqlUnavailable("delete lock row", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: row %s was deleted (reset)", lock.ErrNotHeld, key)
		}
		return nil
	}
	// A row cannot be lost while it exists: nothing expires it.
	return ctx, release, nil
}

// ownersPerDelete bounds the owners one background DELETE names.
const ownersPerDelete = 500

// deleteOwners deletes the rows of owners (each owner is one acquire's,
// random: it names one row at most, never another's), the resolver's
// sweep: owners whose INSERT may still arrive are swept again until
// lateInsert after it (some nine sweeps, the retries backing off).
func (g mysqlGuard) deleteOwners(ctx context.Context, owners []string) error {
	for chunk := range slices.Chunk(owners, ownersPerDelete) {
		args := make([]any, len(chunk))
		for i, o := range chunk {
			args[i] = o
		}
		query := "DELETE FROM lockstep_locks WHERE owner IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		if _, err := g.db.ExecContext(ctx, query, args...); err != nil {
			return err
		}
	}
	return nil
}

// drop deletes the lock row of key, as a reset (or a DBA) would.
func (g mysqlGuard) drop(ctx context.Context, key string) error {
	if _, err := g.db.ExecContext(ctx, "DELETE FROM lockstep_locks WHERE name = ?", key); err != nil {
		return mysqlUnavailable("drop lock row", err)
	}
	return nil
}

// mysqlUnavailable marks an error of the lock's database.
func mysqlUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: %s: %w: %w", op, ErrMySQLUnavailable, err)
}

// randomOwner names one holder of a lock row.
func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
