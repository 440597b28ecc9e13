package lock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func queueLen(t *testing.T, srv *redistest.Server, m *FairMutex) int64 {
	t.Helper()
	key, _ := lockKeys(m.name)
	return srv.Client(t).LLen(context.Background(), ownKey("queue", key)).Val()
}

func TestFairMutexGrantsInArrivalOrder(t *testing.T) {
	srv := redistest.Start(t)
	// Waiters of one Client and of other Clients alike.
	clients := []*Client{newClient(t, srv), newClient(t, srv), newClient(t, srv)}
	ctx := ctxTimeout(t, 20*time.Second)
	first := clients[0].FairMutex("fair")
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	const waiters = 6
	for i := range waiters {
		m := clients[i%len(clients)].FairMutex("fair")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		// The next waiter starts only once this one is queued in Redis.
		waitFor(t, func() bool { return queueLen(t, srv, first) == int64(i+1) })
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("acquisition order %v, want 0..%d in order", order, waiters-1)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters acquired", len(order), waiters)
	}
}

func TestFairMutexNewcomerDoesNotJumpTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	holder := c.FairMutex("fair-jump")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	queued := c.FairMutex("fair-jump")
	acquired := make(chan error, 1)
	go func() {
		ok, err := queued.TryLock(ctx, 5*time.Second, 0)
		if err == nil && !ok {
			err = errors.New("queued waiter did not acquire")
		}
		acquired <- err
	}()
	waitFor(t, func() bool { return queueLen(t, srv, holder) == 1 })
	newcomer := newClient(t, srv).FairMutex("fair-jump")
	if ok, err := newcomer.TryLock(ctx, 0, 0); ok || err != nil { // also opens its connection
		t.Fatalf("newcomer TryLock on a held lock = %v, %v", ok, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The lock is free for an instant, but it is promised to the queue's head.
	if ok, err := newcomer.TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("newcomer TryLock = %v, %v; want false: it jumped the queue", ok, err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
}

func TestFairMutexUnlockWakesOnlyTheNextWaiter(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	holder := c.FairMutex("fair-wake")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	key, channel := lockKeys("fair-wake")
	spy := srv.Client(t).PSubscribe(ctx, channel+":*")
	defer spy.Close()
	if _, err := spy.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	waiters := []*FairMutex{c.FairMutex("fair-wake"), c.FairMutex("fair-wake"), c.FairMutex("fair-wake")}
	for i, m := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := m.TryLock(ctx, 5*time.Second, 0); !ok || err != nil {
				t.Errorf("waiter %d: %v, %v", i, ok, err)
				return
			}
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		waitFor(t, func() bool { return srv.Client(t).LLen(ctx, ownKey("queue", key)).Val() == int64(i+1) })
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Three unlocks with someone queued (the holder's and two waiters'),
	// each to exactly one waiter, each waiter once.
	woken := map[string]int{}
	for range 3 {
		msg, err := spy.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		woken[msg.Channel]++
	}
	extra, err := spy.ReceiveTimeout(ctx, 100*time.Millisecond)
	if err == nil {
		t.Fatalf("unexpected fourth wake-up: %v", extra)
	}
	for ch, n := range woken {
		if n != 1 || !strings.HasPrefix(ch, channel+":"+c.ID()+":") {
			t.Fatalf("wake-ups %v: want one per waiter on its own channel", woken)
		}
	}
	if len(woken) != 3 {
		t.Fatalf("wake-ups %v: want 3 waiters woken once each", woken)
	}
}

func TestFairMutexDeadWaiterDoesNotBlockTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	const waiterTimeout = 300 * time.Millisecond
	c := newClient(t, srv, WithFairWaiterTimeout(waiterTimeout))
	ctx := ctxTimeout(t, 10*time.Second)
	holder := c.FairMutex("fair-dead")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A waiter joins the queue and dies without leaving it.
	ghost := c.FairMutex("fair-dead")
	ops := ghost.ops.(*fairOps)
	if ok, _, err := ops.acquire(ctx, time.Second, true, c.newToken(), 1); ok || err != nil {
		t.Fatalf("ghost joining the queue: %v, %v", ok, err)
	}
	behind := c.FairMutex("fair-dead")
	got := make(chan time.Time, 1)
	go func() {
		if ok, err := behind.TryLock(ctx, 5*time.Second, 0); ok && err == nil {
			got <- time.Now()
		}
		close(got)
	}()
	waitFor(t, func() bool { return queueLen(t, srv, holder) == 2 })
	unlocked := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	at, ok := <-got
	if !ok {
		t.Fatal("the waiter behind a dead one never acquired")
	}
	if d := at.Sub(unlocked); d > waiterTimeout+500*time.Millisecond {
		t.Fatalf("acquired %v after the unlock; a dead waiter should cost at most ~%v", d, waiterTimeout)
	}
}

func TestFairMutexWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	holder := c.FairMutex("fair-leave")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.FairMutex("fair-leave").TryLock(ctx, 100*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock on a held fair lock = %v, %v", ok, err)
	}
	if n := queueLen(t, srv, holder); n != 0 {
		t.Fatalf("queue length %d after the waiter gave up, want 0", n)
	}
	if err := c.FairMutex("fair-leave").Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("non-owner Unlock = %v, want ErrNotHeld", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutex(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 20*time.Second)
	tryLock := func(l Locker, wait time.Duration) bool {
		t.Helper()
		ok, err := l.TryLock(ctx, wait, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	unlock := func(l Locker) {
		t.Helper()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("readers share, writer waits for them", func(t *testing.T) {
		r1, r2, w := a.RWMutex("rw-1"), b.RWMutex("rw-1"), b.RWMutex("rw-1")
		if !tryLock(r1.ReadLocker(), 0) || !tryLock(r2.ReadLocker(), 0) {
			t.Fatal("two readers could not share the lock")
		}
		if tryLock(w.WriteLocker(), 50*time.Millisecond) {
			t.Fatal("writer acquired while readers held the lock")
		}
		unlock(r1.ReadLocker())
		if tryLock(w.WriteLocker(), 0) {
			t.Fatal("writer acquired while a reader still held the lock")
		}
		done := make(chan bool)
		go func() { ok, _ := w.WriteLocker().TryLock(ctx, 5*time.Second, 0); done <- ok }()
		time.Sleep(50 * time.Millisecond)
		unlock(r2.ReadLocker())
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("writer did not acquire after the last reader left")
			}
		case <-time.After(time.Second):
			t.Fatal("writer was not woken by the last reader's unlock")
		}
		unlock(w.WriteLocker())
	})

	t.Run("writer excludes readers and writers", func(t *testing.T) {
		w, other := a.RWMutex("rw-2"), b.RWMutex("rw-2")
		if !tryLock(w.WriteLocker(), 0) {
			t.Fatal("write lock not acquired")
		}
		if tryLock(other.ReadLocker(), 50*time.Millisecond) || tryLock(other.WriteLocker(), 0) {
			t.Fatal("another owner got in while the write lock was held")
		}
		unlock(w.WriteLocker())
		if !tryLock(other.ReadLocker(), 0) {
			t.Fatal("reader not admitted after the writer left")
		}
		unlock(other.ReadLocker())
	})

	t.Run("the writer may read, and keeps reading after it stops writing", func(t *testing.T) {
		rw, other := a.RWMutex("rw-3"), b.RWMutex("rw-3")
		if !tryLock(rw.WriteLocker(), 0) || !tryLock(rw.ReadLocker(), 0) {
			t.Fatal("the write owner could not also take the read lock")
		}
		if tryLock(other.ReadLocker(), 0) {
			t.Fatal("another reader got in beside a writer")
		}
		unlock(rw.WriteLocker())
		if tryLock(other.WriteLocker(), 0) {
			t.Fatal("a writer got in while the downgraded reader still read")
		}
		if !tryLock(other.ReadLocker(), 0) {
			t.Fatal("readers not shared after the downgrade")
		}
		unlock(rw.ReadLocker())
		unlock(other.ReadLocker())
		if n := srv.Client(t).Exists(ctx, "{rw-3}").Val(); n != 0 {
			t.Fatal("lock key left after every level was released")
		}
	})

	t.Run("reentrant levels and non-owner unlock", func(t *testing.T) {
		rw := a.RWMutex("rw-4")
		for range 2 {
			if !tryLock(rw.ReadLocker(), 0) {
				t.Fatal("reentrant read failed")
			}
		}
		if err := b.RWMutex("rw-4").ReadLocker().Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("non-owner Unlock = %v, want ErrNotHeld", err)
		}
		unlock(rw.ReadLocker())
		unlock(rw.ReadLocker())
		if err := rw.ReadLocker().Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Unlock past the last level = %v, want ErrNotHeld", err)
		}
	})
}

func TestRWMutexWatchdogRenewsReadLevels(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	// 900 ms, not less: a loaded 2-core machine delays a renewal (sent every
	// 300 ms) by more than a 300 ms timeout now and then.
	c := newClient(t, srv, WithWatchdogTimeout(900*time.Millisecond))
	ctx := ctxTimeout(t, 10*time.Second)
	rw := c.RWMutex("rw-watch")
	if err := rw.ReadLocker().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	levels := rdb.Keys(ctx, ownKey("rwlock_timeout", "{rw-watch}")+":*").Val()
	if rdb.Exists(ctx, "{rw-watch}").Val() != 1 || len(levels) != 1 {
		t.Fatalf("after three watchdog timeouts: lock exists %d, read levels %v", rdb.Exists(ctx, "{rw-watch}").Val(), levels)
	}
	if err := rw.ReadLocker().Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if left := lockKeysLeft(ctx, rdb, "{rw-watch}"); len(left) != 0 {
		t.Fatalf("keys left after unlock: %v", left)
	}
}

// lockKeysLeft are the keys of the lock key, its own and those the
// library keeps beside it (ownKey), but its release latch, which outlives
// a release on purpose (doc.go, "Unknown outcomes").
func lockKeysLeft(ctx context.Context, rdb *redis.Client, key string) []string {
	var left []string
	for _, k := range append(rdb.Keys(ctx, key+"*").Val(), rdb.Keys(ctx, "~*:"+key+"*").Val()...) {
		if k != latchKey(key) {
			left = append(left, k)
		}
	}
	return left
}
