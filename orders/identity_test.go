package orders_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// TestOneBuyerIdentity: a buyer is her bytes, in every table and on both
// stores, as in Redis's buyer sets. MariaDB compared the order table's
// buyers PAD SPACE (utf8mb4_bin), so "alice " held alice's place in the
// unique index and HasOrder("alice ") found alice's order; and the
// payment table's in latin1_swedish_ci (no charset named), so "ANN" paid
// ann's order, "张三" could not pay hers (an illegal mix of collations),
// and the sweeper read her back as "??".
func TestOneBuyerIdentity(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if err := s.Reset(ctx, "st", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			for _, user := range []string{"alice ", "alice", "ann", "ANN", "张三"} {
				if err := s.Insert(ctx, order(user, true)); err != nil {
					t.Fatalf("%q's first order: %v", user, err)
				}
			}
			if c := counts(t, s); c.Buyers != 5 || c.DuplicateBuyers != 0 {
				t.Fatalf("counts %+v, want 5 buyers", c)
			}
			for _, user := range []string{"bob ", " alice", "Alice"} {
				if has, err := s.HasOrder(ctx, "st", "sku-1", user); err != nil || has {
					t.Errorf("HasOrder(%q) = %v %v, want false", user, has, err)
				}
			}

			p, err := s.(*orders.SQLStore).Payments(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ann, zhang := order("ann", true), order("张三", true)
			for _, o := range []orders.Order{ann, zhang} {
				if err := p.Open(ctx, o, time.Now().Add(-time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			for _, user := range []string{"ANN", "ann ", "Ann"} {
				if err := p.Pay(ctx, ann.ID, user); !errors.Is(err, orders.ErrNoOrder) {
					t.Errorf("%q pays ann's order: %v, want ErrNoOrder", user, err)
				}
			}
			if err := p.Pay(ctx, zhang.ID, "张三"); err != nil {
				t.Errorf("张三 pays her own order: %v", err)
			}
			cancelled, err := p.CancelExpired(ctx, "st", time.Now(), 10)
			if err != nil || len(cancelled) != 1 || cancelled[0].User != "ann" {
				t.Fatalf("cancelled %+v %v, want ann's order", cancelled, err)
			}
			if err := p.Pay(ctx, zhang.ID, "张三"); err != nil {
				t.Errorf("张三 pays again: %v", err)
			}
		})
	}
}

// TestOpenMigratesTheBuyerColumnsOfOlderTables: tables an older version
// created keep their rows, and their buyer columns compare bytes after
// the open.
func TestOpenMigratesTheBuyerColumnsOfOlderTables(t *testing.T) {
	ctx := context.Background()
	db := mariaDB(t)
	for _, ddl := range []string{
		`CREATE TABLE lockstep_orders (
	id CHAR(32) NOT NULL PRIMARY KEY,
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	user_id VARCHAR(64) NOT NULL,
	qty INT NOT NULL,
	replica VARCHAR(128) NOT NULL,
	created_at BIGINT NOT NULL,
	status VARCHAR(8) NOT NULL,
	one_per_user VARCHAR(64) NULL,
	UNIQUE KEY one_order_per_buyer (stage, sku, one_per_user),
	KEY orders_of_buyer (stage, sku, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
		`CREATE TABLE lockstep_payments (
	id CHAR(32) NOT NULL PRIMARY KEY,
	stage VARCHAR(64) NOT NULL,
	sku VARCHAR(64) NOT NULL,
	user_id VARCHAR(64) NOT NULL,
	qty INT NOT NULL,
	status VARCHAR(16) NOT NULL,
	deadline BIGINT NOT NULL,
	returned INT NOT NULL DEFAULT 0
) DEFAULT CHARSET=latin1`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	old := order("zoë", true)
	if _, err := db.ExecContext(ctx, `INSERT INTO lockstep_payments VALUES (?, 'st', 'sku-1', 'zoë', 1, 'unpaid', ?, 0)`, old.ID, time.Now().Add(time.Hour).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO lockstep_orders VALUES (?, 'st', 'sku-1', 'ann', 1, 'r1', 0, 'live', 'ann')`, orders.NewID()); err != nil {
		t.Fatal(err)
	}
	s, err := orders.OpenMySQL(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Payments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	zhang := order("张三", true)
	for _, o := range []orders.Order{order("ann ", true), zhang} {
		if err := s.Insert(ctx, o); err != nil {
			t.Fatalf("%q after the migration: %v", o.User, err)
		}
	}
	if err := p.Open(ctx, zhang, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := p.Pay(ctx, zhang.ID, "张三"); err != nil {
		t.Fatalf("张三 pays after the migration: %v", err)
	}
	if err := p.Pay(ctx, old.ID, "zoë"); err != nil {
		t.Fatalf("zoë pays the payment an older table kept in latin1: %v", err)
	}
	if c := counts(t, s); c.Orders != 3 || c.Buyers != 3 {
		t.Fatalf("counts %+v, want ann's old order and two new buyers", c)
	}
}

// A batch keeps each buyer's bytes, trailing spaces included, as Insert
// does: the order checker (seed 10) found "ann "'s order, answered 200 to
// her, stored as ann's.
func TestABatchKeepsEachBuyersBytes(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if err := s.Reset(ctx, "st", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			for _, batch := range [][]orders.Order{
				{order("ann ", true)},
				{order("bob  ", true), order("张三 ", true), order("eve", true)},
			} {
				if err := s.(*orders.SQLStore).InsertBatch(ctx, batch, nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, user := range []string{"ann ", "bob  ", "张三 ", "eve"} {
				if has, err := s.HasOrder(ctx, "st", "sku-1", user); err != nil || !has {
					t.Errorf("HasOrder(%q) = %v %v after its batch, want true", user, has, err)
				}
			}
			for _, user := range []string{"ann", "bob", "张三"} {
				if has, err := s.HasOrder(ctx, "st", "sku-1", user); err != nil || has {
					t.Errorf("HasOrder(%q) = %v %v, want false: only her look-alike bought", user, has, err)
				}
			}
		})
	}
}
