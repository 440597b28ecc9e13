package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// A replica killed between the deduction and the enqueue: async-two-steps
// loses the unit (no message, so no worker ever writes the order);
// async-stream, whose script deducts and enqueues at once, has no such
// window, and its one worker drains every sale into an order.
func TestAsyncStagesAnswerAnOrderIDAndOnlyTwoStepsLosesAUnitToACrash(t *testing.T) {
	store := mariaDBOrders(t, lockservertest.MariaDB(t))
	rdb := redistest.Start(t).Client(t)
	invs := []*inventory.Inventory{newOrderInventory(t, rdb, store, "r0")}
	ctx := context.Background()
	for _, tc := range []struct {
		stage     string
		undersold int64
	}{
		{asyncorders.StageTwoSteps, 1},
		{asyncorders.StageStream, 0},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			prepare(t, invs, tc.stage, 10, inventory.Faults{CrashHoldingLock: true})
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			w := asyncorders.NewWorker(asyncorders.NewQueue(rdb, tc.stage), store,
				asyncorders.DefaultConfig("w1", []string{"sku-1"}), slog.New(slog.NewTextHandler(io.Discard, nil)))
			go func() { defer close(done); _ = w.Run(wctx) }()
			defer func() { stop(); <-done }()
			crashed := 0
			for i := range 3 {
				sale, err := invs[0].DeductFor(ctx, tc.stage, "sku-1", fmt.Sprintf("buyer-%d", i), 1)
				switch {
				case errors.Is(err, inventory.ErrCrashed):
					crashed++
				case err != nil:
					t.Fatal(err)
				case len(sale.Order) != 32:
					t.Fatalf("sale %+v answers no order id", sale)
				}
			}
			if _, err := invs[0].DeductFor(ctx, tc.stage, "sku-1", "buyer-1", 1); !errors.Is(err, inventory.ErrAlreadyBought) {
				t.Fatalf("a second sale of buyer-1: %v", err)
			}
			dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := asyncorders.NewQueue(rdb, tc.stage).Drain(dctx, "sku-1"); err != nil {
				t.Fatal(err)
			}
			a := orderAudit(t, invs[0], tc.stage)
			if a.Orders.Undersold != tc.undersold || a.Orders.Orders != 3-tc.undersold || a.Stock != 7 || a.Stream == nil || !a.Stream.Drained() {
				t.Fatalf("crashed %d; audit stock %d, orders %+v, stream %+v; want %d undersold", crashed, a.Stock, *a.Orders, a.Stream, tc.undersold)
			}
		})
	}
}

// gatedOrders holds every insert until the first Counts has read the
// table, and that Counts returns only once the worker acknowledged what it
// held: the audit's read of the orders then comes before the stream's
// drain, as it can under load.
type gatedOrders struct {
	orders.Store
	counted chan struct{}
	once    sync.Once
	drained func() bool
}

func (g *gatedOrders) Insert(ctx context.Context, o orders.Order) error {
	select {
	case <-g.counted:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Insert(ctx, o)
}

func (g *gatedOrders) Counts(ctx context.Context, stage, sku string) (orders.Counts, error) {
	c, err := g.Store.Counts(ctx, stage, sku)
	g.once.Do(func() {
		close(g.counted)
		for deadline := time.Now().Add(5 * time.Second); !g.drained() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	return c, err
}

// An audit taken while the workers drain never says "drained" beside
// orders it counted before the drain: the stream is read first, so a
// drained stream's orders are all in the count.
func TestAnAsyncAuditReadsTheStreamBeforeTheOrders(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
	g := &gatedOrders{Store: mariaDBOrders(t, lockservertest.MariaDB(t)), counted: make(chan struct{})}
	g.drained = func() bool { s, err := q.Stats(context.Background(), "sku-1"); return err == nil && s.Drained() }
	invs := []*inventory.Inventory{newOrderInventory(t, rdb, g, "r0")}
	prepare(t, invs, asyncorders.StageStream, 10, inventory.Faults{})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := asyncorders.NewWorker(q, g, asyncorders.DefaultConfig("w1", []string{"sku-1"}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { stop(); <-done }()
	if _, err := invs[0].DeductFor(context.Background(), asyncorders.StageStream, "sku-1", "ann", 1); err != nil {
		t.Fatal(err)
	}
	for s, _ := q.Stats(ctx, "sku-1"); s.Pending == 0; s, _ = q.Stats(ctx, "sku-1") {
		time.Sleep(10 * time.Millisecond) // the worker holds the entry, its insert gated
	}
	a := orderAudit(t, invs[0], asyncorders.StageStream)
	if a.Stream.Drained() && a.Orders.Undersold != 0 {
		t.Fatalf("the audit says drained, yet %d units undersold: it counted the orders before reading the stream", a.Orders.Undersold)
	}
	if a := orderAudit(t, invs[0], asyncorders.StageStream); !a.Stream.Drained() || a.Orders.Undersold != 0 || a.Orders.Orders != 1 {
		t.Fatalf("after the drain: orders %+v, stream %+v", *a.Orders, *a.Stream)
	}
}

// The sweeper cancels in the order database first and gives the unit back
// in Redis after: an audit read in between (here after the cancel alone,
// the sweeper's first step) counts the unit once, as returning, not as
// undersold.
func TestAnAsyncAuditCountsACancelledUnitNotYetBackOnce(t *testing.T) {
	ctx := context.Background()
	store := mariaDBOrders(t, lockservertest.MariaDB(t))
	payments, err := store.(*orders.SQLStore).Payments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Start(t).Client(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inv, err := inventory.New(inventory.Config{Redis: rdb, Orders: store, Payments: payments, Replica: "r0", Logger: quiet, Exit: func(int) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	invs := []*inventory.Inventory{inv}
	prepare(t, invs, asyncorders.StageStream, 2, inventory.Faults{})
	q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
	cfg := asyncorders.DefaultConfig("w1", []string{"sku-1"})
	cfg.Payments, cfg.PayWithin = payments, 100*time.Millisecond
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = asyncorders.NewWorker(q, store, cfg, quiet).Run(wctx) }()
	defer func() { stop(); <-done }()
	var bob string
	for _, user := range []string{"ann", "bob"} {
		sale, err := inv.DeductFor(ctx, asyncorders.StageStream, "sku-1", user, 1)
		if err != nil {
			t.Fatal(err)
		}
		bob = sale.Order
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := q.Drain(dctx, "sku-1"); err != nil {
		t.Fatal(err)
	}
	if err := payments.Pay(ctx, bob, "bob"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // ann's deadline passes
	if c, err := payments.CancelExpired(ctx, asyncorders.StageStream, time.Now(), 10); err != nil || len(c) != 1 {
		t.Fatalf("the sweeper's cancel: %v, %v", c, err)
	}
	if a := orderAudit(t, inv, asyncorders.StageStream); a.Orders.Undersold != 0 || a.Orders.Returning != 1 || a.Orders.Units != 1 || a.Stock != 0 {
		t.Errorf("after the cancel, before the return: stock %d, orders %+v; want ann's unit returning", a.Stock, *a.Orders)
	}
	if err := asyncorders.NewSweeper(q, payments, time.Hour, quiet).Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if a := orderAudit(t, inv, asyncorders.StageStream); a.Orders.Undersold != 0 || a.Orders.Returning != 0 || a.Stock != 1 {
		t.Errorf("after the return: stock %d, orders %+v; want ann's unit on sale", a.Stock, *a.Orders)
	}
}

// TestAnAsyncAuditOfANeverResetSKUStartsIt: as every stage's audit does, an
// async stage's audit of a SKU nobody reset answers its default stock, not
// "redis unavailable" (the shops' metrics audit the default SKU before any
// run, and logged that error every scrape).
func TestAnAsyncAuditOfANeverResetSKUStartsIt(t *testing.T) {
	store := mariaDBOrders(t, lockservertest.MariaDB(t))
	inv := newOrderInventory(t, redistest.Start(t).Client(t), store, "r0")
	for _, stage := range asyncorders.Stages() {
		a, err := inv.Audit(context.Background(), stage, "never-reset")
		if err != nil || a.Initial != 500 || a.Stock != 500 || !a.Consistent || a.Stream == nil || a.Orders == nil || a.Orders.Undersold != 0 {
			t.Errorf("%s: audit of a never-reset SKU = %+v, %v; want the default stock 500, consistent", stage, a, err)
		}
	}
}

// An async-stream reset moves a round in both stores, as the synchronous
// order stages' does: a sale admitted between the Redis reset and the
// order table's keeps its order (its insert waits for the table's round),
// and an entry a worker holds from the round before never lands in the
// next. Before the fence, the first sale's order landed in the table
// before its reset, which deleted it (undersold 1), and the held entry
// landed after the reset: an order of the old stock beside a full stock,
// which took its buyer's place from her sale of the new round.
func TestAnAsyncResetFencesTheRoundBefore(t *testing.T) {
	const stage = asyncorders.StageStream
	for name, store := range orderStores(t) {
		worker := func(t *testing.T, rdb *redis.Client) { runStreamWorker(t, rdb, store) }
		t.Run(name+"/a sale between the two resets keeps its order", func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			inv := newOrderInventory(t, rdb, store, "r0")
			ctx := context.Background()
			if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			tried := make(chan error, 16)
			store.set(func(h *hookedOrders) {
				h.insert = func(ctx context.Context, o orders.Order) error {
					err := h.Store.Insert(ctx, o)
					select {
					case tried <- err:
					default:
					}
					return err
				}
			})
			defer store.set(func(h *hookedOrders) { h.insert = nil })
			worker(t, rdb)
			var sale inventory.Sale
			store.set(func(h *hookedOrders) {
				h.reset = func() { // between the Redis reset and the order table's
					var err error
					if sale, err = inv.DeductFor(ctx, stage, "sku-1", "bob", 1); err != nil {
						t.Errorf("bob's sale between the resets: %v", err)
						return
					}
					t.Logf("the worker's first insert of bob's order, before the table's reset: %v", <-tried)
				}
			})
			defer store.set(func(h *hookedOrders) { h.reset = nil })
			if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			store.set(func(h *hookedOrders) { h.reset = nil })
			drainStream(t, rdb)
			list, err := store.List(ctx, stage, "sku-1", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := orderAudit(t, inv, stage); len(list) != 1 || list[0].ID != sale.Order || got.Orders.Undersold != 0 || got.Stock != 9 {
				t.Fatalf("bob's sale %s answered; after the reset: orders %+v, stock %d, audit %+v", sale.Order, list, got.Stock, *got.Orders)
			}
		})
		t.Run(name+"/an entry of the round before never lands after the reset", func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			inv := newOrderInventory(t, rdb, store, "r0")
			ctx := context.Background()
			if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			arrived, land := make(chan struct{}), make(chan struct{})
			var once sync.Once
			store.set(func(h *hookedOrders) {
				h.insert = func(ctx context.Context, o orders.Order) error {
					once.Do(func() { close(arrived); <-land })
					return h.Store.Insert(ctx, o)
				}
			})
			defer store.set(func(h *hookedOrders) { h.insert = nil })
			worker(t, rdb)
			if _, err := inv.DeductFor(ctx, stage, "sku-1", "carol", 1); err != nil {
				t.Fatal(err)
			}
			<-arrived // the worker holds carol's entry, its insert on its way
			if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			// carol buys again in the new round (the checker's finding 2:
			// her old order, landing after the reset, took her place in the
			// unique index, and this sale, answered 200, was given up and
			// its order id voided).
			sale, err := inv.DeductFor(ctx, stage, "sku-1", "carol", 1)
			if err != nil {
				t.Fatal(err)
			}
			close(land)
			drainStream(t, rdb)
			time.Sleep(200 * time.Millisecond) // the held entry's handling ends
			list, err := store.List(ctx, stage, "sku-1", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := orderAudit(t, inv, stage); len(list) != 1 || list[0].ID != sale.Order || got.Orders.Undersold != 0 || got.Stock != 9 || got.Stream.DeadLetters != 0 {
				t.Fatalf("carol's sale %s of the new round answered; after the reset: orders %+v, stock %d, audit %+v, stream %+v",
					sale.Order, list, got.Stock, *got.Orders, *got.Stream)
			}
		})
	}
}

// runStreamWorker runs one async-stream worker of sku-1 on store until the
// test ends.
func runStreamWorker(t *testing.T, rdb *redis.Client, store orders.Store) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := asyncorders.DefaultConfig("w1", []string{"sku-1"})
	c.Block, c.ClaimIdle, c.ClaimEvery = 50*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
	w := asyncorders.NewWorker(asyncorders.NewQueue(rdb, asyncorders.StageStream), store, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// drainStream waits until async-stream's sku-1 is drained: every entry
// written as an order or dead-lettered.
func drainStream(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := asyncorders.NewQueue(rdb, asyncorders.StageStream).Drain(ctx, "sku-1"); err != nil {
		t.Fatal(err)
	}
}

// Redis restarted without persistence loses the SKU's round while the
// order table keeps its own (CI's TestAsyncOutagesScenario): the round in
// Redis never falls behind the table's, so every sale answered 200 after
// the restart becomes an order — the first sale's, which initialises the
// SKU again, and a reset's. Without the floor Redis started again at
// round 0 (then 1 at the reset), the table refused the lower round as a
// late reset, and every entry waited as stale for good (the drain timed
// out). The buyer who had bought before the restart buys again (Redis
// forgot her): her order stands in the table, so the new entry is given
// up and its unit returned, into the SKU's new round.
func TestAnAsyncRoundSurvivesRedisLosingItsData(t *testing.T) {
	const stage = asyncorders.StageStream
	ctx := context.Background()
	for name, store := range orderStores(t) {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			inv := newOrderInventory(t, rdb, store, "r0")
			runStreamWorker(t, rdb, store)
			var answered []string
			sell := func(user string) {
				t.Helper()
				sale, err := inv.DeductFor(ctx, stage, "sku-1", user, 1)
				if err != nil {
					t.Fatalf("%s's sale: %v", user, err)
				}
				answered = append(answered, sale.Order)
			}
			// ordered checks that each sale answered 200 is an order.
			ordered := func(t *testing.T) {
				t.Helper()
				drainStream(t, rdb)
				list, err := store.List(ctx, stage, "sku-1", "", 100)
				if err != nil {
					t.Fatal(err)
				}
				live := map[string]bool{}
				for _, o := range list {
					live[o.ID] = true
				}
				for _, id := range answered {
					if !live[id] {
						t.Fatalf("the sale answered with order %s has no order; orders %+v", id, list)
					}
				}
			}
			for range 2 { // the table's round moves to 2
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
			}
			sell("ann")
			ordered(t)

			srv.Restart() // no persistence: Redis lost every key
			sell("bob")   // no stock in Redis: initialised, in the table's round
			if _, err := inv.DeductFor(ctx, stage, "sku-1", "ann", 1); err != nil {
				t.Fatalf("ann's second sale (Redis forgot her first): %v", err)
			}
			ordered(t)
			// The SKU started again with the default stock; bob's unit is taken.
			if a := orderAudit(t, inv, stage); a.Stream.DeadLetters != 1 || a.Stock != a.Initial-1 {
				t.Fatalf("ann's second sale given up: dead letters %d, stock %d of %d; want 1, and her unit back", a.Stream.DeadLetters, a.Stock, a.Initial)
			}

			srv.Restart()
			if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			answered = nil // the reset deleted the orders of the rounds before
			sell("carol")
			ordered(t)
			if a := orderAudit(t, inv, stage); a.Orders.Orders != 1 || a.Orders.Undersold != 0 || a.Stock != 9 || a.Sold != 1 || !a.Consistent {
				t.Fatalf("after the restart and a reset: stock %d, sold %d, consistent %v, orders %+v; want carol's order alone",
					a.Stock, a.Sold, a.Consistent, *a.Orders)
			}
		})
	}
}
