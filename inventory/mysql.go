package inventory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/lock"
)

// mysqlLocksTable is seed 003's lock table: the unique key on name is the lock.
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

// mysqlGuard is seed 003's unique-index lock: INSERT a row to lock, DELETE
// it to unlock, busy at once on a duplicate key. It has the flaws the seed
// lists: no expiry (a holder that dies leaves its row, and the SKU is stuck
// until a reset), no reentrancy, no waiting.
type mysqlGuard struct{ db *sql.DB }

// newMySQLGuard creates the lock table when it is missing.
func newMySQLGuard(ctx context.Context, db *sql.DB) (mysqlGuard, error) {
	if _, err := db.ExecContext(ctx, mysqlLocksTable); err != nil {
		return mysqlGuard{}, fmt.Errorf("inventory: create the MySQL lock table: %w", err)
	}
	return mysqlGuard{db: db}, nil
}

func (g mysqlGuard) acquire(ctx context.Context, key string, _ Faults) (context.Context, func(context.Context) error, error) {
	owner := randomOwner()
	_, err := g.db.ExecContext(ctx, "INSERT INTO lockstep_locks (name, owner) VALUES (?, ?)", key, owner)
	var dup *mysql.MySQLError
	switch {
	case errors.As(err, &dup) && (dup.Number == mysqlDuplicateKey || dup.Number == mysqlDeadlock || dup.Number == mysqlLockWaitTimed):
		return nil, nil, fmt.Errorf("%w: row %s is another's: %w", ErrLockBusy, key, err)
	case err != nil:
		return nil, nil, mysqlUnavailable("insert lock row", err)
	}
	release := func(ctx context.Context) error {
		res, err := g.db.ExecContext(ctx, "DELETE FROM lockstep_locks WHERE name = ? AND owner = ?", key, owner)
		if err != nil {
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

// drop deletes the lock row of key, as a reset (or a DBA) would.
func (g mysqlGuard) drop(ctx context.Context, key string) error {
	if _, err := g.db.ExecContext(ctx, "DELETE FROM lockstep_locks WHERE name = ?", key); err != nil {
		return mysqlUnavailable("drop lock row", err)
	}
	return nil
}

// mysqlUnavailable marks an error of the lock's database. The stock stays
// in Redis, so ErrUnavailable's "redis" reads "a server the sale needs".
func mysqlUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: mysql: %s: %w: %w", op, ErrUnavailable, err)
}

// randomOwner names one holder of a lock row.
func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
