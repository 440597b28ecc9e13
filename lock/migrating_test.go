package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
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

// TestEveryLockWorksFromTheFirstMomentItsSlotMigrates: with its slot
// MIGRATING and IMPORTING and another key of it moved, a free lock of each
// kind is taken, refused to another Client while held, and unlocked with
// nobody waiting, each at once. Their scripts declare the lock and its
// queue, waiting writers or fencing counter, which Redis refuses (TRYAGAIN)
// while one of them is on neither master: a free lock could not be taken,
// nor a lock without waiters unlocked, until the whole slot moved (issue
// 24). A FencedMutex's counter has moved with the first keys (its
// acquisition needs it on the node that creates the lock).
func TestEveryLockWorksFromTheFirstMomentItsSlotMigrates(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t).Client(t)
	for _, kind := range []struct {
		name   string
		of     func(c *lock.Client, name string) lock.Locker
		shared bool // another Client's lock is not refused
	}{
		{"mutex", func(c *lock.Client, name string) lock.Locker { return c.Mutex(name) }, false},
		{"fair", func(c *lock.Client, name string) lock.Locker { return c.FairMutex(name) }, false},
		{"fenced", func(c *lock.Client, name string) lock.Locker { return c.FencedMutex(name) }, false},
		{"write", func(c *lock.Client, name string) lock.Locker { return c.RWMutex(name).WriteLocker() }, false},
		{"read", func(c *lock.Client, name string) lock.Locker { return c.RWMutex(name).ReadLocker() }, true},
	} {
		t.Run(kind.name, func(t *testing.T) {
			name := uniqueName(t, kind.name+"-migrating")
			a, b := kind.of(newLockClient(t, rdb), name), kind.of(newLockClient(t, rdb), name)
			if f, ok := a.(*lock.FencedMutex); ok {
				fencedCounterMovesFirst(t, rdb, f, name)
			} else {
				startMigrating(t, rdb, name)
			}
			for _, step := range []struct {
				what string
				do   func(ctx context.Context) error
			}{
				{"a free lock is taken", a.Lock},
				{"a held lock is refused", func(ctx context.Context) error {
					if kind.shared {
						return nil
					}
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
		})
	}
}

// TestAFencedMutexWhoseCounterHasNotMovedIsRefusedAtOnce: a free
// FencedMutex whose slot migrates, its fencing counter still on the slot's
// master, can only be created on the importing master, which has no
// counter to take a token from: the acquisition is refused at once with
// ErrCounterMoving (it waited for the whole slot to move, refused with
// TRYAGAIN), and creates nothing.
func TestAFencedMutexWhoseCounterHasNotMovedIsRefusedAtOnce(t *testing.T) {
	rdb, name := onACluster(t, "fenced-counter")
	ctx := within(t, 30*time.Second)
	f := newLockClient(t, rdb).FencedMutex(name)
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	startMigrating(t, rdb, name)
	tryCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	ok, err := f.TryLock(tryCtx, 0, 0)
	if ok || !errors.Is(err, lock.ErrCounterMoving) {
		t.Fatalf("TryLock = %v, %v after %v; want ErrCounterMoving", ok, err, time.Since(start))
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refused after %v, not at once", took)
	}
	if n := rdb.Exists(ctx, "{"+name+"}").Val(); n != 0 {
		t.Fatal("the refused acquisition created the lock")
	}
}

// TestASecondReaderOnTheSlotsMasterLeavesNothingHalfDone: a read lock
// held on its slot's master when the slot starts migrating; another
// reader's script runs there (the lock's key is there), but that master
// may not create the reader's level key. The reader waits for the slot to
// move (until its context ends), and the first reader's unlock goes
// through: a script stopped half way (the reader's field written, its
// level key refused) made that unlock fail with "non local key".
func TestASecondReaderOnTheSlotsMasterLeavesNothingHalfDone(t *testing.T) {
	rdb, name := onACluster(t, "second-reader")
	ctx := within(t, 30*time.Second)
	first, second := newLockClient(t, rdb).RWMutex(name).ReadLocker(), newLockClient(t, rdb).RWMutex(name).ReadLocker()
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	startMigrating(t, rdb, name)
	tryCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// Its context ends while it waits, or while Redis answers its last TRYAGAIN.
	ok, err := second.TryLock(tryCtx, 3*time.Second, 0)
	if ok || err == nil || !(errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "TRYAGAIN")) {
		t.Fatalf("second reader: %v, %v; want to wait for the slot until its context ends", ok, err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatalf("the first reader's unlock: %v", err)
	}
}

// fencedCounterMovesFirst takes and releases f once, so that its fencing
// counter exists, then starts migrating its slot with the counter among
// the first keys moved; it checks the next hold's token still grows.
func fencedCounterMovesFirst(t *testing.T, rdb *redis.ClusterClient, f *lock.FencedMutex, name string) {
	t.Helper()
	ctx := t.Context()
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := f.Token()
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	counter := lock.FencingCounterKey(name)
	startMigrating(t, rdb, name).moveSome(t, counter)
	t.Cleanup(func() {
		if after, err := rdb.Get(context.Background(), counter).Int64(); err != nil || after <= before {
			t.Errorf("fencing counter %d (%v) after the migrating holds, %d before: it did not grow", after, err, before)
		}
	})
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
	key, queue := holder.Key(), "~queue:"+holder.Key()
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
// migrating (the script follows ASK to the importing master). The lock's
// release latch is one key (doc.go, "Keys"): were the second release to
// write it on the importing master while the source still has it,
// finishing the migration with MIGRATE without REPLACE, as redis-cli
// --cluster reshard does, would fail with BUSYKEY and stop the reshard.
// The release declares its latch, so Redis refuses the split (TRYAGAIN)
// and it runs with the lock's key alone, writing none there.
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
	latch := func(k string) bool { return strings.HasPrefix(k, "~released:") }
	for node, want := range map[*redis.Client]bool{mig.source: true, mig.target: false} {
		keys, err := node.ClusterGetKeysInSlot(ctx, int(mig.slot), 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(keys, latch) != want {
			t.Fatalf("%s holds %v: want a release latch there: %t", node.Options().Addr, keys, want)
		}
	}
	if err := mig.finish(); err != nil {
		t.Fatalf("finishing the migration: %v", err)
	}
}

// runTwice runs every script twice while on is set (the second run's
// reply is the one the client reads), as a request re-sent after its reply
// was lost does; a run refused (TRYAGAIN, counted) is not sent again.
type runTwice struct {
	on       *atomic.Bool
	tryAgain *atomic.Int32
}

func (h runTwice) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h runTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); h.on.Load() && (name == "evalsha" || name == "eval") {
			if err == nil {
				err = next(ctx, cmd)
			} else if strings.HasPrefix(err.Error(), "TRYAGAIN") {
				h.tryAgain.Add(1)
			}
		}
		return err
	}
}
func (h runTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAReleaseRunTwiceWhileItsSlotMigrates: while the lock's slot
// migrates, a release is refused with its latch (TRYAGAIN) and runs with
// the lock's key alone (doc.go, "Unknown outcomes"). Run twice there, an
// inner level's release sets the same count — the outer level still holds
// the lock — and the last level's release frees it, its second run
// answering ErrNotHeld, as the doc's table says of a release without its
// latch.
func TestAReleaseRunTwiceWhileItsSlotMigrates(t *testing.T) {
	rdb, name := onACluster(t, "twice-migrating")
	ctx := within(t, 30*time.Second)
	var twice atomic.Bool
	var tryAgain atomic.Int32
	rdb.AddHook(runTwice{on: &twice, tryAgain: &tryAgain})
	m, other := newLockClient(t, rdb).Mutex(name), newLockClient(t, rdb).Mutex(name)
	startMigrating(t, rdb, name)
	for range 2 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	twice.Store(true)
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("the inner level's release, run twice: %v", err)
	}
	twice.Store(false)
	if ok, err := other.TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("another Client's TryLock after the inner release ran twice = %v, %v; want busy: the outer level holds", ok, err)
	}
	twice.Store(true)
	if err := m.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the last level's release, run twice without its latch: %v, want ErrNotHeld (its second run)", err)
	}
	twice.Store(false)
	if ok, err := other.TryLock(ctx, 0, 0); !ok || err != nil {
		t.Fatalf("another Client's TryLock after the release = %v, %v; want the lock free", ok, err)
	}
	if tryAgain.Load() < 2 {
		t.Errorf("%d releases refused with their latch (TRYAGAIN); want both: the test did not run the releases without it", tryAgain.Load())
	}
}
