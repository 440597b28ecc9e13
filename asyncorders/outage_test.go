package asyncorders_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/orders"
)

// The order database stops answering for six seconds (SIGSTOP: every
// insert in flight hangs past its five-second attempt) while sales keep
// coming: the workers back off and retry, an insert that lands late meets
// its retry's row by id, and once the database answers they catch up —
// every sale one order, nothing pending, nothing dead-lettered.
func TestADatabaseOutageLosesAndDoublesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const sales = 300
	q := e.queue(t, "outage", sales)
	e.start(t, q, config("w1", asyncorders.Correct))
	e.start(t, q, config("w2", asyncorders.Correct))
	pid := e.mariadb.Pid()
	for i := range sales {
		if i == sales/3 {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(6*time.Second, func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		}
		if _, err := q.Admit(ctx, message(fmt.Sprintf("buyer-%d", i)), true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // six seconds of sales
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := q.Drain(dctx, sku); err != nil {
		t.Fatal(err)
	}
	inv := check(t, e, q)
	c, err := e.store.Counts(ctx, "outage", sku)
	if err != nil || !inv.Holds || inv.Units != sales || inv.DeadLetters != 0 || c.Orders != sales || c.DuplicateBuyers != 0 {
		t.Fatalf("invariant %+v, counts %+v %v", inv, c, err)
	}
	t.Logf("lag p50 %v p99 %v", inv.LagP50, inv.LagP99)
}

// Redis killed (SIGKILL) and started again, a second and a half after five
// sales no worker took yet: without persistence the stream, the buyers and
// the stock are gone — five admitted sales that no worker will ever turn
// into orders; with AOF (appendfsync everysec) all five entries come back
// and the workers write their orders.
func TestARedisRestartKeepsTheStreamOnlyWithAOF(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		args    []string
		entries int64
	}{
		{"no persistence", nil, 0},
		{"aof everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, tc.args...)
			e := e
			e.rdb = srv.Client(t)
			q := e.queue(t, "restart", 10)
			admit(t, q, 5)
			time.Sleep(1500 * time.Millisecond) // past everysec's fsync
			srv.Restart()
			n, err := e.rdb.XLen(ctx, q.Stream(sku)).Result()
			if err != nil || n != tc.entries {
				t.Fatalf("entries after the restart: %d %v, want %d", n, err, tc.entries)
			}
			if tc.entries == 0 {
				if _, err := q.Stats(ctx, sku); err == nil {
					t.Fatal("the stock survived a restart without persistence")
				}
				return
			}
			e.start(t, q, config("w1", asyncorders.Correct))
			drain(t, q)
			if inv := check(t, e, q); !inv.Holds || inv.Units != 5 || inv.Remaining != 5 {
				t.Fatalf("invariant %+v", inv)
			}
		})
	}
}

// down cuts every reply of the order database while it is set: each
// insert fails at once, as an outage, and is retried.
type down struct{ on atomic.Bool }

func (d *down) Request([]byte) time.Duration { return 0 }
func (d *down) Reply(_, _ []byte) (time.Duration, bool) {
	return 0, d.on.Load()
}

// The order database cut off while ten sales wait, and their worker
// restarted three times meanwhile (a crash loop, a deploy): each start
// re-reads its pending entries, one delivery more each, though no insert
// ever reached the database. Deliveries counted, and at the next start,
// the database back, all ten admitted sales — answered 200 — were voided
// and dead-lettered; now an outage counts for nothing: ten orders.
func TestAWorkerRestartedDuringAnOutageDeadLettersNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(e.mariadb.DSN("lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	cut := &down{}
	proxy, err := faultproxy.Start(cfg.Addr, cut)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg.Addr = proxy.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := orders.OpenMySQL(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	q := e.queue(t, "outage-restarts", 10)
	behind := e
	behind.store = store
	admit(t, q, 10)
	cut.on.Store(true)
	for range 4 { // the first start and three restarts
		stop := behind.start(t, q, config("w0", asyncorders.Correct))
		time.Sleep(200 * time.Millisecond)
		stop()
	}
	held, err := q.HeldBy(ctx, sku, "w0")
	if err != nil || len(held) != 10 || held[0].Deliveries != 4 {
		t.Fatalf("held by w0 during the outage: %+v %v; want ten entries delivered four times", held, err)
	}
	cut.on.Store(false)
	behind.start(t, q, config("w0", asyncorders.Correct))
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 10 || inv.DeadLetters != 0 {
		t.Fatalf("after the outage: %+v; want ten orders, no dead letter", inv)
	}
}
