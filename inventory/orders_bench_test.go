package inventory_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// noOrders is an order table that keeps nothing: one-per-user-lua's script
// alone, without the insert.
type noOrders struct{ orders.Store }

func (noOrders) Insert(context.Context, orders.Order) error { return nil }

// Shape of BenchmarkOrderSalesSideBySide: each contender in turn for a
// slice, round after round, so a machine whose load changes (other
// processes on a shared VM) weighs on every contender alike.
const (
	benchWorkers = 32
	benchSlice   = time.Second
)

// BenchmarkOrderSalesSideBySide compares, on one Redis and one MariaDB,
// atomic's script, one-per-user-lua's script without the order insert,
// one-per-user-lua with it (one INSERT per sale, autocommit, no batching),
// and those inserts alone: 32 goroutines, each sale a new buyer, stock that
// never runs out. b.N is the number of rounds; each reports its median
// per second and the ratios to atomic.
//
//	go test -run '^$' -bench BenchmarkOrderSalesSideBySide -benchtime 5x ./inventory/
func BenchmarkOrderSalesSideBySide(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	store := mariaDBOrders(b, lockservertest.MariaDB(b))
	nextUser := newBuyers()
	sale := func(stage string, s orders.Store) func() error { return benchSale(b, rdb, s, stage, nextUser) }
	sideBySide(b, []*contender{
		{name: "atomic", op: sale("atomic", store)},
		{name: "one-per-user-lua-script", op: sale("one-per-user-lua", noOrders{store})},
		{name: "one-per-user-lua+insert", op: sale("one-per-user-lua", store)},
		{name: "insert-alone", op: func() error {
			o := orders.Order{ID: orders.NewID(), Stage: "bench", SKU: "sku-1", User: nextUser(), Qty: 1, Replica: "r0"}
			return store.Insert(context.Background(), o)
		}},
	})
}

// newBuyers names a new buyer at each call.
func newBuyers() func() string {
	var buyer atomic.Int64
	return func() string { return "user-" + strconv.FormatInt(buyer.Add(1), 10) }
}

// benchSale is one sale of stage on a fresh inventory: a new buyer's unit
// of "sku-1", whose stock never runs out.
func benchSale(b *testing.B, rdb redis.UniversalClient, store orders.Store, stage string, nextUser func() string) func() error {
	inv := newOrderInventory(b, rdb, store, "r0")
	if err := inv.Reset(context.Background(), stage, "sku-1", inventory.MaxStock, 0); err != nil {
		b.Fatal(err)
	}
	return func() error {
		_, err := inv.DeductFor(context.Background(), stage, "sku-1", nextUser(), 1)
		return err
	}
}

// contender is one side of a side-by-side benchmark.
type contender struct {
	name  string
	op    func() error
	rates []float64
}

// sideBySide runs each contender in turn for benchSlice, b.N rounds, and
// reports each one's median per second and its ratio to the first's.
func sideBySide(b *testing.B, contenders []*contender) {
	b.ResetTimer()
	for range b.N {
		for _, c := range contenders {
			c.rates = append(c.rates, perSecond(b, c.op))
		}
	}
	median := func(c *contender) float64 {
		s := slices.Sorted(slices.Values(c.rates))
		return s[len(s)/2]
	}
	base := median(contenders[0])
	for _, c := range contenders {
		b.ReportMetric(median(c), c.name+"/s")
		b.ReportMetric(median(c)/base, c.name+"/"+contenders[0].name)
	}
}

// perSecond runs op from benchWorkers goroutines for benchSlice and returns
// how many succeeded per second.
func perSecond(b *testing.B, op func() error) float64 {
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(benchSlice)
	for range benchWorkers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}
