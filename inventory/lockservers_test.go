package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// lockServerStage is one stage whose lock lives beside Redis.
type lockServerStage struct {
	id string
	// requests is how many round trips an acquisition makes: the last one's
	// reply is the one whose loss matters (go-sql-driver prepares a
	// statement, then executes it).
	requests int
	// failed is what a sale whose acquisition got no answer wraps: the
	// fail-fast row answers that its server is unavailable, by name; the
	// waiting locks, that the wait ended (busy).
	failed error
	// start starts the stage's server, of n members where it has several,
	// and returns their addresses and how to configure a replica that
	// reaches them at addrs: theirs, or a link's.
	start func(t *testing.T, n int) (addrs []string, configure func(addrs []string) func(*inventory.Config))
}

// configure starts st's server of n members and configures a replica that
// reaches it directly.
func (st lockServerStage) configure(t *testing.T, n int) func(*inventory.Config) {
	addrs, configure := st.start(t, n)
	return configure(addrs)
}

var lockServerStages = []lockServerStage{
	{"mysql", 2, inventory.ErrMySQLUnavailable, func(t *testing.T, _ int) ([]string, func([]string) func(*inventory.Config)) {
		m := lockservertest.MariaDB(t)
		root, err := sql.Open("mysql", m.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS lockstep"); err != nil {
			t.Fatal(err)
		}
		return []string{m.Addr}, func(addrs []string) func(*inventory.Config) {
			return func(c *inventory.Config) {
				db, err := sql.Open("mysql", strings.Replace(m.DSN("lockstep"), m.Addr, addrs[0], 1))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				c.MySQL = db
			}
		}
	}},
	{"zookeeper", 1, inventory.ErrLockBusy, func(t *testing.T, n int) ([]string, func([]string) func(*inventory.Config)) {
		z := lockservertest.ZooKeeper(t, n)
		return z.Servers, func(addrs []string) func(*inventory.Config) {
			return func(c *inventory.Config) { c.ZooKeeper = addrs }
		}
	}},
	{"etcd", 1, inventory.ErrLockBusy, func(t *testing.T, n int) ([]string, func([]string) func(*inventory.Config)) {
		e := lockservertest.Etcd(t, n)
		addrs := make([]string, len(e.Endpoints))
		for i, ep := range e.Endpoints {
			addrs[i] = strings.TrimPrefix(ep, "http://")
		}
		return addrs, func(addrs []string) func(*inventory.Config) {
			return func(c *inventory.Config) { c.Etcd = etcdClient(t, addrs) }
		}
	}},
}

// etcdClient is a client of the etcd members at addrs, closed when t ends.
func etcdClient(t *testing.T, addrs []string) *clientv3.Client {
	t.Helper()
	endpoints := make([]string, len(addrs))
	for i, a := range addrs {
		endpoints[i] = "http://" + a
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// replicasOn builds n inventories on one Redis, each configured by
// configure: the replicas of one shop.
func replicasOn(t *testing.T, n int, configure func(*inventory.Config)) []*inventory.Inventory {
	t.Helper()
	return replicasOnRedis(t, redistest.Start(t), n, configure)
}

// replicasOnRedis builds n inventories on srv, each configured by
// configure.
func replicasOnRedis(t *testing.T, srv *redistest.Server, n int, configure func(*inventory.Config)) []*inventory.Inventory {
	t.Helper()
	invs := make([]*inventory.Inventory, n)
	for i := range invs {
		cfg := inventory.Config{
			Redis: srv.Client(t), LockWait: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Exit:   func(int) {},
		}
		configure(&cfg)
		inv, err := inventory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inv.Close() })
		invs[i] = inv
	}
	return invs
}

// Concurrent sales over three replicas sell exactly the stock, never more,
// and the audit counts every sale that was answered.
func TestLockServerStagesNeverOversell(t *testing.T) {
	for _, st := range lockServerStages {
		t.Run(st.id, func(t *testing.T) {
			invs := replicasOn(t, 3, st.configure(t, 3))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := invs[0].Reset(ctx, st.id, "sku-1", 20, 0); err != nil {
				t.Fatal(err)
			}
			if err := invs[0].SetFaults(ctx, st.id, inventory.Faults{Work: 2 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond) // every replica has re-read the faults
			var sold, soldOut, busy atomic.Int64
			var wg sync.WaitGroup
			for i := range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						_, err := invs[i%len(invs)].Deduct(ctx, st.id, "sku-1", 1)
						switch {
						case err == nil:
							sold.Add(1)
						case errors.Is(err, inventory.ErrSoldOut):
							soldOut.Add(1)
						case errors.Is(err, inventory.ErrLockBusy):
							busy.Add(1)
						default:
							t.Errorf("deduct: %v", err)
						}
					}
				}()
			}
			wg.Wait()
			a, err := invs[1].Audit(ctx, st.id, "sku-1")
			if err != nil {
				t.Fatal(err)
			}
			if a.Oversold != 0 || !a.Consistent || a.Sold != sold.Load() {
				t.Fatalf("audit %+v after %d sales answered (sold out %d, busy %d)", a, sold.Load(), soldOut.Load(), busy.Load())
			}
			if sold.Load() == 0 {
				t.Fatalf("nothing sold (sold out %d, busy %d)", soldOut.Load(), busy.Load())
			}
		})
	}
}

// A holder killed with its row in the table leaves the mysql stage stuck —
// the seed's "no expiry" — until a reset deletes the row.
func TestMySQLStageStuckAfterCrashUntilReset(t *testing.T) {
	invs := replicasOn(t, 2, lockServerStages[0].configure(t, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := invs[0].Reset(ctx, "mysql", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := invs[0].SetFaults(ctx, "mysql", inventory.Faults{CrashHoldingLock: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := invs[0].Deduct(ctx, "mysql", "sku-1", 1); !errors.Is(err, inventory.ErrCrashed) {
		t.Fatalf("sale with the crash armed: %v, want ErrCrashed", err)
	}
	time.Sleep(1200 * time.Millisecond) // the crash has a successor of nothing: wait out a fault refresh
	for _, inv := range invs {
		if _, err := inv.Deduct(ctx, "mysql", "sku-1", 1); !errors.Is(err, inventory.ErrLockBusy) {
			t.Fatalf("sale after the holder crashed: %v, want ErrLockBusy (its row stays)", err)
		}
	}
	if err := invs[1].Reset(ctx, "mysql", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := invs[1].Deduct(ctx, "mysql", "sku-1", 1); err != nil {
		t.Fatalf("sale after the reset: %v", err)
	}
}

// When the etcd session's lease ends while a sale works, the sale learns it
// from its held context — at the session's next keep-alive, a third of the
// lease later, as a watchdog would — and writes nothing.
func TestEtcdStageStopsWhenItsLeaseEnds(t *testing.T) {
	e := lockservertest.Etcd(t, 3)
	admin, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	invs := replicasOn(t, 1, func(c *inventory.Config) {
		client, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		c.Etcd = client
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := invs[0].Reset(ctx, "etcd", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := invs[0].SetFaults(ctx, "etcd", inventory.Faults{Work: 2500 * time.Millisecond, LockTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	sale := make(chan error, 1)
	go func() {
		_, err := invs[0].Deduct(ctx, "etcd", "sku-1", 1)
		sale <- err
	}()
	var revoked bool
	for deadline := time.Now().Add(5 * time.Second); !revoked && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := admin.Get(ctx, "/lockstep/locks/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if _, err := admin.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				t.Fatal(err)
			}
			revoked = true
		}
	}
	if !revoked {
		t.Fatal("the sale's lock key never appeared")
	}
	if err := <-sale; !errors.Is(err, inventory.ErrLockBusy) {
		t.Fatalf("sale whose lease was revoked: %v, want ErrLockBusy (lock lost, nothing sold)", err)
	}
	a, err := invs[0].Audit(ctx, "etcd", "sku-1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Sold != 0 || a.Stock != 10 {
		t.Fatalf("audit %+v: the sale wrote after its lock was lost", a)
	}
	if _, err := invs[0].Deduct(ctx, "etcd", "sku-1", 1); err != nil {
		t.Fatalf("next sale on a fresh session: %v", err)
	}
}

// Without their server the stages are listed, unavailable, with the reason.
func TestLockServerStagesUnavailableWithoutTheirServer(t *testing.T) {
	invs := replicasOn(t, 1, func(*inventory.Config) {})
	for _, info := range invs[0].Stages() {
		if info.ID != "mysql" && info.ID != "etcd" && info.ID != "zookeeper" {
			continue
		}
		if info.Available || info.Unavailable == "" {
			t.Errorf("%s: available %v, reason %q; want unavailable with a reason", info.ID, info.Available, info.Unavailable)
		}
		if err := invs[0].Available(info.ID); !errors.Is(err, inventory.ErrStageUnavailable) {
			t.Errorf("%s: Available = %v, want ErrStageUnavailable", info.ID, err)
		}
	}
}

// A zookeeper sale whose session is lost while it works (the ensemble gone:
// the session may expire without this side knowing) writes nothing.
func TestZooKeeperStageStopsWhenItsSessionIsLost(t *testing.T) {
	z := lockservertest.ZooKeeper(t, 3)
	invs := replicasOn(t, 1, func(c *inventory.Config) { c.ZooKeeper = z.Servers })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := invs[0].Reset(ctx, "zookeeper", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := invs[0].SetFaults(ctx, "zookeeper", inventory.Faults{Work: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	sale := make(chan error, 1)
	go func() {
		_, err := invs[0].Deduct(ctx, "zookeeper", "sku-1", 1)
		sale <- err
	}()
	time.Sleep(500 * time.Millisecond) // the sale holds the lock and works
	for i := range z.Servers {
		z.Kill(i)
	}
	if err := <-sale; !errors.Is(err, inventory.ErrLockBusy) {
		t.Fatalf("sale whose session was lost: %v, want ErrLockBusy (lock lost, nothing sold)", err)
	}
	if a, err := invs[0].Audit(ctx, "zookeeper", "sku-1"); err != nil || a.Sold != 0 || a.Stock != 10 {
		t.Fatalf("audit %+v, %v: the sale wrote after its session was lost", a, err)
	}
}
