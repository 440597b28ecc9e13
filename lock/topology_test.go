package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// topology is a Redis deployment the lock package must work on.
type topology struct {
	name string
	rdb  redis.UniversalClient
}

// TestEveryLockOnEveryTopology runs each lock kind's core promises on one
// Redis and on a real Redis Cluster (three masters, three replicas), with
// lock names that land on different shards.
func TestEveryLockOnEveryTopology(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	for _, topo := range []topology{
		{"one redis", redistest.Start(t).Client(t)},
		{"cluster", cluster.Client(t)},
	} {
		t.Run(topo.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				run  func(*testing.T, redis.UniversalClient)
			}{
				{"mutex excludes across clients", mutexExcludes},
				{"unlock wakes a waiter", unlockWakesWaiter},
				{"watchdog keeps a reentrant hold", watchdogKeepsReentrantHold},
				{"fair mutex serves in arrival order", fairServesInOrder},
				{"rw mutex shares reads and excludes writes", readersShareWritersExclude},
				{"fenced tokens grow", fencedTokensGrow},
				{"multilock over keys on several shards", multiLockAcrossShards},
				{"simple locks fail fast", simpleLocksFailFast},
			} {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, topo.rdb) })
			}
		})
	}
	// Last: it stops a replica of the cluster.
	t.Run("cluster/wait replicas asks the key's own master", func(t *testing.T) {
		waitReplicasOnTheKeysMaster(t, cluster)
	})
}

// WithWaitReplicas must WAIT on the connection that wrote the lock, on the
// master of its slot: with that master's replica stopped the acquisition
// is not confirmed, while a lock on another master is.
func waitReplicasOnTheKeysMaster(t *testing.T, cluster *redistest.Cluster) {
	ctx := within(t, 10*time.Second)
	rdb := cluster.Client(t)
	names := namesOnDistinctShards(t, rdb, 2)
	master, err := rdb.MasterForKey(ctx, "{"+names[0]+"}")
	if err != nil {
		t.Fatal(err)
	}
	replicas := master.Info(ctx, "replication").Val()
	for _, n := range cluster.Nodes {
		if _, port, _ := strings.Cut(n.Addr, ":"); strings.Contains(replicas, "port="+port+",") {
			n.Stop()
		}
	}
	c := newLockClient(t, rdb, lock.WithWaitReplicas(1, 300*time.Millisecond))
	if err := c.Mutex(names[0]).Lock(ctx); !errors.Is(err, lock.ErrNotReplicated) {
		t.Fatalf("lock on a master whose replica is stopped = %v, want ErrNotReplicated", err)
	}
	m := c.Mutex(names[1])
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("lock on a master with its replica: %v", err)
	}
	_ = m.Unlock(ctx)
}

func newLockClient(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c := lock.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName keeps subtests of both topologies from sharing keys.
func uniqueName(t *testing.T, base string) string {
	return fmt.Sprintf("%s-%d", base, time.Now().UnixNano())
}

func mutexExcludes(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 20*time.Second)
	name := uniqueName(t, "exclusive")
	var inside, overlaps, acquired atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		c := newLockClient(t, rdb)
		for range 4 {
			wg.Go(func() {
				m := c.Mutex(name)
				for range 15 {
					if err := m.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					time.Sleep(100 * time.Microsecond)
					inside.Add(-1)
					acquired.Add(1)
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if overlaps.Load() != 0 || acquired.Load() != 3*4*15 {
		t.Fatalf("%d overlaps in %d acquisitions", overlaps.Load(), acquired.Load())
	}
}

// A waiter must learn of the unlock from its channel, not from the lease
// running out (30 s here).
func unlockWakesWaiter(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	name := uniqueName(t, "wake")
	holder, waiter := newLockClient(t, rdb).Mutex(name), newLockClient(t, rdb).Mutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waited := <-got
	if late := time.Since(released); late > 2*time.Second {
		t.Fatalf("the waiter took the lock %v after the unlock (waited %v): it slept through the message", late, waited)
	}
	_ = waiter.Unlock(ctx)
}

func watchdogKeepsReentrantHold(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	name := uniqueName(t, "watchdog")
	// 900 ms, not less: a loaded 2-core machine delays a renewal (sent every
	// 300 ms) by more than a 300 ms timeout now and then.
	m := newLockClient(t, rdb, lock.WithWatchdogTimeout(900*time.Millisecond)).Mutex(name)
	other := newLockClient(t, rdb).Mutex(name)
	for range 2 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // three leases
	if ok, err := other.TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("another client took a watched lock: %v, %v", ok, err)
	}
	for range 2 {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := other.TryLock(ctx, 0, 0); !ok || err != nil {
		t.Fatalf("after both unlocks: %v, %v", ok, err)
	}
	_ = other.Unlock(ctx)
}

func fairServesInOrder(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	name := uniqueName(t, "fair")
	holder := newLockClient(t, rdb).FairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		m := newLockClient(t, rdb).FairMutex(name)
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			order <- i
			_ = m.Unlock(ctx)
		})
		time.Sleep(150 * time.Millisecond) // queued one after the other
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d got the lock in turn %d", got, want)
		}
		want++
	}
}

func readersShareWritersExclude(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	name := uniqueName(t, "rw")
	r1, r2 := newLockClient(t, rdb).RWMutex(name).ReadLocker(), newLockClient(t, rdb).RWMutex(name).ReadLocker()
	w := newLockClient(t, rdb).RWMutex(name).WriteLocker()
	for _, r := range []lock.Locker{r1, r2} {
		if ok, err := r.TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("read lock: %v, %v", ok, err)
		}
	}
	if ok, err := w.TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("write lock beside two readers: %v, %v", ok, err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- w.Lock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	for _, r := range []lock.Locker{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the writer was not woken when the last reader left")
	}
	if ok, err := r1.TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("read lock beside a writer: %v, %v", ok, err)
	}
	_ = w.Unlock(ctx)
}

func fencedTokensGrow(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	name := uniqueName(t, "fenced")
	var last int64
	for range 3 {
		m := newLockClient(t, rdb).FencedMutex(name)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Token() <= last {
			t.Fatalf("token %d after %d", m.Token(), last)
		}
		last = m.Token()
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// multiLockAcrossShards locks keys that, on a cluster, live on three
// different masters.
func multiLockAcrossShards(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	names := namesOnDistinctShards(t, rdb, 3)
	a, b := newLockClient(t, rdb), newLockClient(t, rdb)
	multi := func(c *lock.Client, names ...string) lock.Locker {
		locks := make([]lock.Locker, len(names))
		for i, n := range names {
			locks[i] = c.Mutex(n)
		}
		return lock.NewMultiLock(locks...)
	}
	all := multi(a, names...)
	if ok, err := all.TryLock(ctx, time.Second, 0); !ok || err != nil {
		t.Fatalf("multilock: %v, %v", ok, err)
	}
	overlapping := multi(b, names[2], uniqueName(t, "free"))
	if ok, err := overlapping.TryLock(ctx, 200*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("a multilock sharing one held key: %v, %v", ok, err)
	}
	if err := all.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := overlapping.TryLock(ctx, time.Second, 0); !ok || err != nil {
		t.Fatalf("after the unlock: %v, %v", ok, err)
	}
	_ = overlapping.Unlock(ctx)
}

// namesOnDistinctShards returns n lock names whose keys ({name}) live on n
// different masters of a cluster (any names on one Redis).
func namesOnDistinctShards(t *testing.T, rdb redis.UniversalClient, n int) []string {
	t.Helper()
	cc, ok := rdb.(*redis.ClusterClient)
	var names []string
	seen := make(map[string]bool)
	for i := 0; len(names) < n; i++ {
		name := uniqueName(t, fmt.Sprintf("shard%d", i))
		if ok {
			master, err := cc.MasterForKey(context.Background(), "{"+name+"}")
			if err != nil {
				t.Fatal(err)
			}
			if seen[master.Options().Addr] {
				continue
			}
			seen[master.Options().Addr] = true
		}
		names = append(names, name)
	}
	return names
}

func simpleLocksFailFast(t *testing.T, rdb redis.UniversalClient) {
	ctx := within(t, 10*time.Second)
	for _, tc := range simpleLocks {
		key := uniqueName(t, tc.name)
		first, second := tc.new(rdb, key), tc.new(rdb, key)
		if err := first.TryLock(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := second.TryLock(ctx); !errors.Is(err, lock.ErrLockBusy) {
			t.Fatalf("%s: second TryLock = %v, want ErrLockBusy", tc.name, err)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := second.TryLock(ctx); err != nil {
			t.Fatalf("%s after the unlock: %v", tc.name, err)
		}
		_ = second.Unlock(ctx)
	}
}

// TestLocksWorkWhileTheirSlotMigrates moves a held lock's slot to another
// master (Redis Cluster resharding: MIGRATING/IMPORTING, then MIGRATE of its
// keys) while waiters wait: every acquisition and release in between must
// succeed (a script that names a key that does not exist, such as a
// channel, gets TRYAGAIN for as long as the slot migrates), and a waiter
// must still be woken by the unlock.
func TestLocksWorkWhileTheirSlotMigrates(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	rdb := cluster.Client(t)
	ctx := within(t, 30*time.Second)
	for _, kind := range []struct {
		name   string
		locker func(c *lock.Client, name string) lock.Locker
	}{
		{"mutex", func(c *lock.Client, n string) lock.Locker { return c.Mutex(n) }},
		{"fair", func(c *lock.Client, n string) lock.Locker { return c.FairMutex(n) }},
		{"fenced", func(c *lock.Client, n string) lock.Locker { return c.FencedMutex(n) }},
		{"write", func(c *lock.Client, n string) lock.Locker { return c.RWMutex(n).WriteLocker() }},
		{"read then write", func(c *lock.Client, n string) lock.Locker { return c.RWMutex(n).ReadLocker() }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			name := uniqueName(t, "migrating-"+kind.name)
			holder := kind.locker(newLockClient(t, rdb), name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			other := kind.locker(newLockClient(t, rdb), name)
			if kind.name == "read then write" {
				other = newLockClient(t, rdb).RWMutex(name).WriteLocker()
			}
			woken := make(chan error, 1)
			go func() { woken <- other.Lock(ctx) }()
			time.Sleep(100 * time.Millisecond)

			// Before any key moved, with every key the lock has in place, an
			// unlock must go through at once: a script that declared a key
			// that never exists (a channel) would get TRYAGAIN until the
			// whole slot moved.
			m := beginMigration(t, rdb, "{"+name+"}")
			if err := holder.Unlock(ctx); err != nil {
				t.Fatalf("unlock while the slot migrates: %v", err)
			}
			// Then the keys move, as redis-cli --cluster reshard moves them.
			// Until the slot is handed over, a script whose keys are split
			// (a lock beside a queue the grant emptied) gets TRYAGAIN and
			// is retried: the waiter must take the lock all the same.
			moved := make(chan error, 1)
			go func() { time.Sleep(300 * time.Millisecond); moved <- m.finish() }()
			select {
			case err := <-woken:
				if err != nil {
					t.Fatalf("waiter while the slot migrates: %v", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter did not get the lock unlocked while its slot migrated")
			}
			if ok, err := holder.TryLock(ctx, 0, 0); ok || err != nil {
				t.Fatalf("TryLock of a held lock while the slot migrates = %v, %v; want busy", ok, err)
			}
			if err := <-moved; err != nil {
				t.Fatal(err)
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatalf("unlock after the slot moved: %v", err)
			}
			if ok, err := holder.TryLock(ctx, time.Second, 0); !ok || err != nil {
				t.Fatalf("lock after the slot moved = %v, %v", ok, err)
			}
			_ = holder.Unlock(ctx)
		})
	}
}

// migration is a slot on its way from one master to another.
type migration struct {
	rdb            *redis.ClusterClient
	slot           int64
	source, target *redis.Client
	targetID       string
}

// beginMigration marks key's slot MIGRATING on its master and IMPORTING on
// another, as redis-cli --cluster reshard does before it moves the keys.
func beginMigration(t *testing.T, rdb *redis.ClusterClient, key string) *migration {
	t.Helper()
	ctx := context.Background()
	slot := rdb.ClusterKeySlot(ctx, key).Val()
	source, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m := &migration{rdb: rdb, slot: slot, source: source}
	sourceID := source.ClusterMyID(ctx).Val()
	var mu sync.Mutex // ForEachMaster calls in parallel
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		id := n.ClusterMyID(ctx).Val()
		mu.Lock()
		defer mu.Unlock()
		if id != sourceID && m.target == nil {
			m.target, m.targetID = n, id
		}
		return nil
	})
	if err != nil || m.target == nil {
		t.Fatalf("no other master: %v", err)
	}
	if err := m.target.Do(ctx, "cluster", "setslot", slot, "importing", sourceID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := source.Do(ctx, "cluster", "setslot", slot, "migrating", m.targetID).Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// finish moves the slot's keys and hands the slot to the target.
func (m *migration) finish() error {
	ctx := context.Background()
	keys, err := m.source.ClusterGetKeysInSlot(ctx, int(m.slot), 1000).Result()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		host, port, _ := strings.Cut(m.target.Options().Addr, ":")
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := m.source.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("migrate %v: %w", keys, err)
		}
	}
	return m.rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Do(ctx, "cluster", "setslot", m.slot, "node", m.targetID).Err()
	})
}
