package orders

import (
	"context"
	"database/sql"
	"fmt"
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
// database did not answer.
func (s *SQLStore) InsertBatch(ctx context.Context, os []Order, deadlines []time.Time) error {
	if len(os) == 0 {
		return nil
	}
	if deadlines != nil && len(deadlines) != len(os) {
		return fmt.Errorf("orders: insert batch: %d deadlines for %d orders", len(deadlines), len(os))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.unavailable("begin batch", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.insertBatch(ctx, tx, os); err != nil {
		return err
	}
	if deadlines != nil {
		if err := s.openBatch(ctx, tx, os, deadlines); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return s.unavailable("commit batch", err)
	}
	return nil
}

func (s *SQLStore) insertBatch(ctx context.Context, tx *sql.Tx, os []Order) error {
	lock := ""
	if s.d.name == "mysql" {
		// As insertInRound's INSERT ... SELECT: a reset's round change
		// waits for the batch, or the batch for the reset.
		lock = " LOCK IN SHARE MODE"
	}
	var stale int
	o0 := os[0]
	for _, o := range os {
		if o.Stage != o0.Stage || o.SKU != o0.SKU || o.Round != o0.Round {
			return fmt.Errorf("%w: orders of more than one stage, SKU or round", ErrBatchRefused)
		}
	}
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM lockstep_rounds WHERE stage = ? AND sku = ? AND round_no <> ?"+lock,
		o0.Stage, o0.SKU, o0.Round).Scan(&stale)
	if err != nil {
		return s.unavailable("read round", err)
	}
	if stale > 0 {
		return fmt.Errorf("%w: %w: round %d", ErrBatchRefused, ErrStaleRound, o0.Round)
	}
	live, err := s.found(ctx, tx, os)
	if err != nil {
		return err
	}
	var values strings.Builder
	args := make([]any, 0, 9*len(os))
	for _, o := range os {
		if live[o.ID] {
			continue
		}
		if o.Created.IsZero() {
			o.Created = time.Now()
		}
		var onePerUser sql.NullString
		if o.OnePerUser {
			onePerUser = sql.NullString{String: o.User, Valid: true}
		}
		if len(args) > 0 {
			values.WriteString(", ")
		}
		values.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, o.ID, o.Stage, o.SKU, o.User, o.Qty, o.Replica, o.Created.UnixMicro(), StatusLive, onePerUser)
	}
	if len(args) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user)
VALUES `+values.String(), args...)
	switch {
	case err == nil:
		return nil
	case s.d.refused(err) || s.d.duplicate(err):
		return fmt.Errorf("orders: %s: insert batch: %w: %w", s.d.name, ErrBatchRefused, err)
	}
	return s.unavailable("insert batch", err)
}

// found is which ids of os are live orders already; any other row of one
// of them (void, cancelled) refuses the batch.
func (s *SQLStore) found(ctx context.Context, tx *sql.Tx, os []Order) (map[string]bool, error) {
	args := make([]any, len(os))
	for i, o := range os {
		args[i] = o.ID
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, status FROM lockstep_orders WHERE id IN (?"+strings.Repeat(", ?", len(os)-1)+")", args...)
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
