package inventory_test

import (
	"context"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestAResetAfterRedisLostItsDataSellsInANewRound: a redis-server
// restarted without persistence counts its rounds again from 0 while the
// order table keeps its own. The next reset must move both stores to a
// round above the table's (round_reset.lua's floor); with a plain INCR
// the table ignores the reset as one of an older round and refuses every
// order after it as stale.
func TestAResetAfterRedisLostItsDataSellsInANewRound(t *testing.T) {
	ctx := context.Background()
	for name, store := range orderStores(t) {
		for _, stage := range []string{"one-per-user-lua", "one-per-user-lock"} {
			t.Run(name+"/"+stage, func(t *testing.T) {
				srv := redistest.Start(t)
				inv := newOrderInventory(t, srv.Client(t), store, "r0")
				for range 3 { // the table's round moves to 3
					if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := inv.DeductFor(ctx, stage, "sku-1", "ann", 1); err != nil {
					t.Fatalf("ann's sale: %v", err)
				}
				srv.Restart() // no persistence: Redis lost every key, its round too
				if _, err := inv.DeductFor(ctx, stage, "sku-1", "carl", 1); err == nil {
					t.Fatal("carl's sale before the reset sold, in round 0, below the table's")
				}
				// Redis started the SKU again at its default stock; ann's order
				// of the round before is the table's only one.
				if a := orderAudit(t, inv, stage); a.Stock != a.Initial || a.Orders.Orders != 1 {
					t.Fatalf("carl's refused sale: stock %d of %d, orders %+v; want his unit back and ann's order alone", a.Stock, a.Initial, *a.Orders)
				}
				if err := inv.Reset(ctx, stage, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				sale, err := inv.DeductFor(ctx, stage, "sku-1", "bob", 1)
				if err != nil {
					t.Fatalf("bob's sale after the reset: %v", err)
				}
				a := orderAudit(t, inv, stage)
				if a.Orders.Orders != 1 || a.Orders.Undersold != 0 || a.Stock != 9 || !a.Consistent {
					t.Fatalf("after the restart and a reset: stock %d, consistent %v, orders %+v; want bob's order %s alone",
						a.Stock, a.Consistent, *a.Orders, sale.Order)
				}
			})
		}
	}
}
