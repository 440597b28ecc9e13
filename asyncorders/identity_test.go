package asyncorders_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/orders"
)

// A buyer is her bytes in Redis's buyer set, in the order table and in
// the payment table alike. On MariaDB "ann " was ann to the order table
// (PAD SPACE): admitted by Redis, her insert refused by the unique index
// and dead-lettered, and not freed either (HasOrder found ann's row); the
// payment table compared in latin1_swedish_ci, so "ANN" paid ann's order,
// "张三" could not pay hers, and the sweeper freed "??" instead of "李四".
func TestOneBuyerIdentityAcrossRedisAndTheDatabase(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "identity", 10)
	c := config("w1", asyncorders.Correct)
	c.Payments, c.PayWithin = e.payments, 500*time.Millisecond
	e.start(t, q, c)
	buyers := []string{"ann", "ann ", "ANN", "张三", "李四"}
	ids := map[string]string{}
	for _, user := range buyers {
		m := message(user)
		if _, err := q.Admit(ctx, m, true); err != nil {
			t.Fatalf("admit %q: %v", user, err)
		}
		ids[user] = m.OrderID
	}
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 5 || inv.DeadLetters != 0 {
		t.Fatalf("after the drain: %+v; want five orders, no dead letter", inv)
	}
	if err := e.payments.Pay(ctx, ids["ann"], "ANN"); !errors.Is(err, orders.ErrNoOrder) {
		t.Fatalf("ANN pays ann's order: %v, want ErrNoOrder", err)
	}
	for _, user := range []string{"ann", "张三"} {
		if err := e.payments.Pay(ctx, ids[user], user); err != nil {
			t.Fatalf("%s pays her order: %v", user, err)
		}
	}
	time.Sleep(600 * time.Millisecond)
	if err := asyncorders.NewSweeper(q, e.payments, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil))).Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The unpaid three are freed, each herself: she buys again; the two
	// who paid keep their place.
	for _, user := range buyers {
		_, err := q.Admit(ctx, message(user), true)
		paid := user == "ann" || user == "张三"
		if paid && !errors.Is(err, asyncorders.ErrAlreadyBought) || !paid && err != nil {
			t.Errorf("%q buys again after the sweep: %v (paid: %v)", user, err, paid)
		}
	}
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 5 || inv.DeadLetters != 0 {
		t.Fatalf("after the second sales: %+v", inv)
	}
}
