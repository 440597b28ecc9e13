package inventory_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// BenchmarkAsyncAdmit sets async-stream's admission (atomic's script plus
// the buyer check, SADD and XADD) beside atomic's deduction, in one run on
// one Redis, with no worker running: what the sale's path costs, apart
// from the workers' load on the machine (BENCHMARKS.md has both).
func BenchmarkAsyncAdmit(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	var buyer atomic.Int64
	for _, stage := range []string{"atomic", asyncorders.StageStream} {
		b.Run(stage, func(b *testing.B) {
			inv := newOrderInventory(b, rdb, store, "r0")
			if err := inv.Reset(context.Background(), stage, "sku-1", inventory.MaxStock, 0); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					user := "user-" + strconv.FormatInt(buyer.Add(1), 10)
					if _, err := inv.DeductFor(context.Background(), stage, "sku-1", user, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
		})
	}
}
