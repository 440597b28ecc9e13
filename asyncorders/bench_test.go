package asyncorders_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/orders"
)

// BenchmarkDrain10000 admits a backlog of 10,000 orders with no worker
// running, then starts two workers (DefaultConfig, in this process) and
// times their drain into MariaDB: the workers' sustained orders/s.
func BenchmarkDrain10000(b *testing.B) {
	e := newEnv(b)
	for i := range b.N {
		elapsed := drainBacklog(b, e, fmt.Sprintf("drain-bench-%d", i), 10_000)
		b.ReportMetric(elapsed.Seconds(), "drain-s")
		b.ReportMetric(10_000/elapsed.Seconds(), "orders/s")
	}
}

// BenchmarkDrainAgainstTheCeiling drains a backlog of 100,000 orders with
// two workers, then writes the same number of rows as a plain client
// would at best: multi-row INSERTs of the workers' batch size from 32
// writers into the same MariaDB. It reports both rates and their ratio.
func BenchmarkDrainAgainstTheCeiling(b *testing.B) {
	const backlog = 100_000
	e := newEnv(b)
	for i := range b.N {
		elapsed := drainBacklog(b, e, fmt.Sprintf("drain-ceiling-%d", i), backlog)
		drained := backlog / elapsed.Seconds()
		ceiling := writeRows(b, e, fmt.Sprintf("ceiling-%d", i), backlog, 32, 64)
		b.ReportMetric(elapsed.Seconds(), "drain-s")
		b.ReportMetric(drained, "orders/s")
		b.ReportMetric(ceiling, "ceiling-rows/s")
		b.ReportMetric(drained/ceiling, "ratio")
	}
}

// drainBacklog admits backlog orders on stage (32 admitting at once), then
// times two workers' drain and checks the invariant.
func drainBacklog(b *testing.B, e env, stage string, backlog int) time.Duration {
	b.Helper()
	ctx := context.Background()
	q := e.queue(b, stage, int64(backlog))
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for j := w; j < backlog; j += 32 {
				if _, err := q.Admit(ctx, message(fmt.Sprintf("buyer-%d", j)), true); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var stops []func()
	for _, name := range []string{"w1", "w2"} {
		stops = append(stops, e.start(b, q, asyncorders.DefaultConfig(name, []string{sku})))
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err := q.Drain(dctx, sku)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	for _, stop := range stops {
		stop()
	}
	if inv := check(b, e, q); !inv.Holds || inv.Units != int64(backlog) {
		b.Fatalf("invariant %+v", inv)
	}
	return elapsed
}

// writeRows writes n order rows of stage as multi-row INSERTs of batch
// rows (the last one full: n rounded up) from writers goroutines, each
// INSERT its own autocommit, and returns the rows written per second.
func writeRows(b *testing.B, e env, stage string, n, writers, batch int) float64 {
	b.Helper()
	ctx := context.Background()
	if err := e.store.Reset(ctx, stage, sku, int64(n), 0); err != nil {
		b.Fatal(err)
	}
	// A client of its own, without the test DSN's 5 s read timeout: a
	// loaded machine must slow the ceiling, not fail it.
	cfg, err := mysql.ParseDSN(e.mariadb.DSN("lockstep"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ReadTimeout, cfg.WriteTimeout = time.Minute, time.Minute
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(writers)
	db.SetMaxIdleConns(writers) // each writer keeps its connection, rather than dial one per INSERT
	query := `INSERT INTO lockstep_orders (id, stage, sku, user_id, qty, replica, created_at, status, one_per_user) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?), ", batch), ", ")
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for first := w * batch; first < n; first += writers * batch {
				args := make([]any, 0, 9*batch)
				for j := first; j < first+batch; j++ {
					user := fmt.Sprintf("buyer-%d", j)
					args = append(args, orders.NewID(), stage, sku, user, 1, "r1", time.Now().UnixMicro(), orders.StatusLive, user)
				}
				if _, err := db.ExecContext(ctx, query, args...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	rows := (n + batch - 1) / batch * batch
	return float64(rows) / elapsed.Seconds()
}
