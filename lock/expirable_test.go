package lock

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// Ports of RedissonPermitExpirableSemaphoreTest's cases, then its scripts'
// unknown outcomes.

func newExpirable(t *testing.T, c *Client, name string, permits int) *PermitExpirableSemaphore {
	t.Helper()
	s := c.PermitExpirableSemaphore(name)
	if ok, err := s.TrySetPermits(ctxTimeout(t, 5*time.Second), permits); !ok || err != nil {
		t.Fatalf("TrySetPermits(%d) = %v, %v", permits, ok, err)
	}
	return s
}

func assertExpirablePermits(t *testing.T, s *PermitExpirableSemaphore, want int) {
	t.Helper()
	if got, err := s.AvailablePermits(ctxTimeout(t, 5*time.Second)); got != want || err != nil {
		t.Fatalf("AvailablePermits = %d, %v; want %d", got, err, want)
	}
}

func TestPermitExpirableSemaphoreRedissonCases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newClient(t, srv)
	t.Run("available", func(t *testing.T) { // testAvailablePermits
		s := newExpirable(t, c, "available", 2)
		id, err := s.Acquire(ctx, time.Minute)
		if err != nil || id == "" {
			t.Fatalf("Acquire = %q, %v", id, err)
		}
		assertExpirablePermits(t, s, 1)
		if err := s.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		assertExpirablePermits(t, s, 2)
		if err := s.Release(ctx, id); !errors.Is(err, ErrPermitNotHeld) { // testReleaseExpired
			t.Fatalf("second Release = %v; want ErrPermitNotHeld", err)
		}
	})
	t.Run("release-unknown", func(t *testing.T) { // testReleaseWithoutPermits
		s := newExpirable(t, c, "unknown", 1)
		if err := s.Release(ctx, "1234"); !errors.Is(err, ErrPermitNotHeld) {
			t.Fatalf("Release of an unknown id = %v", err)
		}
		assertExpirablePermits(t, s, 1)
	})
	t.Run("expire", func(t *testing.T) { // testExpire
		s := newExpirable(t, c, "expire", 1)
		id, err := s.Acquire(ctx, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.TryAcquire(ctx, 0, time.Minute); ok || err != nil {
			t.Fatalf("TryAcquire while leased = %v, %v", ok, err)
		}
		time.Sleep(300 * time.Millisecond)
		assertExpirablePermits(t, s, 1)
		if err := s.Release(ctx, id); !errors.Is(err, ErrPermitNotHeld) {
			t.Fatalf("Release after the lease = %v; want ErrPermitNotHeld", err)
		}
		assertExpirablePermits(t, s, 1)
	})
	t.Run("waiter-takes-expired", func(t *testing.T) { // testBlockingAcquire with a lease
		s := newExpirable(t, c, "waiter", 1)
		if _, err := s.Acquire(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, ok, err := newClient(t, srv).PermitExpirableSemaphore("waiter").TryAcquire(ctx, 10*time.Second, time.Minute)
		if !ok || err != nil {
			t.Fatalf("TryAcquire = %v, %v", ok, err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
			t.Fatalf("the waiter took the expired permit after %v; want its lease's end (300 ms)", d)
		}
	})
	t.Run("update-lease", func(t *testing.T) { // testUpdateLeaseTime
		s := newExpirable(t, c, "update", 1)
		id, err := s.Acquire(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s.UpdateLeaseTime(ctx, id, time.Minute); !ok || err != nil {
			t.Fatalf("UpdateLeaseTime = %v, %v", ok, err)
		}
		time.Sleep(400 * time.Millisecond)
		assertExpirablePermits(t, s, 0)
		if err := s.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.UpdateLeaseTime(ctx, id, time.Minute); ok || err != nil {
			t.Fatalf("UpdateLeaseTime of a released permit = %v, %v", ok, err)
		}
		assertExpirablePermits(t, s, 1)
	})
	t.Run("invalid-lease", func(t *testing.T) {
		s := newExpirable(t, c, "invalid", 1)
		if _, _, err := s.TryAcquire(ctx, 0, 0); !errors.Is(err, ErrInvalidLease) {
			t.Fatalf("TryAcquire with no lease = %v", err)
		}
	})
}

// A request whose reply is lost and that go-redis sends again takes, or
// gives back, one permit.
func TestRetriedExpirableCallsCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	s := newExpirable(t, c, "retried", 3)
	d.arm(expAcquireScript, 1)
	id, ok, err := s.TryAcquire(ctx, 0, time.Minute)
	if !ok || err != nil {
		t.Fatalf("TryAcquire, its reply lost and the request re-sent = %v, %v", ok, err)
	}
	assertExpirablePermits(t, s, 2)
	other, err := s.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d.arm(expReleaseScript, 1)
	if err := s.Release(ctx, id); err != nil {
		t.Fatalf("Release, its reply lost and the request re-sent = %v", err)
	}
	assertExpirablePermits(t, s, 2)
	if got := d.dropped.Load(); got != 2 {
		t.Fatalf("%d replies dropped, want 2", got)
	}
	if err := s.Release(ctx, other); err != nil {
		t.Fatal(err)
	}
	assertExpirablePermits(t, s, 3)
}

// An acquisition whose every reply is lost fails and its permit goes
// back; a first run arriving after that takes nothing.
func TestLostExpirableAcquisitionGivesItsPermitBack(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	s := newExpirable(t, c, "lost", 1)
	d.arm(expAcquireScript, 1+defaultRedisRetries)
	if _, ok, err := s.TryAcquire(ctx, 0, time.Minute); ok || err == nil {
		t.Fatalf("TryAcquire, every reply lost = %v, %v; want an error", ok, err)
	}
	assertExpirablePermits(t, s, 1)
	late := c.newToken()
	if err := s.k.run(ctx, expReleaseScript, late, 0, late, "cancel", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := s.k.run(ctx, expAcquireScript, late, int64(60000), 1).Result(); res != attemptCancelled || err != nil {
		t.Fatalf("a cancelled attempt's late run = %v, %v", res, err)
	}
	assertExpirablePermits(t, s, 1)
}

// TryAcquireN takes n permits at once or none (Redisson's
// tryAcquire(permits, waitTime, leaseTime)): each has its own id, each is
// released on its own, all come back at their lease's end; a waiter for n
// is woken when n are free; a lost acquisition of n gives all n back.
func TestExpirableAcquireNTakesAllOrNone(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	t.Run("all or none", func(t *testing.T) {
		s := newExpirable(t, c, "n-all", 3)
		if _, err := s.AcquireN(ctx, 0, time.Minute); !errors.Is(err, ErrInvalidPermits) {
			t.Fatalf("AcquireN(0) = %v, want ErrInvalidPermits", err)
		}
		ids, err := s.AcquireN(ctx, 2, time.Minute)
		if err != nil || len(ids) != 2 || ids[0] == ids[1] {
			t.Fatalf("AcquireN(2) = %v, %v; want two ids", ids, err)
		}
		if got, ok, err := s.TryAcquireN(ctx, 2, 0, time.Minute); ok || err != nil || got != nil {
			t.Fatalf("TryAcquireN(2) with one free = %v, %v, %v; want none taken", got, ok, err)
		}
		assertExpirablePermits(t, s, 1)
		for _, id := range ids {
			if err := s.Release(ctx, id); err != nil {
				t.Fatalf("Release(%s): %v", id, err)
			}
		}
		assertExpirablePermits(t, s, 3)
	})
	t.Run("the leases end", func(t *testing.T) {
		s := newExpirable(t, c, "n-lease", 2)
		if _, err := s.AcquireN(ctx, 2, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ids, ok, err := s.TryAcquireN(ctx, 2, 5*time.Second, time.Minute)
		if !ok || err != nil || len(ids) != 2 {
			t.Fatalf("TryAcquireN(2) waiting for the leases = %v, %v, %v", ids, ok, err)
		}
		if waited := time.Since(start); waited < 150*time.Millisecond {
			t.Fatalf("took the permits after %v, before their leases ended", waited)
		}
	})
	t.Run("a waiter for two is woken by two releases", func(t *testing.T) {
		s := newExpirable(t, c, "n-wake", 2)
		held, err := s.AcquireN(ctx, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { _, err := s.AcquireN(ctx, 2, time.Minute); got <- err }()
		time.Sleep(100 * time.Millisecond)
		for _, id := range held {
			if err := s.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter for two slept through both releases")
		}
	})
	t.Run("a lost acquisition of two gives both back", func(t *testing.T) {
		s := newExpirable(t, c, "n-lost", 2)
		d.arm(expAcquireScript, 1+defaultRedisRetries)
		if _, ok, err := s.TryAcquireN(ctx, 2, 0, time.Minute); ok || err == nil {
			t.Fatalf("TryAcquireN, every reply lost = %v, %v; want an error", ok, err)
		}
		assertExpirablePermits(t, s, 2)
	})
}

// Consume takes leased permits out for good in one step: the permits
// available never change, neither then nor at the leases' end; a permit
// whose lease ended is back and is not consumed; a request whose reply is
// lost and that go-redis sends again consumes once and answers as the
// first run.
func TestExpirableConsumeTakesLeasedPermitsOutForGood(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	for _, retried := range []bool{false, true} {
		s := newExpirable(t, c, fmt.Sprint("consume-", retried), 4)
		ids, ok, err := s.TryAcquireN(ctx, 2, 0, 300*time.Millisecond)
		if !ok || err != nil {
			t.Fatalf("TryAcquireN(2) = %v, %v", ok, err)
		}
		ended, err := s.Acquire(ctx, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // ended's lease ends
		if retried {
			d.arm(expConsumeScript, 1)
		}
		if n, err := s.Consume(ctx, append(ids, ended)...); n != 2 || err != nil {
			t.Fatalf("Consume of 2 leased permits and 1 whose lease ended (reply lost and re-sent: %v) = %d, %v; want 2", retried, n, err)
		}
		assertExpirablePermits(t, s, 2)
		time.Sleep(400 * time.Millisecond) // the consumed permits' leases would have ended
		assertExpirablePermits(t, s, 2)
		if n, err := s.Consume(ctx, ids...); n != 0 || err != nil {
			t.Fatalf("Consume again = %d, %v; want 0", n, err)
		}
		if err := s.Release(ctx, ids[0]); !errors.Is(err, ErrPermitNotHeld) {
			t.Fatalf("Release of a consumed permit = %v; want ErrPermitNotHeld", err)
		}
		assertExpirablePermits(t, s, 2)
	}
	if got := d.dropped.Load(); got != 1 {
		t.Fatalf("%d replies dropped, want 1", got)
	}
}
