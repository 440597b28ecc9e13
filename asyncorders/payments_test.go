package asyncorders_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/orders"
)

func TestPaymentTimeout(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	payments, err := e.store.Payments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	paying := func(consumer string, within time.Duration) asyncorders.Config {
		c := config(consumer, asyncorders.Correct)
		c.Payments, c.PayWithin = payments, within
		return c
	}

	t.Run("an unpaid order is cancelled at its deadline, its unit back on sale once, and sold again", func(t *testing.T) {
		q := e.queue(t, "pay", 2)
		e.start(t, q, paying("w1", 300*time.Millisecond))
		ann, bob := message("ann"), message("bob")
		// A sweep at a moment before both deadlines, however long the
		// drain takes on a loaded machine (it once took past 300 ms).
		beforeTheDeadlines := time.Now()
		for _, m := range []asyncorders.Message{ann, bob} {
			if _, err := q.Admit(ctx, m, true); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, q)
		if err := payments.Pay(ctx, bob.OrderID, "bob"); err != nil {
			t.Fatalf("bob pays: %v", err)
		}
		sweeper := asyncorders.NewSweeper(q, payments, time.Hour, quiet)
		if err := sweeper.Sweep(ctx, beforeTheDeadlines); err != nil {
			t.Fatal(err)
		}
		if inv := check(t, e, q); inv.Remaining != 0 || inv.Units != 2 {
			t.Fatalf("before the deadline: %+v", inv)
		}
		time.Sleep(400 * time.Millisecond)
		for range 2 { // a second pass (another sweeper, a retry) returns nothing more
			if err := sweeper.Sweep(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if inv := check(t, e, q); !inv.Holds || inv.Remaining != 1 || inv.Units != 1 {
			t.Fatalf("after the sweep: %+v", inv)
		}
		// A sweeper killed after giving the unit back, before recording it:
		// the next pass gives it back again, and the order id's mark makes
		// that nothing.
		if _, err := e.db.Exec("UPDATE lockstep_payments SET returned = 0 WHERE id = ?", ann.OrderID); err != nil {
			t.Fatal(err)
		}
		if err := sweeper.Sweep(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if inv := check(t, e, q); !inv.Holds || inv.Remaining != 1 {
			t.Fatalf("after a killed sweeper's retry: %+v", inv)
		}
		for _, tc := range []struct {
			id, user string
			want     error
		}{
			{ann.OrderID, "ann", orders.ErrCancelled},
			{bob.OrderID, "bob", nil}, // paid again: the same answer
			{bob.OrderID, "ann", orders.ErrNoOrder},
			{orders.NewID(), "ann", orders.ErrNoOrder},
		} {
			if err := payments.Pay(ctx, tc.id, tc.user); !errors.Is(err, tc.want) {
				t.Errorf("%s pays %s: %v, want %v", tc.user, tc.id, err, tc.want)
			}
		}
		// ann's place is free and her unit on sale: she buys it again.
		if _, err := q.Admit(ctx, message("ann"), true); err != nil {
			t.Fatalf("ann again: %v", err)
		}
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Remaining != 0 || inv.Units != 2 {
			t.Fatalf("after the second sale: %+v", inv)
		}
	})

	t.Run("payments racing two sweepers: each order paid or cancelled, never both, each cancelled unit back once", func(t *testing.T) {
		const n = 60
		q := e.queue(t, "pay-race", n)
		e.start(t, q, paying("w1", 50*time.Millisecond))
		msgs := make([]asyncorders.Message, n)
		for i := range msgs {
			msgs[i] = message(fmt.Sprintf("buyer-%d", i))
			if _, err := q.Admit(ctx, msgs[i], true); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, q)
		time.Sleep(60 * time.Millisecond) // the deadlines pass: payments and sweepers race
		var wg sync.WaitGroup
		results := make([]error, n)
		pay := func(i int) { results[i] = payments.Pay(ctx, msgs[i].OrderID, msgs[i].User) }
		// Both outcomes happen whatever the machine's speed: the newest is
		// paid before the sweepers start, the oldest only after a sweeper's
		// first pass, which cancelled it.
		pay(n - 1)
		swept := make(chan struct{})
		var once sync.Once
		for range 2 {
			wg.Go(func() {
				s := asyncorders.NewSweeper(q, payments, time.Hour, quiet)
				for range 5 {
					if err := s.Sweep(ctx, time.Now()); err != nil {
						t.Error(err)
					}
					once.Do(func() { close(swept) })
				}
			})
		}
		wg.Go(func() { <-swept; pay(0) })
		// The sweepers cancel from the oldest deadline, the payers pay from
		// the newest: they meet in the middle.
		for i := n - 2; i > 0; i-- {
			wg.Go(func() { pay(i) })
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		if err := asyncorders.NewSweeper(q, payments, time.Hour, quiet).Sweep(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		var paid, cancelled int64
		for i, m := range msgs {
			status, err := payments.Status(ctx, m.OrderID, m.User)
			switch {
			case err != nil:
				t.Fatal(err)
			case results[i] == nil && status == orders.PaymentPaid:
				paid++
			case errors.Is(results[i], orders.ErrCancelled) && status == orders.PaymentCancelled:
				cancelled++
			default:
				t.Errorf("order %d: payment answered %v, status %s", i, results[i], status)
			}
		}
		inv := check(t, e, q)
		if !inv.Holds || inv.Units != paid || inv.Remaining != cancelled || paid+cancelled != n {
			t.Fatalf("paid %d, cancelled %d; invariant %+v", paid, cancelled, inv)
		}
		if paid == 0 || cancelled == 0 {
			t.Fatalf("paid %d, cancelled %d: no race was run", paid, cancelled)
		}
		t.Logf("%d paid, %d cancelled", paid, cancelled)
	})
}

// TestAuditWhileTheSweeperWorks reads the audit between the sweeper's two
// steps (the cancel in MySQL, then the unit's return in Redis), by hooks,
// not by timing: the unit counts once, as returning, never as missing.
func TestAuditWhileTheSweeperWorks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const payWithin = 100 * time.Millisecond
	// expired admits ann and bob, writes their orders, has bob pay and
	// waits past ann's deadline: the next sweep cancels ann's order.
	expired := func(t *testing.T, stage string) (*asyncorders.Queue, asyncorders.Message) {
		q := e.queue(t, stage, 2)
		c := config("w1", asyncorders.Correct)
		c.Payments, c.PayWithin = e.payments, payWithin
		e.start(t, q, c)
		ann, bob := message("ann"), message("bob")
		for _, m := range []asyncorders.Message{ann, bob} {
			if _, err := q.Admit(ctx, m, true); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, q)
		if err := e.payments.Pay(ctx, bob.OrderID, "bob"); err != nil {
			t.Fatalf("bob pays: %v", err)
		}
		time.Sleep(2 * payWithin)
		return q, ann
	}
	returning := func(t *testing.T, when string, inv asyncorders.Invariant) {
		t.Helper()
		if inv.Undersold != 0 || inv.Oversold != 0 || inv.Returning != 1 || inv.Units != 1 || inv.Remaining != 0 || inv.Holds {
			t.Errorf("%s: want ann's unit returning, bob's ordered, none on sale, none missing: %+v", when, inv)
		}
	}
	settled := func(t *testing.T, q *asyncorders.Queue) {
		t.Helper()
		if inv := check(t, e, q); !inv.Holds || inv.Returning != 0 || inv.Units != 1 || inv.Remaining != 1 {
			t.Errorf("after the sweep: want ann's unit back on sale: %+v", inv)
		}
	}

	t.Run("read between the cancel and the return", func(t *testing.T) {
		q, _ := expired(t, "audit-mid-sweep")
		s := asyncorders.NewSweeper(q, e.payments, time.Hour, quiet)
		read := false
		s.SetBetweenCancelAndReturn(func() error {
			returning(t, "between the cancel and the return", check(t, e, q))
			read = true
			return nil
		})
		if err := s.Sweep(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !read {
			t.Fatal("the sweep cancelled nothing")
		}
		settled(t, q)
	})

	t.Run("a whole sweep between the audit's Redis read and its MySQL read", func(t *testing.T) {
		q, _ := expired(t, "audit-sweep-between-reads")
		s := asyncorders.NewSweeper(q, e.payments, time.Hour, quiet)
		q.SetBetweenAccountReads(func() {
			if err := s.Sweep(ctx, time.Now()); err != nil {
				t.Error(err)
			}
		})
		inv := check(t, e, q)
		q.SetBetweenAccountReads(nil)
		returning(t, "the stock read before the return, the orders after the cancel", inv)
		settled(t, q)
	})

	t.Run("a sweeper killed between the cancel and the return: the next one gives the unit back, once", func(t *testing.T) {
		q, ann := expired(t, "audit-sweeper-killed")
		killed := errors.New("killed between the cancel and the return")
		s := asyncorders.NewSweeper(q, e.payments, time.Hour, quiet)
		s.SetBetweenCancelAndReturn(func() error { return killed })
		if err := s.Sweep(ctx, time.Now()); !errors.Is(err, killed) {
			t.Fatalf("the killed sweep: %v", err)
		}
		returning(t, "after the kill", check(t, e, q))
		next := asyncorders.NewSweeper(q, e.payments, time.Hour, quiet)
		for range 2 { // the next sweeper, then one more pass: returned once
			if err := next.Sweep(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		settled(t, q)
		if err := e.payments.Pay(ctx, ann.OrderID, "ann"); !errors.Is(err, orders.ErrCancelled) {
			t.Errorf("ann pays late: %v, want ErrCancelled", err)
		}
		if _, err := q.Admit(ctx, message("carol"), true); err != nil {
			t.Fatalf("the unit given back does not sell again: %v", err)
		}
	})
}

// A give-up that finds the order inserted (Void: ErrOrdered) keeps the
// order, and opens its payment: the worker that inserted it may have died
// before it did, and an order without a payment row could never be paid
// (404) nor cancelled by the sweeper.
func TestAGiveUpThatFindsTheOrderOpensItsPayment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "ordered", 5)
	m := message("ann")
	a, err := q.Admit(ctx, m, true)
	if err != nil {
		t.Fatal(err)
	}
	// A worker inserted ann's order and died before opening its payment;
	// every later insert of it is refused, until the give-up's void finds
	// the row.
	if err := e.store.Insert(ctx, orders.Order{ID: m.OrderID, Stage: "ordered", SKU: sku, User: "ann", Qty: 1, Replica: "r1", OnePerUser: true, Round: a.Round}); err != nil {
		t.Fatal(err)
	}
	refuseUntilTheDrain(t, e, "ann")
	c := config("w1", asyncorders.Correct)
	c.Payments, c.PayWithin = e.payments, time.Hour
	e.start(t, q, c)
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 1 || inv.DeadLetters != 0 {
		t.Fatalf("after the give-up: %+v; want ann's order standing", inv)
	}
	if st, err := e.payments.Status(ctx, m.OrderID, "ann"); err != nil || st != orders.PaymentUnpaid {
		t.Fatalf("ann's payment: %q %v; want unpaid", st, err)
	}
	if err := e.payments.Pay(ctx, m.OrderID, "ann"); err != nil {
		t.Fatalf("ann pays: %v", err)
	}
}

// A sweeper that cancelled an unpaid order and gives its unit back after a
// reset (here between the Redis reset and the order table's, where the
// cancelled payment is still listed) gives nothing back: the unit was in
// the stock the reset replaced. Without the round, it went into the new
// stock (11 of 10).
func TestASweeperLateAcrossAResetGivesNothingBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "sweep-reset", 10)
	c := e.payingConfig("w1")
	c.PayWithin = time.Millisecond
	e.start(t, q, c)
	if _, err := q.Admit(ctx, message("ann"), true); err != nil {
		t.Fatal(err)
	}
	drain(t, q)
	sweeper := asyncorders.NewSweeper(q, e.payments, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var round int64
	sweeper.SetBetweenCancelAndReturn(func() (err error) {
		round, err = q.Reset(ctx, sku, 10, 0) // the Redis half of a reset
		return err
	})
	if err := sweeper.Sweep(ctx, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	sweeper.SetBetweenCancelAndReturn(nil)
	if err := e.payments.Reset(ctx, "sweep-reset", sku, 10, round); err != nil { // and the table's
		t.Fatal(err)
	}
	if inv := check(t, e, q); !inv.Holds || inv.Remaining != 10 || inv.Units != 0 {
		t.Fatalf("after a give-back late across a reset: %+v; want the 10 units of the reset", inv)
	}
}

// The order checker's finding 2, during a MariaDB stop longer than the
// payment window: a worker inserted a sale's order (its payment open)
// and was killed before its XACK; the sweeper cancelled the unpaid order
// and was killed before it gave the unit back; the claimer's insert then
// met the cancelled order's void row and dead-lettered the entry as
// "order id voided before its insert". The sale was answered 200 and got
// its order, which its buyer did not pay: that is the sweeper's cancel,
// not a give-up, and the claimer finishes it as the sweeper would (the
// unit back once, the buyer freed, the entry acknowledged), with no dead
// letter.
func TestAClaimAfterTheSweepersCancelDeadLettersNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "swept-pending", 10)
	ann := message("ann")
	if _, err := q.Admit(ctx, ann, true); err != nil {
		t.Fatal(err)
	}
	c := e.payingConfig("dies")
	c.PayWithin = time.Millisecond
	e.runUntilDeathAs(t, q, c, asyncorders.AfterInsert)
	sweeper := asyncorders.NewSweeper(q, e.payments, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	sweeper.SetBetweenCancelAndReturn(func() error { return errors.New("killed") })
	if err := sweeper.Sweep(ctx, time.Now().Add(time.Second)); err == nil {
		t.Fatal("the sweeper was not killed between its cancel and its give-back")
	}
	if st, err := e.payments.Status(ctx, ann.OrderID, "ann"); err != nil || st != orders.PaymentCancelled {
		t.Fatalf("ann's payment: %q %v; want cancelled", st, err)
	}
	c = e.payingConfig("w2")
	c.PayWithin = time.Millisecond
	e.start(t, q, c)
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Remaining != 10 || inv.Units != 0 || inv.DeadLetters != 0 {
		t.Fatalf("after the claim: %+v; want the unit back once, no dead letter", inv)
	}
	if _, err := q.Admit(ctx, message("ann"), true); err != nil {
		t.Fatalf("ann buys again once her unpaid order was cancelled: %v", err)
	}
}
