package inventory_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// noOrders is an order table that keeps nothing: one-per-user-lua's script
// alone, without the insert.
type noOrders struct{ orders.Store }

func (noOrders) Insert(context.Context, orders.Order) error { return nil }

// BenchmarkOrderSales compares, on one Redis and one MariaDB in one run,
// atomic's script, one-per-user-lua's script without the order insert,
// one-per-user-lua with it, and the order inserts alone: 32 goroutines,
// each sale a new buyer, stock that never runs out.
//
//	go test -run '^$' -bench BenchmarkOrderSales -benchtime 3s -count 3 ./inventory/
func BenchmarkOrderSales(b *testing.B) {
	m := lockservertest.MariaDB(b)
	rdb := redistest.Start(b).Client(b)
	store := mariaDBOrders(b, m)
	var buyer atomic.Int64
	nextUser := func() string { return "user-" + strconv.FormatInt(buyer.Add(1), 10) }
	for _, tc := range []struct {
		name, stage string
		store       orders.Store
	}{
		{"atomic", "atomic", store},
		{"one-per-user-lua-script-only", "one-per-user-lua", noOrders{store}},
		{"one-per-user-lua+mysql-insert", "one-per-user-lua", store},
	} {
		b.Run(tc.name, func(b *testing.B) {
			inv := newOrderInventory(b, rdb, tc.store, "r0")
			if err := inv.Reset(context.Background(), tc.stage, "sku-1", inventory.MaxStock, 0); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := inv.DeductFor(context.Background(), tc.stage, "sku-1", nextUser(), 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
		})
	}
	b.Run("mysql-insert-alone", func(b *testing.B) {
		b.SetParallelism(16)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				o := orders.Order{ID: orders.NewID(), Stage: "bench", SKU: "sku-1", User: nextUser(), Qty: 1, Replica: "r0", OnePerUser: true}
				if err := store.Insert(context.Background(), o); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
	})
}
