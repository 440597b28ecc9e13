package orders_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/orders"
)

// stores opens each implementation for t: MariaDB and the SQLite file.
func stores(t *testing.T) map[string]orders.Store {
	t.Helper()
	ctx := context.Background()
	lite, err := orders.OpenSQLite(ctx, filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	return map[string]orders.Store{"sqlite": lite, "mariadb": openMariaDB(t)}
}

// openMariaDB starts a MariaDB for t and opens the store on a pool of its
// database lockstep (a test's hook may write while a read transaction
// holds a connection).
func openMariaDB(t *testing.T) *orders.SQLStore {
	t.Helper()
	s, err := orders.OpenMySQL(context.Background(), mariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mariaDB starts a MariaDB for t and opens its database lockstep.
func mariaDB(t *testing.T) *sql.DB {
	t.Helper()
	m := lockservertest.MariaDB(t)
	admin, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS lockstep"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", m.DSN("lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func order(user string, onePerUser bool) orders.Order {
	return orders.Order{ID: orders.NewID(), Stage: "st", SKU: "sku-1", User: user, Qty: 1, Replica: "r1", OnePerUser: onePerUser}
}

func counts(t *testing.T, s orders.Store) orders.Counts {
	t.Helper()
	c, err := s.Counts(context.Background(), "st", "sku-1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEveryWriteIsSafeToLoseRepeatOrDelay(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := s.Reset(ctx, "st", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			o := order("alice", true)
			// A lost reply, or a client library's retry: the same id twice.
			for range 2 {
				if err := s.Insert(ctx, o); err != nil {
					t.Fatalf("insert %s: %v", o.ID, err)
				}
			}
			if c := counts(t, s); c.Orders != 1 {
				t.Fatalf("an insert sent twice made %d orders, want 1", c.Orders)
			}
			if err := s.Void(ctx, o); !errors.Is(err, orders.ErrOrdered) {
				t.Fatalf("void of an inserted order: %v, want ErrOrdered", err)
			}
			// A late insert: the shop gave up and voided its id first.
			late := order("bob", true)
			for range 2 { // a void sent twice is one void
				if err := s.Void(ctx, late); err != nil {
					t.Fatalf("void: %v", err)
				}
			}
			if err := s.Insert(ctx, late); !errors.Is(err, orders.ErrVoided) {
				t.Fatalf("late insert after a void: %v, want ErrVoided", err)
			}
			if err := s.Insert(ctx, order("bob", true)); err != nil {
				t.Fatalf("bob's void row blocked his next order: %v", err)
			}
			if c := counts(t, s); c != (orders.Counts{Orders: 2, Units: 2, Buyers: 2}) {
				t.Fatalf("counts %+v, want 2 orders of 2 buyers", c)
			}
		})
	}
}

func TestTheUniqueIndexStopsASecondOrderOnlyWhereTheStageKeepsIt(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := s.Reset(ctx, "st", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			for _, o := range []orders.Order{order("carol", true), order("dave", false), order("dave", false)} {
				if err := s.Insert(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Insert(ctx, order("carol", true)); !errors.Is(err, orders.ErrDuplicateBuyer) {
				t.Fatalf("carol's second order: %v, want ErrDuplicateBuyer", err)
			}
			want := orders.Counts{Orders: 3, Units: 3, Buyers: 2, DuplicateBuyers: 1}
			if c := counts(t, s); c != want {
				t.Fatalf("counts %+v, want %+v", c, want)
			}
			has, err := s.HasOrder(ctx, "st", "sku-1", "dave")
			if err != nil || !has {
				t.Fatalf("HasOrder(dave) = %v, %v", has, err)
			}
			first, err := s.List(ctx, "st", "sku-1", "", 2)
			if err != nil || len(first) != 2 {
				t.Fatalf("first page: %d orders, %v", len(first), err)
			}
			rest, err := s.List(ctx, "st", "sku-1", first[1].ID, 2)
			if err != nil || len(rest) != 1 || rest[0].ID <= first[1].ID {
				t.Fatalf("second page: %+v, %v", rest, err)
			}
		})
	}
}

// Sales that name no buyer (the optimistic stages ignore it) are orders of
// nobody: never counted as a buyer, nor as anyone's duplicate.
func TestAnonymousOrdersAreNoBuyersDuplicates(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := s.Reset(ctx, "st", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			for _, o := range []orders.Order{order("", false), order("", false), order("", false), order("hana", false), order("hana", false)} {
				if err := s.Insert(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			c := counts(t, s)
			if want := (orders.Counts{Orders: 5, Units: 5, Buyers: 1, Anonymous: 3, DuplicateBuyers: 1}); c != want || c.DuplicateOrders() != 1 {
				t.Fatalf("counts %+v (%d duplicate orders), want %+v and 1 duplicate order (hana's second)", c, c.DuplicateOrders(), want)
			}
		})
	}
}

// A reset moves the stage's round: an insert of the round before, arriving
// after the reset (late, or sent again), writes nothing; a reset of an
// older round arriving after a newer one deletes nothing of the newer.
func TestAResetFencesTheInsertsOfTheRoundBefore(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inRound := func(user string, round int64) orders.Order {
				o := order(user, true)
				o.Round = round
				return o
			}
			if err := s.Insert(ctx, inRound("ivy", 0)); err != nil { // never reset: round 0
				t.Fatalf("insert before any reset: %v", err)
			}
			if err := s.Reset(ctx, "st", "sku-1", 10, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Insert(ctx, inRound("jack", 0)); !errors.Is(err, orders.ErrStaleRound) {
				t.Fatalf("late insert of round 0 after the reset to 1: %v, want ErrStaleRound", err)
			}
			if err := s.Insert(ctx, inRound("kim", 1)); err != nil {
				t.Fatalf("insert of round 1: %v", err)
			}
			if err := s.Reset(ctx, "st", "sku-1", 10, 3); err != nil {
				t.Fatal(err)
			}
			if err := s.Insert(ctx, inRound("lea", 3)); err != nil {
				t.Fatalf("insert of round 3: %v", err)
			}
			if err := s.Reset(ctx, "st", "sku-1", 10, 2); err != nil { // round 2's reset, late
				t.Fatal(err)
			}
			if err := s.Insert(ctx, inRound("max", 2)); !errors.Is(err, orders.ErrStaleRound) {
				t.Fatalf("insert of round 2 after round 3: %v, want ErrStaleRound", err)
			}
			if c := counts(t, s); c.Orders != 1 || c.Buyers != 1 {
				t.Fatalf("counts %+v, want lea's order of round 3 alone", c)
			}
		})
	}
}

func TestBuyComparesAndSetsTheStockRow(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := s.Reset(ctx, "st", "sku-1", 2, 0); err != nil {
				t.Fatal(err)
			}
			// The version check: a sale that read 5, or 1 (a void gave a unit
			// back since), finds 2 and writes nothing.
			for _, read := range []int64{5, 1} {
				if _, err := s.Buy(ctx, order("erin", false), orders.SameStock, read); !errors.Is(err, orders.ErrConflict) {
					t.Fatalf("stale version %d: %v, want ErrConflict", read, err)
				}
			}
			o := order("erin", false)
			for range 2 { // the COMMIT's reply lost: the retry takes nothing more
				remaining, err := s.Buy(ctx, o, orders.SameStock, 2)
				if err != nil || remaining != 1 {
					t.Fatalf("buy: %d, %v; want 1 left", remaining, err)
				}
			}
			if _, err := s.Buy(ctx, order("frank", false), orders.EnoughStock, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Buy(ctx, order("gina", false), orders.EnoughStock, 0); !errors.Is(err, orders.ErrSoldOut) {
				t.Fatalf("buy of an empty row: %v, want ErrSoldOut", err)
			}
			st, err := s.Stock(ctx, "st", "sku-1")
			if err != nil || st != (orders.Stock{Initial: 2, Stock: 0}) {
				t.Fatalf("stock %+v, %v", st, err)
			}
			if c := counts(t, s); c.Units != 2 || c.Orders != 2 {
				t.Fatalf("counts %+v: a refused buy left an order", c)
			}
		})
	}
}

// TestAPaymentArrivingAsItsRowIsOpenedIsPaid: the workers open a payment
// just after its order's insert, so a payment can find no row in its
// compare-and-set and an unpaid one when it reads the state. It must pay
// it, not answer paid and leave it unpaid for the sweeper to cancel.
func TestAPaymentArrivingAsItsRowIsOpenedIsPaid(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			o, p := anInsertedAsyncOrder(t, s)
			p.SetBetweenPayAndRead(func() {
				if err := p.Open(ctx, o, time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
				}
			})
			if err := p.Pay(ctx, o.ID, o.User); err != nil {
				t.Fatalf("pay: %v", err)
			}
			if status, err := p.Status(ctx, o.ID, o.User); err != nil || status != orders.PaymentPaid {
				t.Errorf("answered paid, the payment is %q (%v)", status, err)
			}
		})
	}
}

// TestOnlyItsBuyerPaysAnOrder: a payment naming another buyer finds no
// order and leaves the payment unpaid.
func TestOnlyItsBuyerPaysAnOrder(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			o, p := anInsertedAsyncOrder(t, s)
			if err := p.Open(ctx, o, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := p.Pay(ctx, o.ID, "user-2"); !errors.Is(err, orders.ErrNoOrder) {
				t.Fatalf("user-2 pays user-1's order: %v, want ErrNoOrder", err)
			}
			if status, err := p.Status(ctx, o.ID, o.User); err != nil || status != orders.PaymentUnpaid {
				t.Errorf("after another buyer's payment the payment is %q (%v), want unpaid", status, err)
			}
		})
	}
}

// TestTheSweepersCancelRechecksTheDeadline: the sweeper lists the expired
// payments, then cancels each with a compare-and-set; a payment whose row
// the set finds not expired (a reset deleted the listed row and a late
// Open wrote it again since) is not cancelled.
func TestTheSweepersCancelRechecksTheDeadline(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			o, p := anInsertedAsyncOrder(t, s)
			deadline := time.Now().Add(time.Hour)
			if err := p.Open(ctx, o, deadline); err != nil {
				t.Fatal(err)
			}
			if cancelled, err := p.CancelOne(ctx, o, deadline.Add(-time.Minute)); err != nil || cancelled {
				t.Fatalf("cancel before the deadline: %v (%v), want nothing cancelled", cancelled, err)
			}
			if status, err := p.Status(ctx, o.ID, o.User); err != nil || status != orders.PaymentUnpaid {
				t.Fatalf("payment %q (%v), want unpaid", status, err)
			}
			if cancelled, err := p.CancelOne(ctx, o, deadline.Add(time.Minute)); err != nil || !cancelled {
				t.Fatalf("cancel past the deadline: %v (%v), want cancelled", cancelled, err)
			}
		})
	}
}

// TestTheLedgerIsOneSnapshot: a cancelled order is in the ledger's
// cancelled orders, not its live ones. On MariaDB the cancel runs between
// the ledger's two reads (a hook): the ledger finds the order live or
// cancelled, never both, which would count its unit twice in the async
// audit. Not on SQLite: its transactions here begin IMMEDIATE, so a cancel
// waits for the read to end.
func TestTheLedgerIsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			o := order("ann", true)
			p := paymentsOfInserted(t, s, o)
			if err := p.Open(ctx, o, time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			cancel := func() {
				if c, err := p.CancelExpired(ctx, o.Stage, time.Now(), 10); err != nil || len(c) != 1 {
					t.Errorf("cancel: %v, %v", c, err)
				}
			}
			if name == "sqlite" {
				cancel()
			} else {
				p.SetBetweenLedgerReads(cancel)
				l, err := p.Ledger(ctx, o.Stage, o.SKU)
				if err != nil {
					t.Fatal(err)
				}
				if l.Units != 1 || len(l.Cancelled) != 0 {
					t.Errorf("read across a cancel: %d units live, cancelled %v; want the order live only", l.Units, l.Cancelled)
				}
				p.SetBetweenLedgerReads(nil)
			}
			if l, err := p.Ledger(ctx, o.Stage, o.SKU); err != nil || l.Units != 0 || len(l.Cancelled) != 1 || l.Cancelled[o.ID] != 1 {
				t.Errorf("after the cancel: %+v, %v; want the order cancelled only", l, err)
			}
		})
	}
}

// paymentsOfInserted inserts o into s and opens s's payment table.
// anInsertedAsyncOrder is user-1's async-stream order, inserted into s, and
// s's payments.
func anInsertedAsyncOrder(t *testing.T, s orders.Store) (orders.Order, *orders.Payments) {
	t.Helper()
	o := order("user-1", true)
	o.Stage = "async-stream"
	return o, paymentsOfInserted(t, s, o)
}

func paymentsOfInserted(t *testing.T, s orders.Store, o orders.Order) *orders.Payments {
	t.Helper()
	ctx := context.Background()
	p, err := s.(*orders.SQLStore).Payments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, o); err != nil {
		t.Fatal(err)
	}
	return p
}

// A payment is fenced by its order's round, as the order's insert is, and
// a reset through Payments deletes the payments in the transaction that
// moves the round: a payment opened late after a reset (its order deleted
// by it) is refused, so none outlives its order; before, it landed, and a
// sweeper would cancel an order that is not there and give its unit back.
func TestAPaymentOfTheRoundBeforeIsNotOpened(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			o := order("nia", true)
			o.Stage = "pay-round"
			p := paymentsOfInserted(t, s, o)
			if err := p.Open(ctx, o, time.Now().Add(time.Hour)); err != nil {
				t.Fatalf("open in round 0: %v", err)
			}
			if err := p.Reset(ctx, "pay-round", "sku-1", 10, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Status(ctx, o.ID, "nia"); !errors.Is(err, orders.ErrNoOrder) {
				t.Fatalf("payment after the reset: %v, want it deleted with its order", err)
			}
			if err := p.Open(ctx, o, time.Now().Add(time.Hour)); !errors.Is(err, orders.ErrStaleRound) {
				t.Fatalf("open of round 0 after the reset to 1: %v, want ErrStaleRound", err)
			}
			if _, err := p.Status(ctx, o.ID, "nia"); !errors.Is(err, orders.ErrNoOrder) {
				t.Fatalf("payment opened late: %v, want none", err)
			}
			o.ID, o.Round = orders.NewID(), 1
			if err := s.Insert(ctx, o); err != nil {
				t.Fatal(err)
			}
			for range 2 { // opened again: the same row
				if err := p.Open(ctx, o, time.Now().Add(time.Hour)); err != nil {
					t.Fatalf("open in round 1: %v", err)
				}
			}
		})
	}
}
