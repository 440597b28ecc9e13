package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
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
