package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// TestWaitersFollowTheirSlot: on a Redis Cluster a lock's unlock messages
// are sharded (SPUBLISH on the master of its slot) and its waiters listen
// on that master (SSUBSCRIBE). When the slot moves — resharded to another
// master, or its master demoted by a manual failover or killed and replaced
// by its replica — the old master drops the subscription or dies with it.
// The waiter must be subscribed again on the slot's new master and take the
// lock at the holder's unlock, not sleep out the holder's 30 s lease.
func TestWaitersFollowTheirSlot(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	rdb := cluster.Client(t)
	for _, tc := range []struct {
		name string
		move func(t *testing.T, master *redis.Client, key string)
	}{
		{"slot resharded", func(t *testing.T, _ *redis.Client, key string) {
			if err := beginMigration(t, rdb, key).finish(); err != nil {
				t.Fatal(err)
			}
		}},
		{"master demoted by a manual failover", func(t *testing.T, master *redis.Client, _ string) {
			replica := replicaOf(t, cluster, master)
			if err := replica.Do(context.Background(), "cluster", "failover").Err(); err != nil {
				t.Fatal(err)
			}
		}},
		// Last: the killed node stays down.
		{"master killed", func(t *testing.T, master *redis.Client, _ string) {
			for _, n := range cluster.Nodes {
				if n.Addr == master.Options().Addr {
					n.Stop()
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := within(t, 40*time.Second)
			name := uniqueName(t, "follow")
			key, channel := "{"+name+"}", "{"+name+"}:channel"
			// The holder's lock is on a replica before the failovers, so the
			// new master has it.
			holder := newLockClient(t, rdb, lock.WithWaitReplicas(1, time.Second)).Mutex(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			master, err := rdb.MasterForKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			// The waiter retries what fails, as the shop does: a Lock
			// whose attempt meets the killed master ends with its error.
			woken := make(chan error, 1)
			go func() {
				m := newLockClient(t, rdb).Mutex(name)
				for {
					err := m.Lock(ctx)
					if err == nil || ctx.Err() != nil {
						woken <- err
						return
					}
					t.Logf("waiter: %v", err)
					time.Sleep(100 * time.Millisecond)
				}
			}()
			waitSubscribed(t, rdb, channel, "")

			tc.move(t, master, key)
			waitSubscribed(t, rdb, channel, master.Options().Addr)

			if err := holder.Unlock(ctx); err != nil {
				t.Fatalf("unlock after the slot moved: %v", err)
			}
			select {
			case err := <-woken:
				if err != nil {
					t.Fatalf("waiter: %v", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter slept through the unlock after its slot moved")
			}
		})
	}
}

// waitSubscribed waits until channel has a sharded subscriber on the
// master of its slot, and that master is not notAt.
func waitSubscribed(t *testing.T, rdb *redis.ClusterClient, channel, notAt string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rdb.ReloadState(ctx)
		master, err := rdb.MasterForKey(ctx, channel)
		if err == nil && master.Options().Addr != notAt {
			var n []any
			n, err = master.Do(ctx, "pubsub", "shardnumsub", channel).Slice()
			if err == nil && len(n) == 2 && n[1] == int64(1) {
				cancel()
				return
			}
			last = fmt.Sprintf("%s: PUBSUB SHARDNUMSUB %v %v", master.Options().Addr, n, err)
		} else if err != nil {
			last = err.Error()
		} else {
			last = "the slot is still on " + notAt
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no subscriber of %s on its slot's master within 20s (%s)", channel, last)
}

// replicaOf returns a client of master's replica in cluster.
func replicaOf(t *testing.T, cluster *redistest.Cluster, master *redis.Client) *redis.Client {
	t.Helper()
	ctx := context.Background()
	id, err := master.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cluster.Nodes {
		c := n.Client(t)
		info, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil || info == id {
			continue
		}
		nodes, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && f[0] == info && strings.Contains(f[2], "slave") && f[3] == id {
				return c
			}
		}
	}
	t.Fatal(errors.New("master has no replica"))
	return nil
}

// TestUnlocksPublishInTheLocksShard: on a Cluster a Client publishes its
// unlocks with SPUBLISH by default, which stays in the shard of the lock's
// slot, and with PUBLISH, broadcast to every node, under WithPlainPubSub;
// either way a waiter in another Client is woken by the unlock, long
// before the holder's 30 s lease would have let it in.
func TestUnlocksPublishInTheLocksShard(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t).Client(t)
	for _, tc := range []struct {
		name, command string
		opts          []lock.Option
	}{
		{"sharded by default", "spublish", nil},
		{"plain on request", "publish", []lock.Option{lock.WithPlainPubSub()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := within(t, 20*time.Second)
			name := uniqueName(t, "publish")
			master, err := rdb.MasterForKey(ctx, "{"+name+"}")
			if err != nil {
				t.Fatal(err)
			}
			holder := newLockClient(t, rdb, tc.opts...).Mutex(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			woken := make(chan error, 1)
			go func() { woken <- newLockClient(t, rdb, tc.opts...).Mutex(name).Lock(ctx) }()
			waitQueued(t, master, "~queue:{"+name+"}") // the queue: doc.go, "Keys"
			before := commandCalls(t, master, tc.command)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-woken:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the unlock did not wake the waiter")
			}
			if after := commandCalls(t, master, tc.command); after <= before {
				t.Errorf("%s calls on the lock's master: %d before the unlock, %d after; want more", tc.command, before, after)
			}
		})
	}
}

// waitQueued waits until a Client waits in the lock's queue of Clients.
func waitQueued(t *testing.T, master redis.Cmdable, queue string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for master.LLen(context.Background(), queue).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no waiter queued within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// commandCalls is how many times node ran command (INFO commandstats,
// calls from scripts included).
func commandCalls(t testing.TB, node *redis.Client, command string) int64 {
	t.Helper()
	info, err := node.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+command+":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		var calls int64
		if _, err := fmt.Sscan(n, &calls); err != nil {
			t.Fatal(err)
		}
		return calls
	}
	return 0
}
