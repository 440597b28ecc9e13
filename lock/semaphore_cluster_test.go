package lock_test

import (
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSemaphoresOnACluster runs the semaphores and the latch on a real
// Redis Cluster with names on different shards: every script's keys share
// the name's hash tag (a CROSSSLOT error fails it), and a waiter is woken
// by its shard's SPUBLISH on the Client's sharded subscription.
func TestSemaphoresOnACluster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t).Client(t)
	names := namesOnDistinctShards(t, rdb, 3)
	for i, tc := range []struct {
		name string
		run  func(t *testing.T, rdb redis.UniversalClient, name string)
	}{
		{"semaphore wakes a waiter", semaphoreWakesWaiter},
		{"expirable permit comes back", expirablePermitComesBack},
		{"latch wakes its waiter", latchWakesWaiter},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, rdb, names[i]) })
	}
}

// waitsUntil fails t unless done reports within d, and not before
// notBefore has passed.
func waitsUntil(t *testing.T, done <-chan error, notBefore, d time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < notBefore {
			t.Fatalf("returned after %v, before what it waits for", time.Since(start))
		}
	case <-time.After(d):
		t.Fatalf("still waiting after %v", d)
	}
}

func semaphoreWakesWaiter(t *testing.T, rdb redis.UniversalClient, name string) {
	ctx := within(t, 20*time.Second)
	s := newLockClient(t, rdb).Semaphore(name)
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- newLockClient(t, rdb).Semaphore(name).Acquire(ctx, 1) }()
	time.Sleep(200 * time.Millisecond)
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitsUntil(t, done, 0, 5*time.Second)
	if n, err := s.Drain(ctx); n != 0 || err != nil {
		t.Fatalf("Drain = %d, %v; want 0 (the waiter holds the permit)", n, err)
	}
}

func expirablePermitComesBack(t *testing.T, rdb redis.UniversalClient, name string) {
	ctx := within(t, 20*time.Second)
	s := newLockClient(t, rdb).PermitExpirableSemaphore(name)
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.Acquire(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		id, err := newLockClient(t, rdb).PermitExpirableSemaphore(name).Acquire(ctx, time.Minute)
		if err == nil {
			err = s.Release(ctx, id)
		}
		done <- err
	}()
	waitsUntil(t, done, 200*time.Millisecond, 5*time.Second)
}

func latchWakesWaiter(t *testing.T, rdb redis.UniversalClient, name string) {
	ctx := within(t, 20*time.Second)
	l := newLockClient(t, rdb).CountDownLatch(name)
	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- newLockClient(t, rdb).CountDownLatch(name).Await(ctx) }()
	for range 2 {
		time.Sleep(100 * time.Millisecond)
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitsUntil(t, done, 0, 5*time.Second)
}
