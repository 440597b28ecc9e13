package lock

import (
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// Ports of RedissonCountDownLatchTest's cases.
func TestCountDownLatchRedissonCases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newClient(t, srv)
	t.Run("await-timeout", func(t *testing.T) { // testAwaitTimeout
		l := c.CountDownLatch("await-timeout")
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := l.TryAwait(ctx, 200*time.Millisecond); ok || err != nil {
			t.Fatalf("TryAwait at count 1 = %v, %v; want false", ok, err)
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			_ = newClient(t, srv).CountDownLatch("await-timeout").CountDown(ctx)
		}()
		start := time.Now()
		if ok, err := l.TryAwait(ctx, 10*time.Second); !ok || err != nil {
			t.Fatalf("TryAwait = %v, %v; want true", ok, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("woken after %v", d)
		}
	})
	t.Run("count-down", func(t *testing.T) { // testCountDown
		l := c.CountDownLatch("count-down")
		if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatal(ok, err)
		}
		for want := 1; want >= 0; want-- {
			if err := l.CountDown(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := l.Count(ctx); n != want || err != nil {
				t.Fatalf("Count = %d, %v; want %d", n, err, want)
			}
		}
		if err := l.CountDown(ctx); err != nil { // below zero stays zero
			t.Fatal(err)
		}
		if n, err := l.Count(ctx); n != 0 || err != nil {
			t.Fatalf("Count = %d, %v; want 0", n, err)
		}
		if err := l.Await(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("try-set", func(t *testing.T) { // testTrySetCount
		l := c.CountDownLatch("try-set")
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if ok, err := l.TrySetCount(ctx, 2); ok || err != nil {
			t.Fatalf("second TrySetCount = %v, %v; want false", ok, err)
		}
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetCount after zero = %v, %v; want true", ok, err)
		}
	})
	t.Run("await-many", func(t *testing.T) { // testCountDownLatch with several waiters
		l := c.CountDownLatch("await-many")
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		done := make(chan error, 4)
		for range 4 {
			go func() { done <- newClient(t, srv).CountDownLatch("await-many").Await(ctx) }()
		}
		time.Sleep(200 * time.Millisecond)
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	})
}
