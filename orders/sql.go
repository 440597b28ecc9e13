package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between MySQL and SQLite: the DDL, how each
// says "duplicate key", and the table a SELECT without one names (MySQL
// needs DUAL for a WHERE).
type dialect struct {
	name     string
	schema   []string
	payments []string
	// noTable is what a SELECT without a table names (MySQL needs DUAL for
	// a WHERE).
	noTable string
	// buyerColumns is, by table, the ALTER clauses (one statement each, in
	// order) that make the buyer columns of a table an older version
	// created compare bytes (MySQL only; see migrate).
	buyerColumns map[string][]string
	// buyer is a buyer parameter in a multi-row SELECT: MariaDB types a
	// UNION's string column so that it drops trailing spaces ("ann "
	// stored as ann), unless the parameter is cast to bytes.
	buyer     string
	duplicate func(error) bool
	// refused tells an error about the row itself (ErrRefused) from an
	// outage, which is every error it does not name.
	refused func(error) bool
}

// A buyer id is compared as its bytes everywhere, as Redis's buyer sets
// do: VARBINARY on MySQL/MariaDB (no collation: no case folding, no
// PAD SPACE, which made "alice " alice in utf8mb4_bin, and no charset to
// convert through, which turned "张三" into "??" in a latin1 table), and
// TEXT in SQLite, whose default collation BINARY compares bytes.
const mysqlBuyer = "VARBINARY(64)"

// mysqlSchema: the order table and the optimistic stages' stock rows.
var mysqlSchema = []string{
	`CREATE TABLE IF NOT EXISTS lockstep_orders (
	id CHAR(32) NOT NULL PRIMARY KEY,
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	user_id ` + mysqlBuyer + ` NOT NULL,
	qty INT NOT NULL,
	replica VARCHAR(128) NOT NULL,
	created_at BIGINT NOT NULL,
	status VARCHAR(8) NOT NULL,
	one_per_user ` + mysqlBuyer + ` NULL,
	UNIQUE KEY one_order_per_buyer (stage, sku, one_per_user),
	KEY orders_of_buyer (stage, sku, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS lockstep_stock (
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	initial BIGINT NOT NULL,
	stock BIGINT NOT NULL,
	PRIMARY KEY (stage, sku)
) ENGINE=InnoDB`,
	roundsTable + ` ENGINE=InnoDB`,
}

// roundsTable keeps each stage's reset round (doc.go, "Resets"): a table
// of its own, so that tables made before it need no migration.
const roundsTable = `CREATE TABLE IF NOT EXISTS lockstep_rounds (
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	round_no BIGINT NOT NULL,
	PRIMARY KEY (stage, sku)
)`

// sqliteSchema is mysqlSchema in SQLite's words.
var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS lockstep_orders (
	id TEXT NOT NULL PRIMARY KEY,
	stage TEXT NOT NULL,
	sku TEXT NOT NULL,
	user_id TEXT NOT NULL,
	qty INTEGER NOT NULL,
	replica TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	status TEXT NOT NULL,
	one_per_user TEXT NULL
)`,
	`CREATE UNIQUE INDEX IF NOT EXISTS one_order_per_buyer ON lockstep_orders (stage, sku, one_per_user)`,
	`CREATE INDEX IF NOT EXISTS orders_of_buyer ON lockstep_orders (stage, sku, user_id)`,
	`CREATE TABLE IF NOT EXISTS lockstep_stock (
	stage TEXT NOT NULL,
	sku TEXT NOT NULL,
	initial INTEGER NOT NULL,
	stock INTEGER NOT NULL,
	PRIMARY KEY (stage, sku)
)`,
	roundsTable,
}

const mysqlDuplicateKey = 1062 // ER_DUP_ENTRY

// mysqlRowRefused are the server's answers about the row an INSERT sent:
// sent again, the same row gets the same answer. Any other error (a lock
// wait, a deadlock, a read-only or shutting down server, a lost
// connection) may pass and is retried as an outage.
var mysqlRowRefused = []uint16{
	1048, // ER_BAD_NULL_ERROR
	1264, // ER_WARN_DATA_OUT_OF_RANGE
	1265, // WARN_DATA_TRUNCATED
	1292, // ER_TRUNCATED_WRONG_VALUE
	1366, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (a string the charset cannot hold)
	1406, // ER_DATA_TOO_LONG
	1644, // ER_SIGNAL_EXCEPTION (a trigger's SIGNAL)
	3819, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	4025, // ER_CONSTRAINT_FAILED (MariaDB's CHECK)
}

var (
	mysqlDialect = dialect{name: "mysql", schema: mysqlSchema, noTable: " FROM DUAL", payments: paymentsSchema(mysqlBuyer, " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"), buyer: "CAST(? AS BINARY)",
		buyerColumns: map[string][]string{
			"lockstep_orders": {"MODIFY user_id " + mysqlBuyer + " NOT NULL, MODIFY one_per_user " + mysqlBuyer + " NULL"},
			// An older payment table was in the server's default charset
			// and collation (latin1_swedish_ci: "SKU-1" was "sku-1"):
			// first to utf8mb4, so that its buyers' bytes become UTF-8,
			// then to bytes.
			"lockstep_payments": {"CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "MODIFY user_id " + mysqlBuyer + " NOT NULL"},
		},
		duplicate: func(err error) bool {
			var e *mysql.MySQLError
			return errors.As(err, &e) && e.Number == mysqlDuplicateKey
		},
		refused: func(err error) bool {
			var e *mysql.MySQLError
			return errors.As(err, &e) && slices.Contains(mysqlRowRefused, e.Number)
		}}
	sqliteDialect = dialect{name: "sqlite", schema: sqliteSchema, payments: paymentsSchema("TEXT", ""), buyer: "?", duplicate: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
	}, refused: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && (e.Code()&0xff == sqlite3.SQLITE_TOOBIG || e.Code()&0xff == sqlite3.SQLITE_MISMATCH)
	}}
)

// SQLStore is the Store on a database/sql database.
type SQLStore struct {
	db *sql.DB
	d  dialect
}

var _ Store = (*SQLStore)(nil)

// OpenMySQL creates the tables in db when they are missing. Close does not
// close db.
func OpenMySQL(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	return open(ctx, db, mysqlDialect)
}

// OpenSQLite opens (creating) the SQLite file at path; several processes
// may open one file (WAL, and a busy wait instead of SQLITE_BUSY).
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("orders: open sqlite %s: %w", path, err)
	}
	s, err := open(ctx, db, sqliteDialect)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func open(ctx context.Context, db *sql.DB, d dialect) (*SQLStore, error) {
	for _, ddl := range d.schema {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return nil, fmt.Errorf("orders: %s: create the order tables: %w", d.name, err)
		}
	}
	s := &SQLStore{db: db, d: d}
	if err := s.migrate(ctx, "lockstep_orders"); err != nil {
		return nil, err
	}
	return s, nil
}

// migrate makes the buyer columns of a table an older version created
// (VARCHAR in utf8mb4_bin, PAD SPACE; or in the server's default charset
// and collation, latin1_swedish_ci) compare bytes: ALTERs that rebuild
// the table, run only while a column is not VARBINARY yet (two processes
// opening at once both run them: the second changes nothing). The
// rows keep their bytes; a buyer an older latin1 table stored as "?"
// stays "?" (docs/orders.md, "Upgrading").
func (s *SQLStore) migrate(ctx context.Context, table string) error {
	alters := s.d.buyerColumns[table]
	if len(alters) == 0 {
		return nil
	}
	var stale int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME IN ('user_id', 'one_per_user') AND DATA_TYPE <> 'varbinary'`, table).Scan(&stale)
	if err != nil {
		return fmt.Errorf("orders: %s: read the buyer columns of %s: %w", s.d.name, table, err)
	}
	if stale == 0 {
		return nil
	}
	for _, alter := range alters {
		if _, err := s.db.ExecContext(ctx, "ALTER TABLE "+table+" "+alter); err != nil {
			return fmt.Errorf("orders: %s: make the buyer columns of %s compare bytes: %w", s.d.name, table, err)
		}
	}
	return nil
}

// Dialect names the database: "mysql" or "sqlite".
func (s *SQLStore) Dialect() string { return s.d.name }

// Close closes a SQLite store's database; a MySQL store's belongs to the
// caller.
func (s *SQLStore) Close() error {
	if s.d.name == "sqlite" {
		return s.db.Close()
	}
	return nil
}

func (s *SQLStore) unavailable(op string, err error) error {
	return fmt.Errorf("orders: %s: %s: %w: %w", s.d.name, op, ErrUnavailable, err)
}

// execer is a database or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const insertOrder = `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertInRound is insertOrder that writes nothing once the stage's round
// is no longer the order's. On MySQL the subquery's read of the round row
// is a locking read (INSERT ... SELECT), so a reset's round change waits
// for the insert, or the insert for the reset, never both at once.
func (s *SQLStore) insertInRound() string {
	return `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?` + s.d.noTable + `
WHERE NOT EXISTS (SELECT 1 FROM lockstep_rounds WHERE stage = ? AND sku = ? AND round_no <> ?)`
}

// insert writes o with status (in o.Round when inRound); a duplicate key
// is told apart by reading the row of o.ID: ours (a retry: nil, and again
// true), void (ErrVoided), or none (the buyer's unique index:
// ErrDuplicateBuyer).
func (s *SQLStore) insert(ctx context.Context, x execer, o Order, status string, inRound bool) (again bool, err error) {
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	var onePerUser sql.NullString
	if o.OnePerUser {
		onePerUser = sql.NullString{String: o.User, Valid: true}
	}
	query, args := insertOrder, []any{o.ID, o.Stage, o.SKU, o.User, o.Qty, o.Replica, o.Created.UnixMicro(), status, onePerUser}
	if inRound {
		query, args = s.insertInRound(), append(args, o.Stage, o.SKU, o.Round)
	}
	res, err := x.ExecContext(ctx, query, args...)
	if err == nil {
		if n, err := res.RowsAffected(); err != nil {
			return false, s.unavailable("insert order", err)
		} else if n == 0 {
			return false, fmt.Errorf("%w: order %s of round %d", ErrStaleRound, o.ID, o.Round)
		}
		return false, nil
	}
	if s.d.refused(err) {
		return false, fmt.Errorf("orders: %s: insert order %s: %w: %w", s.d.name, o.ID, ErrRefused, err)
	}
	if !s.d.duplicate(err) {
		return false, s.unavailable("insert order", err)
	}
	var found string
	switch err := x.QueryRowContext(ctx, "SELECT status FROM lockstep_orders WHERE id = ?", o.ID).Scan(&found); {
	case errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("%w: %s of %s on %s", ErrDuplicateBuyer, o.User, o.SKU, o.Stage)
	case err != nil:
		return false, s.unavailable("read order after a duplicate key", err)
	case found == status:
		return true, nil // our own row: this is a retry
	case found == StatusVoid:
		return false, fmt.Errorf("%w: %s", ErrVoided, o.ID)
	default:
		return false, fmt.Errorf("%w: %s", ErrOrdered, o.ID)
	}
}

func (s *SQLStore) Insert(ctx context.Context, o Order) error {
	_, err := s.insert(ctx, s.db, o, StatusLive, true)
	return err
}

// Void writes its row whatever the round: a void only ever keeps an insert
// out, and a reset deletes it with the round's orders.
func (s *SQLStore) Void(ctx context.Context, o Order) error {
	o.OnePerUser = false // a void row must not take the buyer's place
	_, err := s.insert(ctx, s.db, o, StatusVoid, false)
	return err
}

func (s *SQLStore) HasOrder(ctx context.Context, stage, sku, user string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM lockstep_orders
WHERE stage = ? AND sku = ? AND user_id = ? AND status = 'live' LIMIT 1`, stage, sku, user).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, s.unavailable("find the buyer's order", err)
	}
	return true, nil
}

func (s *SQLStore) Counts(ctx context.Context, stage, sku string) (Counts, error) {
	return s.counts(ctx, s.db, stage, sku)
}

// counts reads Counts on x: the database, or a read transaction's snapshot.
func (s *SQLStore) counts(ctx context.Context, x execer, stage, sku string) (Counts, error) {
	var c Counts
	err := x.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(qty), 0), COUNT(DISTINCT NULLIF(user_id, '')),
COALESCE(SUM(CASE WHEN user_id = '' THEN 1 ELSE 0 END), 0)
FROM lockstep_orders WHERE stage = ? AND sku = ? AND status = 'live'`, stage, sku).Scan(&c.Orders, &c.Units, &c.Buyers, &c.Anonymous)
	if err != nil {
		return Counts{}, s.unavailable("count orders", err)
	}
	err = x.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT user_id FROM lockstep_orders
WHERE stage = ? AND sku = ? AND status = 'live' AND user_id <> '' GROUP BY user_id HAVING COUNT(*) > 1) AS d`, stage, sku).Scan(&c.DuplicateBuyers)
	if err != nil {
		return Counts{}, s.unavailable("count duplicate buyers", err)
	}
	return c, nil
}

func (s *SQLStore) List(ctx context.Context, stage, sku, after string, limit int) ([]Order, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, user_id, qty, replica, created_at, status FROM lockstep_orders
WHERE stage = ? AND sku = ? AND status = 'live' AND id > ? ORDER BY id LIMIT ?`, stage, sku, after, limit)
	if err != nil {
		return nil, s.unavailable("list orders", err)
	}
	defer rows.Close()
	out := []Order{}
	for rows.Next() {
		o := Order{Stage: stage, SKU: sku}
		var created int64
		if err := rows.Scan(&o.ID, &o.User, &o.Qty, &o.Replica, &created, &o.Status); err != nil {
			return nil, s.unavailable("read orders", err)
		}
		o.Created = time.UnixMicro(created).UTC()
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read orders", err)
	}
	return out, nil
}

func (s *SQLStore) Reset(ctx context.Context, stage, sku string, stock, round int64) error {
	return s.reset(ctx, stage, sku, stock, round, nil)
}

// reset is Reset, with also (when not nil) run in its transaction after
// the orders' delete: Payments.Reset's delete of the payments.
func (s *SQLStore) reset(ctx context.Context, stage, sku string, stock, round int64, also func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.unavailable("begin reset", err)
	}
	defer func() { _ = tx.Rollback() }()
	if round > 0 {
		newer, err := s.moveRound(ctx, tx, stage, sku, round)
		if err != nil || newer {
			return err // newer: a later reset already ran here, and its orders stay
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM lockstep_orders WHERE stage = ? AND sku = ?", stage, sku); err != nil {
		return s.unavailable("delete orders", err)
	}
	if also != nil {
		if err := also(tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM lockstep_stock WHERE stage = ? AND sku = ?", stage, sku); err != nil {
		return s.unavailable("delete stock row", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO lockstep_stock (stage, sku, initial, stock) VALUES (?, ?, ?, ?)", stage, sku, stock, stock); err != nil {
		return s.unavailable("write stock row", err)
	}
	if err := tx.Commit(); err != nil {
		return s.unavailable("commit reset", err)
	}
	return nil
}

func (s *SQLStore) Round(ctx context.Context, stage, sku string) (int64, error) {
	var round int64
	err := s.db.QueryRowContext(ctx, "SELECT round_no FROM lockstep_rounds WHERE stage = ? AND sku = ?", stage, sku).Scan(&round)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, s.unavailable("read round", err)
	}
	return round, nil
}

// moveRound sets the stage's round to round, unless a later reset's round
// is there already (newer true, nothing written). On MySQL the round row is
// read FOR UPDATE, so the inserts of the old round wait for the reset.
func (s *SQLStore) moveRound(ctx context.Context, tx *sql.Tx, stage, sku string, round int64) (newer bool, err error) {
	lock := ""
	if s.d.name == "mysql" {
		lock = " FOR UPDATE"
	}
	var current int64
	err = tx.QueryRowContext(ctx, "SELECT round_no FROM lockstep_rounds WHERE stage = ? AND sku = ?"+lock, stage, sku).Scan(&current)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, s.unavailable("read round", err)
	case current > round:
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, "REPLACE INTO lockstep_rounds (stage, sku, round_no) VALUES (?, ?, ?)", stage, sku, round); err != nil {
		return false, s.unavailable("write round", err)
	}
	return false, nil
}

// Initialise leaves a row that exists as it is (several replicas may
// initialise one SKU at once).
func (s *SQLStore) Initialise(ctx context.Context, stage, sku string, stock int64) error {
	_, err := s.db.ExecContext(ctx, "INSERT INTO lockstep_stock (stage, sku, initial, stock) VALUES (?, ?, ?, ?)", stage, sku, stock, stock)
	if err != nil && !s.d.duplicate(err) {
		return s.unavailable("initialise stock row", err)
	}
	return nil
}

func (s *SQLStore) Stock(ctx context.Context, stage, sku string) (Stock, error) {
	return s.stockRow(ctx, s.db, stage, sku)
}

func (s *SQLStore) stockRow(ctx context.Context, x execer, stage, sku string) (Stock, error) {
	var st Stock
	err := x.QueryRowContext(ctx, "SELECT initial, stock FROM lockstep_stock WHERE stage = ? AND sku = ?", stage, sku).Scan(&st.Initial, &st.Stock)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Stock{}, fmt.Errorf("%w: %s on %s", ErrNoStock, sku, stage)
	case err != nil:
		return Stock{}, s.unavailable("read stock row", err)
	}
	return st, nil
}

// Buy inserts the order first: a retry of a Buy that committed finds its
// own row and returns before the UPDATE could take the units twice.
func (s *SQLStore) Buy(ctx context.Context, o Order, cond Condition, read int64) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.unavailable("begin buy", err)
	}
	defer func() { _ = tx.Rollback() }()
	again, err := s.insert(ctx, tx, o, StatusLive, false) // the stock row, in this transaction, is the fence
	if err != nil {
		return 0, err
	}
	if again { // committed by an earlier attempt: its UPDATE ran then
		st, err := s.stockRow(ctx, tx, o.Stage, o.SKU)
		return st.Stock, err
	}
	update := "UPDATE lockstep_stock SET stock = stock - ? WHERE stage = ? AND sku = ? AND stock = ?"
	args := []any{o.Qty, o.Stage, o.SKU, read}
	if cond == EnoughStock {
		update = "UPDATE lockstep_stock SET stock = stock - ? WHERE stage = ? AND sku = ? AND stock >= ?"
		args[3] = o.Qty
	}
	res, err := tx.ExecContext(ctx, update, args...)
	if err != nil {
		return 0, s.unavailable("update stock row", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return 0, s.unavailable("update stock row", err)
		}
		if cond == EnoughStock {
			return 0, ErrSoldOut
		}
		return 0, fmt.Errorf("%w: read %d", ErrConflict, read)
	}
	st, err := s.stockRow(ctx, tx, o.Stage, o.SKU)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, s.unavailable("commit buy", err)
	}
	return st.Stock, nil
}
