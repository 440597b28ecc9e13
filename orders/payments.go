package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Payment states of an order of an async stage (asyncorders). The order
// row stays live while its payment is unpaid or paid; a cancel voids it.
const (
	PaymentUnpaid    = "unpaid"
	PaymentPaid      = "paid"
	PaymentCancelled = "cancelled"
)

var (
	// ErrNoOrder: no order of that id for that buyer (or none at all).
	ErrNoOrder = errors.New("orders: no such order")
	// ErrCancelled: the order was cancelled (its payment came too late).
	ErrCancelled = errors.New("orders: order cancelled")
)

// paymentsSchema is the payment table's DDL with the dialect's buyer
// column type and table options (sql.go).
func paymentsSchema(buyer, options string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS lockstep_payments (
	id CHAR(32) NOT NULL PRIMARY KEY,
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	user_id ` + buyer + ` NOT NULL,
	qty INT NOT NULL,
	status VARCHAR(16) NOT NULL,
	deadline BIGINT NOT NULL,
	returned INT NOT NULL DEFAULT 0
)` + options,
		`CREATE INDEX IF NOT EXISTS payments_due ON lockstep_payments (status, deadline)`,
	}
}

// Payments are the payment states of the orders of the async stages, in
// the order table's database, so that a cancel voids the order in the
// same transaction that cancels its payment.
//
// Every call, when its reply is lost, when it runs twice, when it is late:
//
//   - Open, reply lost or run twice: the row exists; a second insert is
//     ignored (INSERT IGNORE / OR IGNORE), its state untouched. Late,
//     after a reset moved the round past the order's: ErrStaleRound,
//     nothing written (the reset deleted the order).
//   - Reset: the order table's reset and the payments' delete, one
//     transaction: run twice, the same state; late with an older round
//     than the table's, nothing changes (Store.Reset).
//   - Pay: a compare-and-set unpaid → paid; run again it finds paid and
//     answers nil (the same answer); arriving after the sweeper's cancel it
//     answers ErrCancelled and changes nothing; arriving as its row is
//     opened it pays it (one more compare-and-set), never answering paid
//     for a row left unpaid.
//   - Cancel (the sweeper's): one transaction of the compare-and-set
//     unpaid → cancelled, with the deadline passed, and the order row's
//     void; run again, or after a payment, it matches no row and changes
//     nothing. The units go back afterwards, in Redis, under a mark of the
//     order id (asyncorders), and MarkReturned records it; a sweeper killed
//     between the two finds the row unreturned and gives back again, which
//     the mark turns into nothing.
//   - Ledger (the audit's read, one read-only transaction): a read, so
//     sent again it reads again; late, it is a snapshot of its moment.
type Payments struct {
	s *SQLStore
	// betweenPayAndRead, set by tests only, runs between Pay's
	// compare-and-set and its read of the state (a worker opening the
	// payment right then).
	betweenPayAndRead func()
	// betweenLedgerReads, set by tests only, runs between Ledger's count
	// of the live orders and its list of the cancelled ones.
	betweenLedgerReads func()
}

// Payments creates the payment table when it is missing.
func (s *SQLStore) Payments(ctx context.Context) (*Payments, error) {
	for _, ddl := range s.d.payments {
		if _, err := s.db.ExecContext(ctx, ddl); err != nil {
			return nil, fmt.Errorf("orders: %s: create the payment table: %w", s.d.name, err)
		}
	}
	if err := s.migrate(ctx, "lockstep_payments"); err != nil {
		return nil, err
	}
	return &Payments{s: s}, nil
}

// Open records o's payment as unpaid until deadline, while the stage is
// in o.Round, as Insert lands o (doc.go, "Resets"): ErrStaleRound, nothing
// written, once a reset moved the stage past it (that reset deleted o's
// order; a payment opened after it would outlive its order).
func (p *Payments) Open(ctx context.Context, o Order, deadline time.Time) error {
	ignore := "INSERT OR IGNORE"
	if p.s.d.name == "mysql" {
		ignore = "INSERT IGNORE"
	}
	// As insertInRound: on MySQL the subquery's read of the round row is a
	// locking read, so a reset's round change and this wait for each other.
	res, err := p.s.db.ExecContext(ctx, ignore+` INTO lockstep_payments (id, stage, sku, user_id, qty, status, deadline)
SELECT ?, ?, ?, ?, ?, ?, ?`+p.s.d.noTable+`
WHERE NOT EXISTS (SELECT 1 FROM lockstep_rounds WHERE stage = ? AND sku = ? AND round_no <> ?)`,
		o.ID, o.Stage, o.SKU, o.User, o.Qty, PaymentUnpaid, deadline.UnixMicro(), o.Stage, o.SKU, o.Round)
	if err != nil {
		return p.s.unavailable("open payment", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return p.s.unavailable("open payment", err)
	} else if n == 1 {
		return nil
	}
	// Nothing written: the payment was open already, or the round is over.
	var stale int
	err = p.s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockstep_rounds WHERE stage = ? AND sku = ? AND round_no <> ?",
		o.Stage, o.SKU, o.Round).Scan(&stale)
	switch {
	case err != nil:
		return p.s.unavailable("read round", err)
	case stale > 0:
		return fmt.Errorf("%w: payment of order %s of round %d", ErrStaleRound, o.ID, o.Round)
	}
	return nil
}

// Pay marks user's order id paid: nil when it is paid (now or before),
// ErrCancelled, or ErrNoOrder (no order of that id for user).
//
// The workers open a payment just after its order's insert, so a payment
// may arrive while its row appears: the compare-and-set finds no row, and
// the row read after it is unpaid. That payment is then paid by one more
// compare-and-set; it is never answered paid while its row stays unpaid (a
// sweeper would then cancel an order its buyer was told is paid). A state
// leaves unpaid once and never comes back, so the read after the second
// compare-and-set decides.
func (p *Payments) Pay(ctx context.Context, id, user string) error {
	paid, err := p.setPaid(ctx, id, user)
	if err != nil || paid {
		return err
	}
	if p.betweenPayAndRead != nil {
		p.betweenPayAndRead()
	}
	status, err := p.Status(ctx, id, user)
	if err == nil && status == PaymentUnpaid {
		if paid, err = p.setPaid(ctx, id, user); err != nil || paid {
			return err
		}
		status, err = p.Status(ctx, id, user)
	}
	switch {
	case err != nil:
		return err
	case status == PaymentCancelled:
		return fmt.Errorf("%w: %s", ErrCancelled, id)
	case status == PaymentPaid:
		return nil // paid before: the same answer
	}
	return fmt.Errorf("orders: payment %s is %q after its payment", id, status)
}

// setPaid is Pay's compare-and-set unpaid → paid: true when it changed the row.
func (p *Payments) setPaid(ctx context.Context, id, user string) (bool, error) {
	res, err := p.s.db.ExecContext(ctx, `UPDATE lockstep_payments SET status = ? WHERE id = ? AND user_id = ? AND status = ?`,
		PaymentPaid, id, user, PaymentUnpaid)
	if err != nil {
		return false, p.s.unavailable("pay", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, p.s.unavailable("pay", err)
	}
	return n == 1, nil
}

// Status is the payment state of user's order id; ErrNoOrder when there is none.
func (p *Payments) Status(ctx context.Context, id, user string) (string, error) {
	var status string
	err := p.s.db.QueryRowContext(ctx, `SELECT status FROM lockstep_payments WHERE id = ? AND user_id = ?`, id, user).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("%w: %s", ErrNoOrder, id)
	case err != nil:
		return "", p.s.unavailable("read payment", err)
	}
	return status, nil
}

// CancelExpired cancels up to limit orders of stage unpaid past their
// deadline at now, each in one transaction with its order row's void
// (which also frees the buyer's place in the unique index), and returns
// the orders it cancelled, each with the round its stage was in then
// (Order.Round): the round of its units, whose give-back a later reset
// must turn into nothing.
func (p *Payments) CancelExpired(ctx context.Context, stage string, now time.Time, limit int) ([]Order, error) {
	due, err := p.list(ctx, p.s.db, paymentRows+`
WHERE p.stage = ? AND p.status = ? AND p.deadline < ? ORDER BY p.deadline LIMIT ?`, stage, PaymentUnpaid, now.UnixMicro(), limit)
	if err != nil {
		return nil, err
	}
	var cancelled []Order
	for _, o := range due {
		o.Stage = stage
		ok, err := p.cancel(ctx, &o, now)
		if err != nil {
			return cancelled, err
		}
		if ok {
			cancelled = append(cancelled, o)
		}
	}
	return cancelled, nil
}

// cancel is the compare-and-set of one order; false when a payment (or
// another sweeper) got there first. It sets o.Round to the stage's round,
// read first, as a reset takes the round row before the payments: a
// locking read on MySQL, so a reset waits for the cancel or the cancel
// finds the payment deleted, and the round read is the order's.
func (p *Payments) cancel(ctx context.Context, o *Order, now time.Time) (bool, error) {
	tx, err := p.s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, p.s.unavailable("begin cancel", err)
	}
	defer func() { _ = tx.Rollback() }()
	lock := ""
	if p.s.d.name == "mysql" {
		lock = " LOCK IN SHARE MODE"
	}
	err = tx.QueryRowContext(ctx, "SELECT round_no FROM lockstep_rounds WHERE stage = ? AND sku = ?"+lock, o.Stage, o.SKU).Scan(&o.Round)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		o.Round = 0
	case err != nil:
		return false, p.s.unavailable("read round", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE lockstep_payments SET status = ? WHERE id = ? AND status = ? AND deadline < ?`,
		PaymentCancelled, o.ID, PaymentUnpaid, now.UnixMicro())
	if err != nil {
		return false, p.s.unavailable("cancel payment", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return false, p.s.unavailable("cancel payment", err)
		}
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lockstep_orders SET status = ?, one_per_user = NULL WHERE id = ? AND status = ?`,
		StatusVoid, o.ID, StatusLive); err != nil {
		return false, p.s.unavailable("void cancelled order", err)
	}
	if err := tx.Commit(); err != nil {
		return false, p.s.unavailable("commit cancel", err)
	}
	return true, nil
}

// Unreturned lists up to limit cancelled orders of stage whose units were
// not recorded as given back, each with its stage's round (Order.Round): a
// reset deletes the payments in the transaction that moves the round
// (Reset), so a payment listed is of the round read with it.
func (p *Payments) Unreturned(ctx context.Context, stage string, limit int) ([]Order, error) {
	list, err := p.list(ctx, p.s.db, paymentRows+`
WHERE p.stage = ? AND p.status = ? AND p.returned = 0 LIMIT ?`, stage, PaymentCancelled, limit)
	for i := range list {
		list[i].Stage = stage
	}
	return list, err
}

// MarkReturned records that a cancelled order's units went back.
func (p *Payments) MarkReturned(ctx context.Context, id string) error {
	if _, err := p.s.db.ExecContext(ctx, `UPDATE lockstep_payments SET returned = 1 WHERE id = ?`, id); err != nil {
		return p.s.unavailable("mark returned", err)
	}
	return nil
}

// PaymentCounts are the payment states of stage's orders of sku.
type PaymentCounts struct {
	Unpaid    int64 `json:"unpaid"`
	Paid      int64 `json:"paid"`
	Cancelled int64 `json:"cancelled"`
	// Unreturned are cancelled orders whose units are not yet back.
	Unreturned int64 `json:"unreturned"`
}

// Counts counts stage's payments of sku.
func (p *Payments) Counts(ctx context.Context, stage, sku string) (PaymentCounts, error) {
	var c PaymentCounts
	err := p.s.db.QueryRowContext(ctx, `SELECT
COALESCE(SUM(CASE WHEN status = 'unpaid' THEN 1 ELSE 0 END), 0),
COALESCE(SUM(CASE WHEN status = 'paid' THEN 1 ELSE 0 END), 0),
COALESCE(SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END), 0),
COALESCE(SUM(CASE WHEN status = 'cancelled' AND returned = 0 THEN 1 ELSE 0 END), 0)
FROM lockstep_payments WHERE stage = ? AND sku = ?`, stage, sku).Scan(&c.Unpaid, &c.Paid, &c.Cancelled, &c.Unreturned)
	if err != nil {
		return PaymentCounts{}, p.s.unavailable("count payments", err)
	}
	return c, nil
}

// Ledger is one snapshot of stage's orders of sku in the order database:
// the live orders' counts and the cancelled orders' units, read in one
// transaction. A cancel voids its order row and cancels its payment in one
// transaction, so each order is in exactly one of the two.
type Ledger struct {
	Counts
	// Cancelled are the units of each cancelled order, by order id.
	Cancelled map[string]int64
}

// Ledger reads stage's ledger of sku. On SQLite the store's transactions
// begin IMMEDIATE, so writers wait for this read (one short transaction).
func (p *Payments) Ledger(ctx context.Context, stage, sku string) (Ledger, error) {
	var opts *sql.TxOptions
	if p.s.d.name == "mysql" {
		// Every read of the transaction from one snapshot, whatever the
		// server's default isolation; SQLite's transactions always are.
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := p.s.db.BeginTx(ctx, opts)
	if err != nil {
		return Ledger{}, p.s.unavailable("begin ledger read", err)
	}
	defer func() { _ = tx.Rollback() }()
	c, err := p.s.counts(ctx, tx, stage, sku)
	if err != nil {
		return Ledger{}, err
	}
	if p.betweenLedgerReads != nil {
		p.betweenLedgerReads()
	}
	cancelled, err := p.list(ctx, tx, paymentRows+`
WHERE p.stage = ? AND p.sku = ? AND p.status = ?`, stage, sku, PaymentCancelled)
	if err != nil {
		return Ledger{}, err
	}
	l := Ledger{Counts: c, Cancelled: make(map[string]int64, len(cancelled))}
	for _, o := range cancelled {
		l.Cancelled[o.ID] = o.Qty
	}
	return l, nil
}

// Reset is the order table's reset (Store.Reset) that also deletes
// stage's payments of sku, in the same transaction: a payment of the round
// before never outlives its order (a cancelled one would give its units
// back into the new round), and none of the new round is deleted after its
// order landed.
func (p *Payments) Reset(ctx context.Context, stage, sku string, stock, round int64) error {
	return p.s.reset(ctx, stage, sku, stock, round, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM lockstep_payments WHERE stage = ? AND sku = ?`, stage, sku); err != nil {
			return p.s.unavailable("reset payments", err)
		}
		return nil
	})
}

// paymentRows selects payments (as p) as list reads them: each with its
// stage's round of its SKU (0 when no reset set one).
const paymentRows = `SELECT p.id, p.sku, p.user_id, p.qty, COALESCE(r.round_no, 0) FROM lockstep_payments p
LEFT JOIN lockstep_rounds r ON r.stage = p.stage AND r.sku = p.sku`

func (p *Payments) list(ctx context.Context, x execer, query string, args ...any) ([]Order, error) {
	rows, err := x.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, p.s.unavailable("list payments", err)
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		var o Order
		if err := rows.Scan(&o.ID, &o.SKU, &o.User, &o.Qty, &o.Round); err != nil {
			return nil, p.s.unavailable("read payments", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, p.s.unavailable("read payments", err)
	}
	return out, nil
}
