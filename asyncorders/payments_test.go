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
		if err := sweeper.Sweep(ctx, time.Now()); err != nil {
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
		for range 2 {
			wg.Go(func() {
				s := asyncorders.NewSweeper(q, payments, time.Hour, quiet)
				for range 5 {
					if err := s.Sweep(ctx, time.Now()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		// The sweepers cancel from the oldest deadline, the payers pay from
		// the newest: they meet in the middle.
		for i := n - 1; i >= 0; i-- {
			wg.Go(func() { results[i] = payments.Pay(ctx, msgs[i].OrderID, msgs[i].User) })
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
