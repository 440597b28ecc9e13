package lock

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
	"github.com/redis/go-redis/v9"
)

func newClient(t *testing.T, srv *redistest.Server, opts ...Option) *Client {
	t.Helper()
	c := New(srv.Client(t), opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestReentrantCountsLevelsInRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 5*time.Second)
	m := c.Mutex("reentrant")

	for range 2 {
		if ok, err := m.TryLock(ctx, 0, time.Second); !ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want true", ok, err)
		}
	}
	if n, _ := rdb.HGet(ctx, m.Key(), c.ID()).Int(); n != 2 {
		t.Fatalf("hash field = %d, want 2", n)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.HGet(ctx, m.Key(), c.ID()).Int(); n != 1 {
		t.Fatalf("hash field after one unlock = %d, want 1", n)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, m.Key()).Result(); n != 0 {
		t.Fatal("lock key still exists after the last unlock")
	}
	if err := m.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("third Unlock = %v, want ErrNotHeld", err)
	}
}

// A Client's last Unlock deletes its field, whatever count Redis keeps in
// it: a reentrant level whose release reached Redis as a lost reply, or was
// never sent, must not leave the lock held until its lease runs out.
func TestLastUnlockReleasesWhateverRedisCounts(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 5*time.Second)
	m := c.Mutex("miscounted")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.HIncrBy(ctx, m.Key(), c.ID(), 1) // a level the Client no longer holds
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, m.Key()).Val(); n != 0 {
		t.Fatalf("lock key still exists after the last Unlock: %v", rdb.HGetAll(ctx, m.Key()).Val())
	}
}

// Two owners of one Client and two Clients (two processes) must behave alike.
func ownerPairs(t *testing.T, srv *redistest.Server, opts ...Option) map[string][2]*Client {
	one := newClient(t, srv, opts...)
	return map[string][2]*Client{
		"same client": {one, one},
		"two clients": {newClient(t, srv, opts...), newClient(t, srv, opts...)},
	}
}

func TestWaiterGetsLockRightAfterUnlock(t *testing.T) {
	srv := redistest.Start(t)
	for name, cs := range ownerPairs(t, srv) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			a, b := cs[0].Mutex("handoff-"+name), cs[1].Mutex("handoff-"+name)
			if err := a.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				if ok, err := b.TryLock(ctx, 5*time.Second, 0); ok && err == nil {
					got <- time.Now()
				}
				close(got)
			}()
			time.Sleep(100 * time.Millisecond)
			select {
			case <-got:
				t.Fatal("B acquired while A held the lock")
			default:
			}
			unlocked := time.Now()
			if err := a.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			at, ok := <-got
			if !ok {
				t.Fatal("B did not acquire")
			}
			// Woken by the unlock, not by the 30s TTL fallback.
			if d := at.Sub(unlocked); d > 500*time.Millisecond {
				t.Fatalf("B acquired %v after the unlock", d)
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestThreeWayHandoff(t *testing.T) {
	srv := redistest.Start(t)
	for name, cs := range ownerPairs(t, srv) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			key := "three-way-" + name
			a := cs[0].Mutex(key)
			if err := a.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			var inside atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for i, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := c.Mutex(key)
					ok, err := m.TryLock(ctx, 5*time.Second, 0)
					if !ok || err != nil {
						errs <- fmt.Errorf("waiter %d: TryLock = %v, %v", i, ok, err)
						return
					}
					if inside.Add(1) != 1 {
						errs <- fmt.Errorf("waiter %d: two holders at once", i)
					}
					time.Sleep(20 * time.Millisecond)
					inside.Add(-1)
					errs <- m.Unlock(ctx)
				}()
			}
			time.Sleep(50 * time.Millisecond)
			if err := a.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestWaitTimeout(t *testing.T) {
	srv := redistest.Start(t)
	for name, cs := range ownerPairs(t, srv) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			key := "wait-timeout-" + name
			if ok, err := cs[0].Mutex(key).TryLock(ctx, 0, 2*time.Second); !ok || err != nil {
				t.Fatalf("first TryLock = %v, %v", ok, err)
			}
			start := time.Now()
			ok, err := cs[1].Mutex(key).TryLock(ctx, 100*time.Millisecond, time.Second)
			took := time.Since(start)
			if ok || err != nil {
				t.Fatalf("TryLock on a held lock = %v, %v; want false, nil", ok, err)
			}
			if took < 100*time.Millisecond || took > time.Second {
				t.Fatalf("TryLock gave up after %v, want ~100ms", took)
			}
		})
	}
}

func TestLeaseExpiresWithoutUnlock(t *testing.T) {
	srv := redistest.Start(t)
	for name, cs := range ownerPairs(t, srv) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			key := "lease-" + name
			a, b := cs[0].Mutex(key), cs[1].Mutex(key)
			held, ok, err := a.TryLockContext(ctx, 0, 200*time.Millisecond)
			if !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			start := time.Now()
			if ok, err := b.TryLock(ctx, 3*time.Second, 0); !ok || err != nil {
				t.Fatalf("second owner after the lease = %v, %v", ok, err)
			}
			if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
				t.Fatalf("second owner acquired after %v, want ~200ms", took)
			}
			select { // its timer and Redis's expiry race; allow for scheduling
			case <-held.Done():
			case <-time.After(100 * time.Millisecond):
			}
			if cause := context.Cause(held); !errors.Is(cause, ErrLockLost) {
				t.Fatalf("first owner's held context: cause %v, want ErrLockLost", cause)
			}
			if err := a.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Seed 003: 1000 concurrent tryLock(wait 10ms, lease 10s) — exactly one wins.
func TestThousandShortWaitersExactlyOneAcquires(t *testing.T) {
	srv := redistest.Start(t)
	clients := []*Client{newClient(t, srv), newClient(t, srv), newClient(t, srv), newClient(t, srv)}
	ctx := ctxTimeout(t, 20*time.Second)
	var acquired, tried atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tried.Add(1)
			ok, err := clients[i%len(clients)].Mutex("thousand").TryLock(ctx, 10*time.Millisecond, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			if ok {
				acquired.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if tried.Load() != 1000 || acquired.Load() != 1 {
		t.Fatalf("tried %d, acquired %d; want 1000 tried and exactly 1 acquired", tried.Load(), acquired.Load())
	}
}

// Seed 003: 100 concurrent tryLock(wait 10s) — all acquire, one at a time.
func TestHundredLongWaitersAllAcquireOneAtATime(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	clients := []*Client{newClient(t, srv), newClient(t, srv), newClient(t, srv), newClient(t, srv)}
	ctx := ctxTimeout(t, 30*time.Second)
	var acquired, inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := clients[i%len(clients)].Mutex("hundred")
			ok, err := m.TryLock(ctx, 10*time.Second, 5*time.Second)
			if !ok || err != nil {
				t.Errorf("TryLock = %v, %v", ok, err)
				return
			}
			if inside.Add(1) != 1 {
				overlaps.Add(1)
			}
			rdb.Incr(ctx, "hundred-counter")
			inside.Add(-1)
			acquired.Add(1)
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if acquired.Load() != 100 || overlaps.Load() != 0 {
		t.Fatalf("acquired %d with %d overlaps; want 100 and 0", acquired.Load(), overlaps.Load())
	}
	if n, _ := rdb.Get(ctx, "hundred-counter").Int(); n != 100 {
		t.Fatalf("counter = %d, want 100", n)
	}
}

func TestWatchdogKeepsLockPastItsTimeout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var renewals atomic.Int32
	// 900 ms, not less: a loaded 2-core machine delays a renewal (sent every
	// 300 ms) by more than a 300 ms timeout now and then.
	const timeout = 900 * time.Millisecond
	a := newClient(t, srv, WithWatchdogTimeout(timeout),
		WithRenewalObserver(func(_ string, err error) {
			if err == nil {
				renewals.Add(1)
			}
		}))
	b := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	m := a.Mutex("watchdog")
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * timeout)
	if ok, err := b.Mutex("watchdog").TryLock(ctx, 0, 0); ok || err != nil {
		t.Fatalf("another client acquired a watched lock: %v, %v", ok, err)
	}
	if pttl := rdb.PTTL(ctx, m.Key()).Val(); pttl <= 0 || pttl > timeout {
		t.Fatalf("PTTL = %v, want within the %v watchdog timeout", pttl, timeout)
	}
	if held.Err() != nil {
		t.Fatalf("held context ended while the lock was kept: %v", context.Cause(held))
	}
	if n := renewals.Load(); n < 6 {
		t.Fatalf("%d renewals in %v, want about 9 (every %v)", n, 3*timeout, timeout/3)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(held); !errors.Is(cause, ErrReleased) {
		t.Fatalf("held context cause after Unlock = %v, want ErrReleased", cause)
	}
	renewedAtUnlock := renewals.Load()
	time.Sleep(timeout / 2) // past the next renewal's time
	if renewals.Load() != renewedAtUnlock {
		t.Fatal("the watchdog renewed after Unlock")
	}
}

// Every watchdog hold of a Client waits for its renewal in one queue; a hold
// released from the middle of it must not stop the others' renewals, nor be
// renewed itself.
func TestWatchdogRenewsEveryHoldOfAClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var (
		mu       sync.Mutex
		renewals = map[string]int{}
	)
	// A timeout well above a loaded machine's scheduling delays: a renewal
	// late by more than a timeout would end a hold the test keeps.
	const timeout = 900 * time.Millisecond
	c := newClient(t, srv, WithWatchdogTimeout(timeout),
		WithRenewalObserver(func(name string, err error) {
			if err == nil {
				mu.Lock()
				renewals[name]++
				mu.Unlock()
			}
		}))
	ctx := ctxTimeout(t, 10*time.Second)
	type held struct {
		name, key string
		lock      interface {
			Locker
			LockContext(context.Context) (context.Context, error)
		}
		ctx context.Context
	}
	var holds []*held
	for i := range 4 {
		h := &held{name: fmt.Sprintf("queue-%d", i)}
		h.key, _ = lockKeys(h.name)
		if i == 3 { // an ownedLock's hold in the same queue
			h.lock = c.FairMutex(h.name)
		} else {
			h.lock = c.Mutex(h.name)
		}
		var err error
		if h.ctx, err = h.lock.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
		time.Sleep(30 * time.Millisecond) // each due at its own time
	}
	released := holds[1]
	if err := released.lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * timeout)
	mu.Lock()
	defer mu.Unlock()
	for _, h := range holds {
		// A Mutex reports renewals by its key, the other locks by name.
		n := renewals[h.name] + renewals[h.key]
		if h == released {
			if n != 0 || rdb.Exists(ctx, h.key).Val() != 0 {
				t.Errorf("%s: %d renewals after Unlock; key exists: %d", h.name, n, rdb.Exists(ctx, h.key).Val())
			}
			continue
		}
		if pttl := rdb.PTTL(ctx, h.key).Val(); pttl <= 0 || pttl > timeout {
			t.Errorf("%s: PTTL = %v, want within the %v watchdog timeout", h.name, pttl, timeout)
		}
		if h.ctx.Err() != nil {
			t.Errorf("%s: held context ended while kept: %v", h.name, context.Cause(h.ctx))
		}
		if n < 8 { // 12 due, one every timeout/3
			t.Errorf("%s: %d renewals in %v, want about 12 (every %v)", h.name, n, 4*timeout, timeout/3)
		}
	}
}

func TestClosedClientLockIsTakenOverAfterWatchdogTimeout(t *testing.T) {
	srv := redistest.Start(t)
	// 900 ms, not less: the hold must be renewed until Close (a renewal late
	// by more than the timeout would lose it first, ending held otherwise).
	const timeout = 900 * time.Millisecond
	crashed := newClient(t, srv, WithWatchdogTimeout(timeout))
	survivor := newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	held, err := crashed.Mutex("crash").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout) // renewed at least once
	closedAt := time.Now()
	if err := crashed.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(held); !errors.Is(cause, ErrClosed) {
		t.Fatalf("held context cause after Close = %v, want ErrClosed", cause)
	}
	if ok, err := survivor.Mutex("crash").TryLock(ctx, 3*time.Second, 0); !ok || err != nil {
		t.Fatalf("survivor TryLock = %v, %v", ok, err)
	}
	if took := time.Since(closedAt); took > timeout+300*time.Millisecond {
		t.Fatalf("taken over %v after the crash, want within the %v watchdog timeout", took, timeout)
	}
}

func TestNonOwnerUnlockIsRejectedAndLockStaysHeld(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	owner := newClient(t, srv)
	ctx := ctxTimeout(t, 5*time.Second)
	m := owner.Mutex("owned")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]*Mutex{
		"handle of the same client": owner.Mutex("owned"),
		"other client":              newClient(t, srv).Mutex("owned"),
	} {
		if err := other.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("%s: Unlock = %v, want ErrNotHeld", name, err)
		}
	}
	if n := rdb.HGet(ctx, m.Key(), owner.ID()).Val(); n != "1" {
		t.Fatalf("owner's hold after foreign unlocks = %q, want 1", n)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledContextEndsWaitPromptly(t *testing.T) {
	srv := redistest.Start(t)
	for name, cs := range ownerPairs(t, srv) {
		t.Run(name, func(t *testing.T) {
			key := "cancel-" + name
			if err := cs[0].Mutex(key).Lock(ctxTimeout(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			start := time.Now()
			err := cs[1].Mutex(key).Lock(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock = %v, want context.Canceled", err)
			}
			if took := time.Since(start); took > 250*time.Millisecond {
				t.Fatalf("Lock returned %v after start, want ~50ms", took)
			}
		})
	}
}

func TestHeldContextCarriesValuesNotCancellation(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	type key struct{}
	for name, l := range map[string]interface {
		LockContext(context.Context) (context.Context, error)
		Unlock(context.Context) error
	}{"Mutex": c.Mutex("values"), "FairMutex": c.FairMutex("fair-values")} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.WithValue(ctxTimeout(t, 5*time.Second), key{}, "v"))
			held, err := l.LockContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if held.Err() != nil || held.Value(key{}) != "v" {
				t.Fatalf("held context after the caller's cancel: err %v, value %v; want alive, with the caller's value", held.Err(), held.Value(key{}))
			}
			if err := l.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			if cause := context.Cause(held); !errors.Is(cause, ErrReleased) {
				t.Fatalf("cause after Unlock = %v, want ErrReleased", cause)
			}
		})
	}
}

func TestLostLockCancelsHeldContext(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	// The first renewal, a third of the timeout in, finds the lock gone;
	// without it the hold would end at its expiry, the whole timeout after
	// the acquisition. The bound between the two leaves a loaded machine's
	// late timers a third of the timeout.
	const timeout = 3 * time.Second
	c := newClient(t, srv, WithWatchdogTimeout(timeout))
	ctx := ctxTimeout(t, 10*time.Second)

	m := c.Mutex("stolen")
	held, err := m.LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, m.Key()) // an operator, or a failover that lost it
	select {
	case <-held.Done():
	case <-time.After(timeout * 2 / 3):
		t.Fatal("held context not cancelled by the first renewal after the loss")
	}
	if cause := context.Cause(held); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
	if err := m.Unlock(ctx); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock of a lost lock = %v, want ErrNotHeld and ErrLockLost", err)
	}
}

func TestUnreachableRedisCancelsHeldContextWhenLeaseRunsOut(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 600 * time.Millisecond
	c := New(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond}),
		WithWatchdogTimeout(timeout))
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxTimeout(t, 5*time.Second)
	sent := time.Now()
	held, err := c.Mutex("partitioned").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	select {
	case <-held.Done():
	case <-time.After(2 * timeout):
		t.Fatal("held context still alive long after the lease ran out")
	}
	if lostAfter := time.Since(sent); lostAfter < timeout-50*time.Millisecond {
		t.Fatalf("lock reported lost after %v, before its %v lease could have run out", lostAfter, timeout)
	}
	if cause := context.Cause(held); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
}

func TestWaitersLearnPromptlyThatRedisIsGone(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv)
	waiter := New(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond}))
	t.Cleanup(func() { _ = waiter.Close() })
	ctx := ctxTimeout(t, 10*time.Second)
	if err := holder.Mutex("gone").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() { errs <- waiter.Mutex("gone").Lock(ctx) }() // the holder's TTL is 30s
	time.Sleep(100 * time.Millisecond)
	stopped := time.Now()
	srv.Stop()
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("Lock succeeded with Redis gone")
		}
		t.Logf("waiter returned %v after %v", err, time.Since(stopped))
	case <-time.After(5 * time.Second): // not the holder's 30 s TTL, nor ctx's 10 s; a loaded machine's 1 s was too short
		t.Fatal("a waiter still slept 5s after Redis went away")
	}
}

// A renewal stuck in Redis (here CLIENT PAUSE; in the shop, a batch that
// ignores the caller's deadline) must not keep the holder believing it
// holds: the hold ends when the lease runs out, whatever the call does.
func TestStuckRenewalStillEndsTheHoldAtExpiry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const timeout = 600 * time.Millisecond
	c := newClient(t, srv, WithWatchdogTimeout(timeout)) // go-redis default: no context deadlines on sockets
	ctx := ctxTimeout(t, 10*time.Second)
	held, err := c.Mutex("stuck").LockContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastRenewal := time.Now()
	if err := rdb.Do(ctx, "client", "pause", 2500, "write").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
		if d := time.Since(lastRenewal); d > timeout+300*time.Millisecond {
			t.Fatalf("held context ended %v after the pause, want within the %v lease", d, timeout)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("held context still alive 2s into a pause, past its 600ms lease")
	}
	if cause := context.Cause(held); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
}

func TestWaiterDoesNotPollRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder, waiter := newClient(t, srv), newClient(t, srv)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := holder.Mutex("quiet").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A first short wait opens the waiter's connections (HELLO, CLIENT
	// SETINFO, ...), which are no part of what a wait costs.
	if ok, err := waiter.Mutex("quiet").TryLock(ctx, 20*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	rdb.ConfigResetStat(ctx)
	if ok, err := waiter.Mutex("quiet").TryLock(ctx, 500*time.Millisecond, 0); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	// A first attempt, one after subscribing (which queues the Client), one
	// when the wait runs out, and leaving the queue; a poller would need
	// dozens in 500ms.
	stats := rdb.InfoMap(ctx, "commandstats").Val()["Commandstats"]
	if calls := stats["cmdstat_evalsha"]; !strings.HasPrefix(calls, "calls=4,") {
		t.Fatalf("a 500ms wait ran the lock's scripts: %s; want 4 calls", calls)
	}
	if calls := stats["cmdstat_subscribe"]; !strings.HasPrefix(calls, "calls=1,") {
		t.Fatalf("SUBSCRIBE: %s; want 1 call", calls)
	}
}

// A handle keeps the cohort of its last acquisition for its next one. Two
// handles of one Client whose kept cohorts differ must still exclude each
// other: the cohort in use wins over a kept one.
func TestHandlesReusingTheirCohortsExcludeEachOther(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	ctx := ctxTimeout(t, 5*time.Second)
	a, b := c.Mutex("turns"), c.Mutex("turns")
	// a keeps a cohort that is dropped at its Unlock; b's Lock makes another.
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for turn, pair := range [][2]*Mutex{{b, a}, {a, b}, {b, a}} {
		holder, other := pair[0], pair[1]
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := other.TryLock(ctx, 0, 0); ok || err != nil {
			t.Fatalf("turn %d: the other handle acquired a held lock: %v, %v", turn, ok, err)
		}
		if err := other.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("turn %d: the other handle's Unlock = %v, want ErrNotHeld", turn, err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		left := len(c.cohorts)
		c.mu.Unlock()
		if left != 0 {
			t.Fatalf("turn %d: %d cohorts left with nothing held or waiting", turn, left)
		}
	}
}

func TestCohortsShareTheLockBetweenClients(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	clients := []*Client{newClient(t, srv), newClient(t, srv)}
	ctx := ctxTimeout(t, 20*time.Second)
	deadline := time.Now().Add(time.Second)
	var inside, overlaps atomic.Int32
	counts := make([]atomic.Int32, len(clients))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := clients[i%2].Mutex("cohorts")
			for time.Now().Before(deadline) {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				rdb.Incr(ctx, "cohorts-counter")
				inside.Add(-1)
				counts[i%2].Add(1)
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	a, b := counts[0].Load(), counts[1].Load()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping critical sections", overlaps.Load())
	}
	if n, _ := rdb.Get(ctx, "cohorts-counter").Int(); n != int(a+b) {
		t.Fatalf("counter %d, acquisitions %d", n, a+b)
	}
	t.Logf("acquisitions per client: %d and %d", a, b)
	// Bounded passing: neither process is starved.
	if a < (a+b)/10 || b < (a+b)/10 {
		t.Fatalf("acquisitions per client %d and %d: one was starved", a, b)
	}
}

func TestWaitReplicas(t *testing.T) {
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	ctx := ctxTimeout(t, 10*time.Second)

	t.Run("no replica: acquisition fails and is released", func(t *testing.T) {
		c := newClient(t, primary, WithWaitReplicas(1, 50*time.Millisecond))
		for name, l := range map[string]Locker{
			"mutex":  c.Mutex("unreplicated"),
			"fair":   c.FairMutex("unreplicated-fair"),
			"fenced": c.FencedMutex("unreplicated-fenced"),
			"write":  c.RWMutex("unreplicated-rw").WriteLocker(),
		} {
			ok, err := l.TryLock(ctx, 0, 0)
			if ok || !errors.Is(err, ErrNotReplicated) {
				t.Errorf("%s: TryLock = %v, %v; want false, ErrNotReplicated", name, ok, err)
			}
		}
		for _, key := range primary.Client(t).Keys(ctx, "*{unreplicated*").Val() {
			// Fencing counters only grow, and release latches outlive their
			// release, by design.
			if !strings.HasPrefix(key, "~token:") && !strings.HasPrefix(key, "~released:") {
				t.Errorf("unconfirmed lock left in Redis: %s", key)
			}
		}
	})

	t.Run("one replica confirms", func(t *testing.T) {
		replica := redistest.Start(t, "--replicaof", "127.0.0.1", portOf(primary.Addr))
		rrdb := replica.Client(t)
		waitFor(t, func() bool { return rrdb.Info(ctx, "replication").Val() != "" && replicaLinked(ctx, rrdb) })
		c := newClient(t, primary, WithWaitReplicas(1, time.Second))
		m := c.Mutex("replicated")
		if ok, err := m.TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("TryLock = %v, %v", ok, err)
		}
		if n := rrdb.Exists(ctx, m.Key()).Val(); n != 1 {
			t.Fatal("the replica does not have the lock after WAIT confirmed it")
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

func replicaLinked(ctx context.Context, rdb *redis.Client) bool {
	info, _ := rdb.InfoMap(ctx, "replication").Result()
	return info["Replication"]["master_link_status"] == "up"
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

func TestLockKeysShareHashTag(t *testing.T) {
	for _, tc := range []struct{ name, key, channel string }{
		{"sku-1", "{sku-1}", "{sku-1}:channel"},
		{"lockstep:watchdog:{sku-1}:lock", "lockstep:watchdog:{sku-1}:lock", "lockstep:watchdog:{sku-1}:lock:channel"},
		{"empty:{}:tag", "{empty:{}:tag}", "{empty:{}:tag}:channel"},
		// '~' begins the library's own keys (ownKey): a lock's key never does.
		{"~order{7}", "~~order{7}", "~~order{7}:channel"},
		{"~order-7", "{~order-7}", "{~order-7}:channel"},
	} {
		key, channel := lockKeys(tc.name)
		if key != tc.key || channel != tc.channel {
			t.Errorf("lockKeys(%q) = %q, %q; want %q, %q", tc.name, key, channel, tc.key, tc.channel)
		}
	}
}
