package asyncorders_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
)

// BenchmarkDrain10000 admits a backlog of 10,000 orders with no worker
// running, then starts two workers (DefaultConfig, in this process) and
// times their drain into MariaDB: the workers' sustained orders/s.
func BenchmarkDrain10000(b *testing.B) {
	const backlog = 10_000
	e := newEnv(b)
	ctx := context.Background()
	for i := range b.N {
		q := e.queue(b, fmt.Sprintf("drain-bench-%d", i), backlog)
		for j := range backlog {
			if _, err := q.Admit(ctx, message(fmt.Sprintf("buyer-%d", j)), true); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		var stops []func()
		for _, name := range []string{"w1", "w2"} {
			stops = append(stops, e.start(b, q, asyncorders.DefaultConfig(name, []string{sku})))
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := q.Drain(dctx, sku)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		for _, stop := range stops {
			stop()
		}
		if inv := check(b, e, q); !inv.Holds || inv.Units != backlog {
			b.Fatalf("invariant %+v", inv)
		}
		b.ReportMetric(elapsed.Seconds(), "drain-s")
		b.ReportMetric(backlog/elapsed.Seconds(), "orders/s")
	}
}
