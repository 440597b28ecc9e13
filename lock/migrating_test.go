package lock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

// The tests here open the window an interrupted redis-cli --cluster
// reshard leaves: a lock's slot MIGRATING on its master and IMPORTING on
// another, with some of the slot's keys moved and the slot not handed
// over (issue 24).

// TestACleanupKeepsToTheCallersDeadlineWhileTheSlotMigrates: a FairMutex's
// TryLock with a one-second context, on a held lock whose slot has started
// migrating. Its scripts get TRYAGAIN (three keys, not all on one node) and
// its attempt fails when the context ends; leaving the queue afterwards
// gets TRYAGAIN too, and used to be retried for the whole watchdog timeout
// (TryLock returned after 31 s with the default 30 s).
func TestACleanupKeepsToTheCallersDeadlineWhileTheSlotMigrates(t *testing.T) {
	rdb, name := onACluster(t, "fair-cleanup")
	ctx := within(t, 30*time.Second)
	holder := newLockClient(t, rdb).FairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	startMigrating(t, rdb, name)
	waiter := newLockClient(t, rdb, lock.WithWatchdogTimeout(10*time.Second)).FairMutex(name)

	tryCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	ok, err := waiter.TryLock(tryCtx, 5*time.Second, 0)
	took := time.Since(start)
	t.Logf("TryLock with a 1 s context: %v, %v after %v", ok, err, took)
	if ok {
		t.Fatal("TryLock took a held lock")
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("TryLock with a 1 s context returned after %v: its cleanup ran past the caller's deadline", took)
	}
}

// TestAMutexWorksFromTheFirstMomentItsSlotMigrates: with its slot
// MIGRATING and IMPORTING and another key of it moved, a free Mutex is
// taken, refused to another Client while held, and unlocked with nobody
// waiting, each at once. Its scripts declare the lock and its queue, which
// Redis refuses (TRYAGAIN) while one of them is on neither master: a free
// lock could not be taken, nor a lock without waiters unlocked, until the
// whole slot moved (issue 24).
func TestAMutexWorksFromTheFirstMomentItsSlotMigrates(t *testing.T) {
	rdb, name := onACluster(t, "mutex-migrating")
	startMigrating(t, rdb, name)
	a, b := newLockClient(t, rdb).Mutex(name), newLockClient(t, rdb).Mutex(name)
	for _, step := range []struct {
		what string
		do   func(ctx context.Context) error
	}{
		{"a free lock is taken", a.Lock},
		{"a held lock is refused", func(ctx context.Context) error {
			if ok, err := b.TryLock(ctx, 0, 0); ok || err != nil {
				return fmt.Errorf("TryLock = %v, %v; want busy", ok, err)
			}
			return nil
		}},
		{"a lock nobody waits for is unlocked", a.Unlock},
		{"and taken by another Client", b.Lock},
		{"and unlocked", b.Unlock},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		start := time.Now()
		err := step.do(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s while the slot migrates: %v after %v", step.what, err, time.Since(start))
		}
	}
}

// TestAWaiterHearsItsGrantWhileTheLocksKeysAreOnTheImportingMaster: the
// lock and its queue have moved to the importing master, the slot has not
// been handed over. The holder's unlock follows ASK there and grants the
// lock to the queued waiter, whose subscription is on the slot's master,
// which still serves the shard channel: the grant must reach it (the
// waiter slept until the migration ended, issue 24).
func TestAWaiterHearsItsGrantWhileTheLocksKeysAreOnTheImportingMaster(t *testing.T) {
	rdb, name := onACluster(t, "mutex-grant")
	ctx := within(t, 60*time.Second)
	holder, waiter := newLockClient(t, rdb).Mutex(name), newLockClient(t, rdb).Mutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	key, queue := holder.Key(), holder.Key()+":queue"
	woken := make(chan error, 1)
	go func() { woken <- waiter.Lock(ctx) }()
	waitQueued(t, rdb, queue)
	m := beginMigration(t, rdb, key)
	m.moveSome(t, key, queue)
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woken:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the waiter took the lock %v after the unlock", time.Since(released))
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter did not take the lock granted to it within 2 s: it missed the grant")
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// onACluster starts a cluster for a parallel test and names its lock.
func onACluster(t *testing.T, base string) (*redis.ClusterClient, string) {
	t.Parallel()
	return redistest.StartCluster(t).Client(t), uniqueName(t, base)
}

// startMigrating begins the migration of lock name's slot and moves
// another key of it, as a reshard stopped after its first batch.
func startMigrating(t *testing.T, rdb *redis.ClusterClient, name string) *migration {
	t.Helper()
	other := "{" + name + "}:other"
	if err := rdb.Set(t.Context(), other, "moved", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := beginMigration(t, rdb, "{"+name+"}")
	m.moveSome(t, other)
	return m
}

// moveSome moves keys of the slot to the target, as a reshard moves a
// slot's keys a batch at a time.
func (m *migration) moveSome(t *testing.T, keys ...string) {
	t.Helper()
	host, port, _ := strings.Cut(m.target.Options().Addr, ":")
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.source.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(fmt.Errorf("migrate %v: %w", keys, err))
	}
}

// TestASlotWhoseLockWasReleasedOnBothNodesMigrates: a Mutex released on
// its slot's master, then taken and released again once the slot started
// migrating (the script follows ASK to the importing master), leaves a
// release latch on each node. Finishing the migration with MIGRATE without
// REPLACE, as redis-cli --cluster reshard does, must move the source's
// latch: two latches of one name made it fail with BUSYKEY and stopped the
// reshard.
func TestASlotWhoseLockWasReleasedOnBothNodesMigrates(t *testing.T) {
	rdb, name := onACluster(t, "latch-migrates")
	ctx := within(t, 30*time.Second)
	m := newLockClient(t, rdb).Mutex(name)
	var mig *migration
	for i, migrating := range []bool{false, true} {
		if migrating {
			mig = startMigrating(t, rdb, name)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	for node, n := range map[string]*redis.Client{"source": mig.source, "target": mig.target} {
		keys, err := n.ClusterGetKeysInSlot(ctx, int(mig.slot), 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, ":released:") }) {
			t.Fatalf("the %s holds %v: no release latch, the test does not open the case", node, keys)
		}
	}
	if err := mig.finish(); err != nil {
		t.Fatalf("finishing the migration: %v", err)
	}
}
