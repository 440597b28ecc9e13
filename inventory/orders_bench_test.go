package inventory_test

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redisbatch"
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

// ceilingBatch is the rows of one of the ceiling's INSERTs: the batch
// benchWorkers concurrent sales of one-per-user-lua make through the
// group commit (15.8-16.0 orders on average: while one batch is on the
// wire, about half the sales run their script).
const ceilingBatch = benchWorkers / 2

// ceilingWriters is the ceiling's writers: as many rows in flight as the
// rung has sales, benchWorkers. The rung can never have more (each sale
// waits for its own row), so a ceiling with more compares the database's
// pace at another load: the 32 writers of ceilingBatch rows keep
// 512 rows in flight, 16 times the rung's. That one stays beside it as
// ceiling-32-writers (at load 15-32 on 2 cores the two read alike:
// 5.1-10.7 k and 5.6-9.7 k rows/s; the CPU, not the rows in flight, was
// what bounded them).
const ceilingWriters = benchWorkers / ceilingBatch

var benchRedisBatch = flag.Bool("redisbatch", false, "BenchmarkOrderSalesSideBySide: pipeline the Redis client's concurrent commands, as the shop does")

// BenchmarkOrderSalesSideBySide compares, on one Redis and one MariaDB,
// atomic's script, one-per-user-lua's script without the order insert,
// one-per-user-lua with it as the shop sells (orders.GroupCommit), the
// same with one autocommit INSERT per sale (the path before group
// commit), those one-row inserts alone, and the order database's ceiling:
// a plain Go client writing the same rows as multi-row INSERTs of
// ceilingBatch rows from ceilingWriters writers, the rows in flight of
// the rung's 32 sales (ceilingWriters says why), and the 32
// writers of ceilingBatch rows. Every other contender runs 32 goroutines,
// each sale a new buyer, stock that never runs out. b.N is the number of
// rounds; each reports its median per second and the ratios to atomic,
// and one-per-user-lua's to both ceilings and to script-then-ceiling,
// 1/(1/script + 1/ceiling): the rung's bound where the client, Redis and
// MariaDB share the cores (2 on the machine these figures come from), as
// each sale spends the script's CPU before its row's. The ceiling spends
// none of the script's, so while the CPU is the bottleneck the rung's
// ratio to it is at most script/(script + ceiling).
//
// With -redisbatch the Redis client pipelines concurrent commands as the
// shop's does (internal/redisbatch): the scripts' CPU per sale halves,
// which raises that bound.
//
//	go test -run '^$' -bench BenchmarkOrderSalesSideBySide -benchtime 5x ./inventory/
//	go test -run '^$' -bench BenchmarkOrderSalesSideBySide -benchtime 5x ./inventory/ -redisbatch
func BenchmarkOrderSalesSideBySide(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	if *benchRedisBatch {
		b.Cleanup(redisbatch.Attach(rdb).Close)
	}
	m := lockservertest.MariaDB(b)
	store := mariaDBOrders(b, m)
	group := orders.NewGroupCommit(store.(*orders.SQLStore))
	b.Cleanup(func() { _ = group.Close() })
	nextUser := newBuyers()
	sale := func(stage string, s orders.Store) func() error { return benchSale(b, rdb, s, stage, nextUser) }
	const ceiling, ceiling32 = "ceiling", "ceiling-32-writers"
	script := &contender{name: "one-per-user-lua-script", server: rdb, op: sale("one-per-user-lua", noOrders{store})}
	rung := &contender{name: "one-per-user-lua+insert", server: rdb, op: sale("one-per-user-lua", group), versus: []string{ceiling, ceiling32}}
	fair := &contender{name: ceiling, server: rdb, workers: ceilingWriters, rows: ceilingBatch, op: multiRowInserts(b, m, nextUser)}
	// The rung's own statement at the ceiling's shape: what the round
	// guard costs the database, apart from the group commit and the script.
	guarded := &contender{name: "ceiling-round-guarded", server: rdb, workers: ceilingWriters, rows: ceilingBatch, op: guardedBatches(b, store.(*orders.SQLStore), nextUser)}
	rung.versus = append(rung.versus, guarded.name)
	sideBySide(b, []*contender{
		{name: "atomic", server: rdb, op: sale("atomic", store)},
		script,
		rung,
		{name: "one-per-user-lua+insert-one-row", server: rdb, op: sale("one-per-user-lua", store), versus: []string{ceiling}},
		{name: "insert-alone", server: rdb, op: func() error {
			o := orders.Order{ID: orders.NewID(), Stage: "bench", SKU: "sku-1", User: nextUser(), Qty: 1, Replica: "r0"}
			return store.Insert(context.Background(), o)
		}},
		fair,
		guarded,
		{name: ceiling32, server: rdb, rows: ceilingBatch, op: multiRowInserts(b, m, nextUser)},
	})
	// On a machine whose cores the client, Redis and MariaDB share, a sale
	// spends the script's CPU and its row's: the rung can at best run at
	// one over the sum of the two contenders' times per sale.
	serial := 1 / (1/median(script.rates) + 1/median(fair.rates))
	b.ReportMetric(median(rung.rates)/serial, rung.name+"/script-then-ceiling")
}

// multiRowInserts is the ceiling's op: one INSERT of ceilingBatch new
// buyers' orders by a plain client of m, autocommit.
func multiRowInserts(b *testing.B, m *lockserver.MariaDB, nextUser func() string) func() error {
	db, err := sql.Open("mysql", m.DSN("lockstep"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(benchWorkers)
	query := `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?), ", ceilingBatch), ", ")
	return func() error {
		args := make([]any, 0, 9*ceilingBatch)
		for range ceilingBatch {
			user := nextUser()
			args = append(args, orders.NewID(), "ceiling", "sku-1", user, 1, "r0", time.Now().UnixMicro(), orders.StatusLive, user)
		}
		_, err := db.ExecContext(context.Background(), query, args...)
		return err
	}
}

// guardedBatches is ceiling-round-guarded's op: one InsertBatch of
// ceilingBatch new buyers' orders, the group commit's statement (an
// INSERT ... SELECT that lands only in the orders' round), autocommit.
func guardedBatches(b *testing.B, store *orders.SQLStore, nextUser func() string) func() error {
	const stage = "ceiling-round-guarded"
	if err := store.Reset(context.Background(), stage, "sku-1", inventory.MaxStock, 1); err != nil { // the round the guard reads
		b.Fatal(err)
	}
	return func() error {
		os := make([]orders.Order, ceilingBatch)
		for i := range os {
			os[i] = orders.Order{ID: orders.NewID(), Stage: stage, SKU: "sku-1", User: nextUser(), Qty: 1, Replica: "r0", Round: 1, OnePerUser: true}
		}
		return store.InsertBatch(context.Background(), os, nil)
	}
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

// contender is one side of a side-by-side benchmark: its sales per second
// and CPU per sale, one of each per slice.
type contender struct {
	name string
	op   func() error
	// server is the Redis op's sales run on, whose CPU is counted.
	server redis.UniversalClient
	// workers run op at once; 0 is benchWorkers.
	workers int
	// rows each op writes (the ceiling's multi-row INSERT); 0 is one.
	rows int
	// versus names the contenders this one's rate is also compared with.
	versus []string
	rates  []float64
	// clientCPU is this process's CPU (user and system) per sale, redisCPU
	// the redis-server main thread's, in µs: what throughput the sale can
	// reach on a machine where either one is the bottleneck, apart from
	// the other processes' load.
	clientCPU, redisCPU []float64
}

// sideBySide runs each contender in turn for benchSlice, b.N rounds, and
// reports each one's median per second and its ratio to the first's, and
// its median CPU per sale in this process and in its server.
func sideBySide(b *testing.B, contenders []*contender) {
	b.ResetTimer()
	for range b.N {
		for _, c := range contenders {
			client, server := processCPU(b), redisCPU(b, c.server)
			rate, sales := perSecond(b, cmp.Or(c.workers, benchWorkers), c.op)
			if c.rows > 1 {
				rate, sales = rate*float64(c.rows), sales*int64(c.rows)
			}
			c.rates = append(c.rates, rate)
			c.clientCPU = append(c.clientCPU, perSale(processCPU(b)-client, sales))
			c.redisCPU = append(c.redisCPU, perSale(redisCPU(b, c.server)-server, sales))
		}
	}
	base := median(contenders[0].rates)
	for _, c := range contenders {
		b.ReportMetric(median(c.rates), c.name+"/s")
		b.ReportMetric(median(c.rates)/base, c.name+"/"+contenders[0].name)
		for _, v := range contenders {
			if slices.Contains(c.versus, v.name) {
				b.ReportMetric(median(c.rates)/median(v.rates), c.name+"/"+v.name)
			}
		}
		b.ReportMetric(median(c.clientCPU), c.name+"-client-cpu-us/sale")
		b.ReportMetric(median(c.redisCPU), c.name+"-redis-cpu-us/sale")
	}
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

func perSale(cpu time.Duration, sales int64) float64 {
	return float64(cpu.Microseconds()) / float64(max(sales, 1))
}

// processCPU is the CPU this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// redisCPU is the CPU rdb's server has spent in its main thread, which
// runs every command and script.
func redisCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys_main_thread" || name == "used_cpu_user_main_thread" {
			s, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", line, err)
			}
			total += time.Duration(s * float64(time.Second))
		}
	}
	if total == 0 {
		b.Fatal("INFO cpu has no main thread's CPU (redis-server 7 has)")
	}
	return total
}

// perSecond runs op from workers goroutines for benchSlice and returns how
// many succeeded per second, and how many in all.
func perSecond(b *testing.B, workers int, op func() error) (float64, int64) {
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(benchSlice)
	for range workers {
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
	return float64(done.Load()) / time.Since(start).Seconds(), done.Load()
}
