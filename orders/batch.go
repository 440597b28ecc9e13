package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// InsertBatch writes os, orders of one stage and SKU, as live orders in
// one transaction: the ids already live (a batch run again, after its
// reply was lost or by a late worker) are left as they are and the rest
// are one multi-row INSERT; with deadlines (one per order) it also opens
// each order's payment (INSERT IGNORE by id, as Payments.Open; the store's
// payment table must exist). Either every order is live when it commits,
// or nothing is written: ErrBatchRefused when a row cannot land as a new
// live order (Insert tells which and why), ErrUnavailable when the
// database did not answer. Without deadlines it is one statement, which
// commits on its own.
func (s *SQLStore) InsertBatch(ctx context.Context, os []Order, deadlines []time.Time) error {
	if len(os) == 0 {
		return nil
	}
	if deadlines != nil && len(deadlines) != len(os) {
		return fmt.Errorf("orders: insert batch: %d deadlines for %d orders", len(deadlines), len(os))
	}
	for _, o := range os {
		if o.Stage != os[0].Stage || o.SKU != os[0].SKU || o.Round != os[0].Round {
			return fmt.Errorf("%w: orders of more than one stage, SKU or round", ErrBatchRefused)
		}
	}
	if deadlines == nil {
		return s.insertBatch(ctx, s.db, os)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.unavailable("begin batch", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.insertBatch(ctx, tx, os); err != nil {
		return err
	}
	if err := s.openBatch(ctx, tx, os, deadlines); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.unavailable("commit batch", err)
	}
	return nil
}

// insertBatch writes os with one INSERT, which lands only in their round
// (insertInRound's guard). A duplicate key is a batch run again or a
// refusal: only then are the ids read, and the orders not live yet
// inserted, unless one of them has another row (a void) or none is live
// (the duplicate is a buyer's).
func (s *SQLStore) insertBatch(ctx context.Context, x execer, os []Order) error {
	err := s.insertRows(ctx, x, os)
	if !errors.Is(err, errDuplicateKey) {
		return err
	}
	live, err := s.found(ctx, x, os)
	if err != nil {
		return err
	}
	rest := slices.DeleteFunc(slices.Clone(os), func(o Order) bool { return live[o.ID] })
	switch {
	case len(rest) == 0:
		return nil // the whole batch landed before
	case len(rest) == len(os):
		return fmt.Errorf("orders: %s: insert batch: %w: a duplicate buyer", s.d.name, ErrBatchRefused)
	}
	if err := s.insertRows(ctx, x, rest); errors.Is(err, errDuplicateKey) {
		return fmt.Errorf("orders: %s: insert batch: %w: %w", s.d.name, ErrBatchRefused, err)
	} else if err != nil {
		return err
	}
	return nil
}

// errDuplicateKey is insertRows' duplicate key, which insertBatch reads
// the ids to explain.
var errDuplicateKey = errors.New("duplicate key")

// insertRows is one INSERT ... SELECT of os that writes nothing once the
// stage's round is no longer theirs (a locking read on MySQL, as in
// insertInRound).
func (s *SQLStore) insertRows(ctx context.Context, x execer, os []Order) error {
	var rows strings.Builder
	args := make([]any, 0, 9*len(os)+3)
	for i, o := range os {
		if o.Created.IsZero() {
			o.Created = time.Now()
		}
		var onePerUser sql.NullString
		if o.OnePerUser {
			onePerUser = sql.NullString{String: o.User, Valid: true}
		}
		if i > 0 {
			rows.WriteString(" UNION ALL SELECT ?, ?, ?, " + s.d.buyer + ", ?, ?, ?, ?, " + s.d.buyer)
		}
		args = append(args, o.ID, o.Stage, o.SKU, o.User, o.Qty, o.Replica, o.Created.UnixMicro(), StatusLive, onePerUser)
	}
	args = append(args, os[0].Stage, os[0].SKU, os[0].Round)
	res, err := x.ExecContext(ctx, `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user)
SELECT * FROM (SELECT ? AS id, ? AS stage, ? AS sku, `+s.d.buyer+` AS user_id, ? AS qty, ? AS replica, ? AS created_at, ? AS status, `+s.d.buyer+` AS one_per_user`+
		rows.String()+`) AS batch
WHERE NOT EXISTS (SELECT 1 FROM lockstep_rounds WHERE stage = ? AND sku = ? AND round_no <> ?)`, args...)
	switch {
	case err == nil:
		n, err := res.RowsAffected()
		if err != nil {
			return s.unavailable("insert batch", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %w: round %d", ErrBatchRefused, ErrStaleRound, os[0].Round)
		}
		return nil
	case s.d.duplicate(err):
		return fmt.Errorf("orders: %s: insert batch: %w: %w", s.d.name, errDuplicateKey, err)
	case s.d.refused(err):
		return fmt.Errorf("orders: %s: insert batch: %w: %w", s.d.name, ErrBatchRefused, err)
	}
	return s.unavailable("insert batch", err)
}

// found is which ids of os are live orders already; any other row of one
// of them (void, cancelled) refuses the batch.
func (s *SQLStore) found(ctx context.Context, x execer, os []Order) (map[string]bool, error) {
	args := make([]any, len(os))
	for i, o := range os {
		args[i] = o.ID
	}
	rows, err := x.QueryContext(ctx, "SELECT id, status FROM lockstep_orders WHERE id IN (?"+strings.Repeat(", ?", len(os)-1)+")", args...)
	if err != nil {
		return nil, s.unavailable("read batch ids", err)
	}
	defer func() { _ = rows.Close() }()
	live := map[string]bool{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, s.unavailable("read batch ids", err)
		}
		if status != StatusLive {
			return nil, fmt.Errorf("%w: order %s is %s", ErrBatchRefused, id, status)
		}
		live[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read batch ids", err)
	}
	return live, nil
}

// openBatch opens the payments of os, as Payments.Open does each.
func (s *SQLStore) openBatch(ctx context.Context, tx *sql.Tx, os []Order, deadlines []time.Time) error {
	ignore := "INSERT OR IGNORE"
	if s.d.name == "mysql" {
		ignore = "INSERT IGNORE"
	}
	args := make([]any, 0, 7*len(os))
	for i, o := range os {
		args = append(args, o.ID, o.Stage, o.SKU, o.User, o.Qty, PaymentUnpaid, deadlines[i].UnixMicro())
	}
	_, err := tx.ExecContext(ctx, ignore+` INTO lockstep_payments (id, stage, sku, user_id, qty, status, deadline)
VALUES (?, ?, ?, ?, ?, ?, ?)`+strings.Repeat(", (?, ?, ?, ?, ?, ?, ?)", len(os)-1), args...)
	if err != nil {
		return s.unavailable("open batch payments", err)
	}
	return nil
}
