package inventory_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/lock"
)

// A holder stops after every check its lock makes, right before its stock
// write (WithBeforeWrite stands in for a SIGSTOP); meanwhile its lock is
// taken from it (its key or node deleted, as an expired lease or session
// would) and another replica sells. Without the fence fault the stale
// write lands: the audit is inconsistent. With it, the write is refused,
// nothing sold by the stale holder, and every unit is accounted.
func TestFenceRefusesTheWriteOfALostLock(t *testing.T) {
	for _, st := range []struct {
		id    string
		setup func(t *testing.T) (configure func(*inventory.Config), steal func(context.Context) error)
	}{
		{"etcd", func(t *testing.T) (func(*inventory.Config), func(context.Context) error) {
			e := lockservertest.Etcd(t, 1)
			client, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			return func(c *inventory.Config) { c.Etcd = client }, func(ctx context.Context) error {
				_, err := client.Delete(ctx, "/lockstep/locks/", clientv3.WithPrefix())
				return err
			}
		}},
		{"zookeeper", func(t *testing.T) (func(*inventory.Config), func(context.Context) error) {
			z := lockservertest.ZooKeeper(t, 1)
			conn, _, err := zk.Connect(z.Servers, 5*time.Second, zk.WithLogInfo(false))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(conn.Close)
			return func(c *inventory.Config) { c.ZooKeeper = z.Servers }, func(context.Context) error {
				base := "/lockstep/locks/lockstep:zookeeper:{sku-1}:lock"
				children, _, err := conn.Children(base)
				for _, c := range children {
					err = errors.Join(err, conn.Delete(base+"/"+c, -1))
				}
				return err
			}
		}},
	} {
		t.Run(st.id, func(t *testing.T) {
			configure, steal := st.setup(t)
			invs := replicasOn(t, 2, configure)
			for _, fence := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := invs[0].Reset(ctx, st.id, "sku-1", 10, 0); err != nil {
					t.Fatal(err)
				}
				if err := invs[0].SetFaults(ctx, st.id, inventory.Faults{Fence: fence}); err != nil {
					t.Fatal(err)
				}
				if err := invs[1].SetFaults(ctx, st.id, inventory.Faults{Fence: fence}); err != nil {
					t.Fatal(err) // applied here at once, whatever the refresh
				}
				paused, resume := make(chan struct{}), make(chan struct{})
				stale := make(chan error, 1)
				go func() {
					_, err := invs[0].Deduct(inventory.WithBeforeWrite(ctx, func(context.Context) error {
						close(paused)
						<-resume
						return nil
					}), st.id, "sku-1", 1)
					stale <- err
				}()
				<-paused
				if err := steal(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := invs[1].Deduct(ctx, st.id, "sku-1", 1); err != nil {
					t.Fatalf("fence=%v: the sale after the lock was lost: %v", fence, err)
				}
				close(resume)
				err := <-stale
				a, aerr := invs[0].Audit(ctx, st.id, "sku-1")
				if aerr != nil {
					t.Fatal(aerr)
				}
				t.Logf("fence=%v: stale holder %v; audit %+v", fence, err, a.Counts)
				switch {
				case !fence && (err != nil || a.Consistent):
					t.Errorf("without the fence the stale write must land and break the audit: %v, %+v", err, a.Counts)
				case fence && (!errors.Is(err, inventory.ErrLockBusy) || !a.Consistent || a.Sold != 1):
					t.Errorf("with the fence the stale write must be refused (lock_busy, 1 sold, consistent): %v, %+v", err, a.Counts)
				}
			}
		})
	}
}

// The fenced stage's reset moves the fence to the newest token the lock
// handed out (its counter, at lock.FencingCounterKey), so that no holder
// from before the reset — a lower token — can read the new stock: a
// reset never lets a token go back. Read from any other key, the counter
// looks absent and the fence falls to 0.
func TestFencedResetFencesAtTheLocksNewestToken(t *testing.T) {
	srv := redistest.Start(t)
	inv := replicasOnRedis(t, srv, 1, func(*inventory.Config) {})[0]
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := inv.Reset(ctx, "fenced", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 { // three holders, three tokens
		if _, err := inv.Deduct(ctx, "fenced", "sku-1", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := inv.Reset(ctx, "fenced", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	const keys = "lockstep:fenced:{sku-1}:"
	newest, err := rdb.Get(ctx, lock.FencingCounterKey(keys+"lock")).Int64()
	if err != nil {
		t.Fatalf("the lock's token counter: %v", err)
	}
	fence, err := rdb.Get(ctx, keys+"fence").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(newest, 10) + ":reset"; fence != want {
		t.Fatalf("fence after the reset %q, want %q (the newest token handed out)", fence, want)
	}
	if _, err := inv.Deduct(ctx, "fenced", "sku-1", 1); err != nil {
		t.Fatalf("a sale after the reset, with a newer token: %v", err)
	}
}
