package asyncorders_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/orders"
)

const sku = "sku-1"

// env is one Redis and one MariaDB, shared by a test's subtests; each
// subtest names its own stage, so neither its keys nor its rows meet.
type env struct {
	rdb     *redis.Client
	mariadb *lockserver.MariaDB
	db      *sql.DB
	store   *orders.SQLStore
	// payments are the store's payment table; check reads through them.
	payments *orders.Payments
}

func newEnv(t testing.TB) env {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	m := lockservertest.MariaDB(t)
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS lockstep"); err != nil {
		t.Fatal(err)
	}
	db, err = sql.Open("mysql", m.DSN("lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := orders.OpenMySQL(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	payments, err := store.Payments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The database refuses a live order of a buyer in test_refused: a
	// trigger's SIGNAL, an error about the row (orders.ErrRefused).
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS test_refused (user_id VARBINARY(64) PRIMARY KEY)",
		`CREATE TRIGGER IF NOT EXISTS test_refuse BEFORE INSERT ON lockstep_orders FOR EACH ROW
IF NEW.status = 'live' AND EXISTS (SELECT 1 FROM test_refused WHERE user_id = NEW.user_id) THEN
	SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test';
END IF`,
	} {
		if _, err := db.Exec(ddl); err != nil {
			t.Fatal(err)
		}
	}
	return env{rdb: rdb, mariadb: m, db: db, store: store, payments: payments}
}

// refuse has the database refuse every live order of user (allow false:
// accept them again).
func (e env) refuse(t testing.TB, user string, refuse bool) {
	t.Helper()
	query := "INSERT IGNORE INTO test_refused VALUES (?)"
	if !refuse {
		query = "DELETE FROM test_refused WHERE user_id = ?"
	}
	if _, err := e.db.Exec(query, user); err != nil {
		t.Fatal(err)
	}
}

// refusals is how many times the database refused entry id's order.
func (e env) refusals(t testing.TB, stage, id string) int64 {
	t.Helper()
	n, err := e.rdb.HGet(context.Background(), "lockstep:"+stage+":{"+sku+"}:refusals", id).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

// queue resets stage's SKU to stock units.
func (e env) queue(t testing.TB, stage string, stock int64) *asyncorders.Queue {
	t.Helper()
	q := asyncorders.NewQueue(e.rdb, stage)
	round, err := q.Reset(context.Background(), sku, stock, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.payments.Reset(context.Background(), stage, sku, stock, round); err != nil {
		t.Fatal(err)
	}
	return q
}

func message(user string) asyncorders.Message {
	return asyncorders.Message{OrderID: orders.NewID(), SKU: sku, User: user, Qty: 1, Replica: "r1"}
}

// admit admits one unit for each of n buyers.
func admit(t *testing.T, q *asyncorders.Queue, n int) {
	t.Helper()
	for i := range n {
		if _, err := q.Admit(context.Background(), message(fmt.Sprintf("buyer-%d", i)), true); err != nil {
			t.Fatal(err)
		}
	}
}

func config(consumer string, mode asyncorders.Mode) asyncorders.Config {
	c := asyncorders.DefaultConfig(consumer, []string{sku})
	c.Mode, c.Block, c.ClaimIdle, c.ClaimEvery, c.MaxDeliveries = mode, 50*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond, 3
	return c
}

// start runs a worker until the test ends or the returned stop is called.
func (e env) start(t testing.TB, q *asyncorders.Queue, c asyncorders.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := asyncorders.NewWorker(q, e.store, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func drain(t *testing.T, q *asyncorders.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.Drain(ctx, sku); err != nil {
		t.Fatal(err)
	}
}

func check(t testing.TB, e env, q *asyncorders.Queue) asyncorders.Invariant {
	t.Helper()
	inv, err := q.Check(context.Background(), e.store, e.payments, sku)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// readAsDeadConsumer reads n entries as a consumer that then dies: they
// stay pending under its name.
func readAsDeadConsumer(t *testing.T, e env, q *asyncorders.Queue, n int64) {
	t.Helper()
	s, err := e.rdb.XReadGroup(context.Background(), &redis.XReadGroupArgs{Group: asyncorders.Group, Consumer: "dead",
		Streams: []string{q.Stream(sku), ">"}, Count: n}).Result()
	if err != nil || int64(len(s[0].Messages)) != n {
		t.Fatalf("read as dead consumer: %v %v", s, err)
	}
}

func TestAsyncOrders(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	t.Run("admission takes the unit, adds the buyer and enqueues, or does nothing", func(t *testing.T) {
		q := e.queue(t, "admit", 2)
		first := message("ann")
		a, err := q.Admit(ctx, first, true)
		if err != nil || a.Remaining != 1 || a.OrderID != first.OrderID {
			t.Fatalf("admit: %+v %v", a, err)
		}
		// A lost reply's retry (or a second sale of the same buyer) runs the
		// script again: the buyer is in the set, nothing more is written.
		if _, err := q.Admit(ctx, first, true); !errors.Is(err, asyncorders.ErrAlreadyBought) {
			t.Fatalf("second admit of ann: %v", err)
		}
		if _, err := q.Admit(ctx, message("bob"), true); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Admit(ctx, message("cid"), true); !errors.Is(err, asyncorders.ErrSoldOut) {
			t.Fatalf("admit past the stock: %v", err)
		}
		// The buyer is checked by adding it (admit.lua), after the stock:
		// a buyer turned away sold out is not one who bought.
		if in, err := e.rdb.SIsMember(ctx, "lockstep:admit:{"+sku+"}:buyers", "cid").Result(); err != nil || in {
			t.Fatalf("cid, turned away sold out, is among the buyers: %v %v", in, err)
		}
		s, err := q.Stats(ctx, sku)
		if err != nil || s.Length != 2 || s.Remaining != 0 || s.Undelivered != 2 {
			t.Fatalf("stats: %+v %v", s, err)
		}
	})

	t.Run("two workers drain the stream into one order per sale and the invariant holds", func(t *testing.T) {
		q := e.queue(t, "drain", 100)
		e.start(t, q, config("w1", asyncorders.Correct))
		e.start(t, q, config("w2", asyncorders.Correct))
		admit(t, q, 60)
		drain(t, q)
		inv := check(t, e, q)
		if !inv.Holds || inv.Units != 60 || inv.Remaining != 40 || inv.Lags != 60 || inv.LagP99 <= 0 {
			t.Fatalf("invariant: %+v", inv)
		}
	})

	t.Run("a dead consumer's pending entries are claimed by a live worker", func(t *testing.T) {
		q := e.queue(t, "claim", 10)
		admit(t, q, 5)
		readAsDeadConsumer(t, e, q, 3)
		e.start(t, q, config("w1", asyncorders.Correct))
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Units != 5 {
			t.Fatalf("invariant: %+v", inv)
		}
	})

	t.Run("async-no-claim: a dead consumer's entries wait until a consumer of its name starts", func(t *testing.T) {
		q := e.queue(t, "no-claim", 10)
		admit(t, q, 5)
		readAsDeadConsumer(t, e, q, 3)
		e.start(t, q, config("w1", asyncorders.NoClaim))
		time.Sleep(time.Second) // three claim bounds
		inv := check(t, e, q)
		if inv.Holds || inv.Pending != 3 || inv.Undersold != 3 || inv.Units != 2 {
			t.Fatalf("before the restart: %+v", inv)
		}
		e.start(t, q, config("dead", asyncorders.NoClaim))
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Units != 5 {
			t.Fatalf("after the restart: %+v", inv)
		}
	})

	t.Run("async-wrong-ack: orders are written and every entry stays pending", func(t *testing.T) {
		q := e.queue(t, "wrong-ack", 10)
		e.start(t, q, config("w1", asyncorders.WrongAck))
		admit(t, q, 6)
		deadline := time.Now().Add(10 * time.Second)
		for check(t, e, q).Units < 6 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		inv := check(t, e, q)
		if inv.Units != 6 || inv.Pending != 6 || inv.Holds {
			t.Fatalf("wrong ack: %+v", inv)
		}
	})

	for _, tc := range []struct {
		at asyncorders.FaultPoint
		// rows: whether the entry it held had its order row when it died.
		rows int64
	}{
		{asyncorders.AfterRead, 0},
		{asyncorders.AfterInsert, 1}, // that one is delivered again: a duplicate delivery, one order
	} {
		t.Run("a worker that dies "+string(tc.at)+" holds its entry, and another's claim makes one order of each", func(t *testing.T) {
			stage := "dies-" + string(tc.at)
			q := e.queue(t, stage, 10)
			admit(t, q, 3)
			// One entry per read: in process the "death" only ends the
			// worker's context, and the rest of a batch would still be
			// handled (cmd/orderworker's test kills a process mid-batch).
			e.runUntilDeath(t, q, tc.at, 1)
			held, err := q.HeldBy(context.Background(), sku, "dies")
			if err != nil || len(held) != 1 {
				t.Fatalf("held after the death: %+v %v", held, err)
			}
			written, err := e.store.List(context.Background(), stage, sku, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			rows := asyncorders.Written(held, written)
			if inv := check(t, e, q); rows != tc.rows || inv.Units != int64(tc.rows) || inv.Pending != 1 {
				t.Fatalf("after the death: %d of the held entries with a row, %+v", rows, inv)
			}
			e.start(t, q, config("w2", asyncorders.Correct))
			drain(t, q)
			inv := check(t, e, q)
			if c, _ := e.store.Counts(context.Background(), stage, sku); !inv.Holds || c.Orders != 3 || c.DuplicateBuyers != 0 {
				t.Fatalf("after the redelivery: %+v, %+v", inv, c)
			}
		})
	}

	// A death right after a claim, and one inside a give-up, between the
	// void and compensate.lua (after-void): the next claimer finishes what
	// the dead one began. A give-up's two causes differ in what the next
	// claimer finds: an entry the database refused is refused again, past
	// MaxDeliveries, and its give-up runs again (Void finds its own void
	// row); a duplicate buyer's entry meets the void row (ErrVoided).
	for i, tc := range []struct {
		name string
		at   asyncorders.FaultPoint
		// setup admits what the dying worker takes; buyer is the buyer of
		// the entry it dies holding.
		setup func(t *testing.T, q *asyncorders.Queue, stage string) (buyer string)
		// held: entries it dies holding, each delivered deliveries times
		// (the read, then its own claims after each refusal);
		// returned: units back on sale after the drain, the dead letters'
		// count.
		held, deliveries, returned int64
		// buyerFree: after the drain, the buyer can buy again (the
		// duplicate buyer's other order stands, and she cannot).
		buyerFree bool
	}{
		{name: "a worker that dies after-claim leaves the claimed entries to the next claim", at: asyncorders.AfterClaim,
			setup: func(t *testing.T, q *asyncorders.Queue, _ string) string {
				admit(t, q, 3)
				readAsDeadConsumer(t, e, q, 3)
				return "buyer-0"
			},
			held: 3, deliveries: 2, returned: 0},
		{name: "a worker that dies after-void giving up an entry the database refused: the next claimer returns the unit once and frees the buyer", at: asyncorders.AfterVoid,
			setup: func(t *testing.T, q *asyncorders.Queue, _ string) string {
				refuseUntilTheDrain(t, e, "ann")
				if _, err := q.Admit(ctx, message("ann"), true); err != nil {
					t.Fatal(err)
				}
				return "ann"
			},
			held: 1, deliveries: 3, returned: 1, buyerFree: true},
		{name: "a worker that dies after-void giving up a duplicate buyer's entry: the next claimer returns the unit once and keeps the buyer", at: asyncorders.AfterVoid,
			setup: func(t *testing.T, q *asyncorders.Queue, stage string) string {
				admitTwice(t, e, q, stage, "ann")
				return "ann"
			},
			held: 1, deliveries: 1, returned: 1},
		{name: "a worker that dies after-void giving up a duplicate buyer's entry the database refused: the next claimer returns the unit once and keeps the buyer", at: asyncorders.AfterVoid,
			setup: func(t *testing.T, q *asyncorders.Queue, stage string) string {
				admitTwice(t, e, q, stage, "ann")
				refuseUntilTheDrain(t, e, "ann")
				return "ann"
			},
			held: 1, deliveries: 3, returned: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := fmt.Sprintf("dies-%s-%d", tc.at, i)
			const stock = 5
			q := e.queue(t, stage, stock)
			buyer := tc.setup(t, q, stage)
			before := check(t, e, q)
			e.runUntilDeath(t, q, tc.at, 0)
			held, err := q.HeldBy(ctx, sku, "dies")
			if err != nil || int64(len(held)) != tc.held {
				t.Fatalf("held after the death: %+v %v; want %d entries", held, err, tc.held)
			}
			for _, h := range held {
				if h.Deliveries != tc.deliveries {
					t.Fatalf("held after the death: %+v; want each delivered %d times", held, tc.deliveries)
				}
			}
			written, err := e.store.List(ctx, stage, sku, "", stock)
			if err != nil {
				t.Fatal(err)
			}
			// Nothing written, nothing returned: the units it holds are in
			// no order and not on sale while the entries wait.
			inv := check(t, e, q)
			if rows := asyncorders.Written(held, written); rows != 0 || inv.Pending != tc.held || inv.Units != before.Units || inv.Remaining != before.Remaining || inv.DeadLetters != 0 {
				t.Fatalf("after the death: %d held entries with a row, %+v (before %+v)", rows, inv, before)
			}
			e.start(t, q, config("w2", asyncorders.Correct))
			drain(t, q)
			e.refuse(t, buyer, false)
			inv = check(t, e, q)
			c, err := e.store.Counts(ctx, stage, sku)
			if err != nil || !inv.Holds || inv.DeadLetters != tc.returned || inv.Remaining != before.Remaining+tc.returned ||
				c.Orders != before.Units+tc.held-tc.returned || c.DuplicateBuyers != 0 {
				t.Fatalf("after the next claim: %+v, %+v %v (before %+v)", inv, c, err, before)
			}
			if tc.returned == 0 {
				return
			}
			_, err = q.Admit(ctx, message(buyer), true)
			if tc.buyerFree != (err == nil) || !tc.buyerFree && !errors.Is(err, asyncorders.ErrAlreadyBought) {
				t.Fatalf("%s buys again: %v; want free %v", buyer, err, tc.buyerFree)
			}
			drain(t, q)
			if inv := check(t, e, q); !inv.Holds {
				t.Fatalf("after %s's second try: %+v", buyer, inv)
			}
		})
	}

	t.Run("an entry delivered again and again is written: deliveries never give it up", func(t *testing.T) {
		q := e.queue(t, "redelivered", 1)
		if _, err := q.Admit(ctx, message("ann"), true); err != nil {
			t.Fatal(err)
		}
		// Six deliveries, twice MaxDeliveries: a worker restarted under its
		// name re-reads its pending entries, and every claim while the
		// database is down delivers them once more, with no insert failing
		// on the entry's own account.
		readAsDeadConsumer(t, e, q, 1)
		redeliver(t, e, q, 5)
		e.start(t, q, config("w1", asyncorders.Correct))
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Units != 1 || inv.Remaining != 0 || inv.DeadLetters != 0 {
			t.Fatalf("after the drain: %+v; want ann's order written, nothing dead-lettered", inv)
		}
	})

	t.Run("an entry the database refused once is written at its next claim", func(t *testing.T) {
		q := e.queue(t, "refused-once", 1)
		e.refuse(t, "bea", true)
		m := message("bea")
		if _, err := q.Admit(ctx, m, true); err != nil {
			t.Fatal(err)
		}
		id := entryID(t, e, q)
		e.start(t, q, config("w1", asyncorders.Correct))
		deadline := time.Now().Add(10 * time.Second)
		for e.refusals(t, "refused-once", id) < 1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		e.refuse(t, "bea", false)
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Units != 1 || inv.DeadLetters != 0 {
			t.Fatalf("after the drain: %+v; want bea's order written", inv)
		}
	})

	t.Run("an entry the database refused MaxDeliveries times goes to the dead letters, its unit back on sale and its buyer free, once", func(t *testing.T) {
		q := e.queue(t, "poison", 1)
		e.refuse(t, "pia", true)
		m := message("pia")
		a, err := q.Admit(ctx, m, true)
		if err != nil {
			t.Fatal(err)
		}
		id := entryID(t, e, q)
		e.start(t, q, config("w1", asyncorders.Correct))
		drain(t, q)
		inv := check(t, e, q)
		if !inv.Holds || inv.Units != 0 || inv.Remaining != 1 || inv.DeadLetters != 1 || e.refusals(t, "poison", id) != 3 {
			t.Fatalf("after the dead letter: %+v, %d refusals", inv, e.refusals(t, "poison", id))
		}
		e.refuse(t, "pia", false)
		// A late insert of the dead-lettered order (a worker that had it and
		// wakes up) lands nothing: the id was voided before the unit went back.
		if err := e.store.Insert(ctx, orders.Order{ID: m.OrderID, Stage: "poison", SKU: sku, User: "pia", Qty: 1, Replica: "r1", OnePerUser: true, Round: a.Round}); !errors.Is(err, orders.ErrVoided) {
			t.Fatalf("late insert: %v", err)
		}
		// The buyer is free and the unit on sale: pia buys it again, and the
		// new order is written.
		if _, err := q.Admit(ctx, message("pia"), true); err != nil {
			t.Fatalf("pia again: %v", err)
		}
		drain(t, q)
		if inv := check(t, e, q); !inv.Holds || inv.Units != 1 || inv.Remaining != 0 {
			t.Fatalf("after the second sale: %+v", inv)
		}
	})

	t.Run("a malformed entry goes to the dead letters with its reason and the worker goes on", func(t *testing.T) {
		q := e.queue(t, "malformed", 5)
		e.start(t, q, config("w1", asyncorders.Correct))
		if err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.Stream(sku), Values: []any{"order", "nope -1 "}}).Err(); err != nil {
			t.Fatal(err)
		}
		admit(t, q, 2)
		drain(t, q)
		inv := check(t, e, q)
		if !inv.Holds || inv.Units != 2 || inv.DeadLetters != 1 {
			t.Fatalf("invariant: %+v", inv)
		}
		dead, err := e.rdb.XRange(ctx, q.DeadLetters(sku), "-", "+").Result()
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead letters: %v %v", dead, err)
		}
		reason, _ := dead[0].Values["reason"].(string)
		for _, want := range []string{`id "nope" is not 32 hex digits`, `user must not be empty`, `qty "-1"`, `no newline`} {
			if !strings.Contains(reason, want) {
				t.Errorf("reason %q does not say %q", reason, want)
			}
		}
	})

	t.Run("async-two-steps: a replica killed between the deduction and the enqueue loses the unit", func(t *testing.T) {
		q := e.queue(t, "two-steps", 5)
		e.start(t, q, config("w1", asyncorders.Correct))
		if _, err := q.Admit(ctx, message("ann"), false); err != nil { // killed before Enqueue
			t.Fatal(err)
		}
		m := message("bob")
		a, err := q.Admit(ctx, m, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Enqueue(ctx, m, a); err != nil {
			t.Fatal(err)
		}
		drain(t, q)
		if inv := check(t, e, q); inv.Holds || inv.Undersold != 1 || inv.Units != 1 {
			t.Fatalf("invariant: %+v", inv)
		}
	})
}

// runUntilDeath runs a worker named "dies" until its fault hook strikes
// at at, as a kill there would (batch 0: the config's).
func (e env) runUntilDeath(t *testing.T, q *asyncorders.Queue, at asyncorders.FaultPoint, batch int64) {
	t.Helper()
	c := config("dies", asyncorders.Correct)
	if batch > 0 {
		c.Batch = batch
	}
	e.runUntilDeathAs(t, q, c, at)
}

// runUntilDeathAs is runUntilDeath with the worker's config c.
func (e env) runUntilDeathAs(t *testing.T, q *asyncorders.Queue, c asyncorders.Config, at asyncorders.FaultPoint) {
	t.Helper()
	ctx, die := context.WithTimeout(context.Background(), 30*time.Second)
	defer die()
	died := false
	c.FaultHook = func(p asyncorders.FaultPoint) error {
		if p != at {
			return nil
		}
		died = true
		die()
		return errors.New("killed")
	}
	w := asyncorders.NewWorker(q, e.store, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	_ = w.Run(ctx) // returns once the hook killed it
	if !died {
		t.Fatalf("the worker never reached %s", at)
	}
}

// admitTwice admits buyer, writes her order, and admits her again: the
// buyers' set forgot her (a Redis that lost its last writes), and her
// second order meets her first in the table.
func admitTwice(t *testing.T, e env, q *asyncorders.Queue, stage, buyer string) {
	t.Helper()
	ctx := context.Background()
	stop := e.start(t, q, config("w0", asyncorders.Correct))
	if _, err := q.Admit(ctx, message(buyer), true); err != nil {
		t.Fatal(err)
	}
	drain(t, q)
	stop()
	if err := e.rdb.SRem(ctx, "lockstep:"+stage+":{"+sku+"}:buyers", buyer).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Admit(ctx, message(buyer), true); err != nil {
		t.Fatal(err)
	}
}

// refuseUntilTheDrain has the database refuse user's orders until the
// test allows them again (after the next claimer's drain).
func refuseUntilTheDrain(t *testing.T, e env, user string) {
	t.Helper()
	e.refuse(t, user, true)
	t.Cleanup(func() { e.refuse(t, user, false) })
}

// redeliver delivers the one pending entry n times more to the dead
// consumer.
func redeliver(t *testing.T, e env, q *asyncorders.Queue, n int) {
	t.Helper()
	id := pendingID(t, e, q)
	for range n {
		if err := e.rdb.XClaim(context.Background(), &redis.XClaimArgs{Stream: q.Stream(sku), Group: asyncorders.Group, Consumer: "dead", Messages: []string{id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// entryID is the id of the one entry of the stream.
func entryID(t *testing.T, e env, q *asyncorders.Queue) string {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), q.Stream(sku), "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("entries: %v %v", msgs, err)
	}
	return msgs[0].ID
}

func pendingID(t *testing.T, e env, q *asyncorders.Queue) string {
	t.Helper()
	p, err := e.rdb.XPending(context.Background(), q.Stream(sku), asyncorders.Group).Result()
	if err != nil || p.Count != 1 {
		t.Fatalf("pending: %+v %v", p, err)
	}
	return p.Lower
}
