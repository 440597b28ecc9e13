package lock

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Ports of RedissonSemaphoreTest's cases, then the unknown outcomes of the
// counters' scripts (doc.go, "Semaphores").

func newSemaphore(t *testing.T, srv *redistest.Server, name string, permits int) *Semaphore {
	t.Helper()
	s := newClient(t, srv).Semaphore(name)
	if permits >= 0 {
		if ok, err := s.TrySetPermits(ctxTimeout(t, 5*time.Second), permits); !ok || err != nil {
			t.Fatalf("TrySetPermits(%d) = %v, %v", permits, ok, err)
		}
	}
	return s
}

func assertPermits(t *testing.T, s *Semaphore, want int) {
	t.Helper()
	if got, err := s.AvailablePermits(ctxTimeout(t, 5*time.Second)); got != want || err != nil {
		t.Fatalf("AvailablePermits = %d, %v; want %d", got, err, want)
	}
}

func TestSemaphoreRedissonCases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	t.Run("zero", func(t *testing.T) { // testZero
		s := newSemaphore(t, srv, "zero", 0)
		if ok, err := s.TryAcquire(ctx, 1, 100*time.Millisecond); ok || err != nil {
			t.Fatalf("TryAcquire on 0 permits = %v, %v", ok, err)
		}
	})
	t.Run("acquire-without-set", func(t *testing.T) { // testAcquireWithoutSetPermits
		s := newSemaphore(t, srv, "without-set", -1)
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.TryAcquire(ctx, 1, 0); !ok || err != nil {
			t.Fatalf("TryAcquire after Release = %v, %v", ok, err)
		}
		assertPermits(t, s, 0)
	})
	t.Run("try-set", func(t *testing.T) { // testTrySetPermits
		s := newSemaphore(t, srv, "try-set", 10)
		if ok, err := s.TrySetPermits(ctx, 15); ok || err != nil {
			t.Fatalf("second TrySetPermits = %v, %v; want false", ok, err)
		}
		assertPermits(t, s, 10)
	})
	t.Run("sold-out-exists", func(t *testing.T) { // the course's pitfall
		s := newSemaphore(t, srv, "sold-out", 1)
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
			t.Fatalf("TrySetPermits on a sold-out semaphore = %v, %v; want false", ok, err)
		}
	})
	t.Run("add", func(t *testing.T) { // testAddPermits
		s := newSemaphore(t, srv, "add", 10)
		if err := s.AddPermits(ctx, 5); err != nil {
			t.Fatal(err)
		}
		assertPermits(t, s, 15)
		if err := s.AddPermits(ctx, -17); err != nil {
			t.Fatal(err)
		}
		assertPermits(t, s, -2)
	})
	t.Run("drain", func(t *testing.T) { // testDrainPermits
		s := newSemaphore(t, srv, "drain", 10)
		if ok, err := s.TryAcquire(ctx, 3, 0); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n, err := s.Drain(ctx); n != 7 || err != nil {
			t.Fatalf("Drain = %d, %v; want 7", n, err)
		}
		assertPermits(t, s, 0)
		if n, err := newSemaphore(t, srv, "drain-none", -1).Drain(ctx); n != 0 || err != nil {
			t.Fatalf("Drain of nothing = %d, %v", n, err)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		s := newSemaphore(t, srv, "invalid", 1)
		if _, err := s.TryAcquire(ctx, 0, 0); err != ErrInvalidPermits {
			t.Fatalf("TryAcquire(0) = %v", err)
		}
		if err := s.Release(ctx, -1); err != ErrInvalidPermits {
			t.Fatalf("Release(-1) = %v", err)
		}
	})
	t.Run("blocking-n", func(t *testing.T) { // testBlockingNAcquire
		s := newSemaphore(t, srv, "blocking-n", 1)
		done := make(chan error, 1)
		go func() { done <- newClient(t, srv).Semaphore("blocking-n").Acquire(ctx, 3) }()
		time.Sleep(200 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Acquire(3) of 1 permit returned %v", err)
		default:
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not wake for the released permits")
		}
		assertPermits(t, s, 0)
	})
	t.Run("try-acquire-wait", func(t *testing.T) { // testTryAcquire
		s := newSemaphore(t, srv, "try-wait", 0)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_ = s.Release(ctx, 1)
		}()
		start := time.Now()
		if ok, err := newClient(t, srv).Semaphore("try-wait").TryAcquire(ctx, 1, 10*time.Second); !ok || err != nil {
			t.Fatalf("TryAcquire = %v, %v", ok, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("woken after %v", d)
		}
	})
	t.Run("cancelled-wait-takes-nothing", func(t *testing.T) {
		s := newSemaphore(t, srv, "cancelled", 0)
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := s.Acquire(wctx, 1); err == nil {
			t.Fatal("Acquire returned nil with no permits")
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		assertPermits(t, s, 1)
	})
	t.Run("concurrency", func(t *testing.T) { // testConcurrency_MultiInstance
		const permits, workers, rounds = 3, 12, 20
		newSemaphore(t, srv, "concurrency", permits)
		var held, most atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			s := newClient(t, srv).Semaphore("concurrency")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if err := s.Acquire(ctx, 1); err != nil {
						errs <- err
						return
					}
					h := held.Add(1)
					for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					held.Add(-1)
					if err := s.Release(ctx, 1); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if m := most.Load(); m > permits {
			t.Fatalf("%d permits held at once of %d", m, permits)
		}
		assertPermits(t, newClient(t, srv).Semaphore("concurrency"), permits)
	})
}

// loadCounterScripts loads the counters' scripts (attempts.lua and a
// body: files loadScripts does not load whole), so that each run is an
// EVALSHA a replyDropper can tell.
func loadCounterScripts(t *testing.T, rdb redis.Cmdable) {
	t.Helper()
	for _, s := range []*redis.Script{counterSetScript, semAcquireScript, semAddScript, semCancelScript, semDrainScript, countDownScript,
		expAcquireScript, expReleaseScript, expLeaseScript} {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// droppingCounterClient is a Client on a default go-redis client whose
// chosen replies d drops (outcome_test.go).
func droppingCounterClient(t *testing.T, srv *redistest.Server) (*Client, *replyDropper) {
	t.Helper()
	d := &replyDropper{}
	c := defaultClient(t, srv, d)
	loadCounterScripts(t, srv.Client(t))
	return c, d
}

// A request whose reply is lost and that go-redis sends again changes the
// counter once, and answers what its first run did.
func TestRetriedCounterCallsCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	cases := []struct {
		name    string
		script  *redis.Script
		set     int // permits (or count) before; -1: none
		call    func(name string) (any, error)
		want    any
		permits int // the counter after
	}{
		{"acquire", semAcquireScript, 2, func(n string) (any, error) { return c.Semaphore(n).TryAcquire(ctx, 1, 0) }, true, 1},
		{"release", semAddScript, 0, func(n string) (any, error) { return nil, c.Semaphore(n).Release(ctx, 1) }, nil, 1},
		{"add", semAddScript, 0, func(n string) (any, error) { return nil, c.Semaphore(n).AddPermits(ctx, 4) }, nil, 4},
		{"drain", semDrainScript, 3, func(n string) (any, error) { return c.Semaphore(n).Drain(ctx) }, 3, 0},
		{"try-set", counterSetScript, -1, func(n string) (any, error) { return c.Semaphore(n).TrySetPermits(ctx, 5) }, true, 5},
		{"count-down", countDownScript, 2, func(n string) (any, error) { return nil, c.CountDownLatch(n).CountDown(ctx) }, nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "retried-" + tc.name
			s := c.Semaphore(name)
			if tc.set >= 0 {
				if ok, err := s.TrySetPermits(ctx, tc.set); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			before := d.dropped.Load()
			d.arm(tc.script, 1)
			got, err := tc.call(name)
			if err != nil || got != tc.want {
				t.Fatalf("its reply lost and the request re-sent: %v, %v; want %v", got, err, tc.want)
			}
			if d.dropped.Load() != before+1 {
				t.Fatal("no reply was dropped")
			}
			assertPermits(t, s, tc.permits)
		})
	}
}

// An acquisition whose every reply is lost fails, and the permits it took
// go back before TryAcquire returns.
func TestLostAcquisitionGivesItsPermitsBack(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c, d := droppingCounterClient(t, srv)
	s := c.Semaphore("lost")
	if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	d.arm(semAcquireScript, 1+defaultRedisRetries)
	if ok, err := s.TryAcquire(ctx, 2, 0); ok || err == nil {
		t.Fatalf("TryAcquire, every reply lost = %v, %v; want an error", ok, err)
	}
	assertPermits(t, s, 2)
}

// The cancel script gives an attempt's permits back once, and a first run
// of the attempt that arrives after it takes nothing.
func TestCancelledAttemptTakesNothingLate(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	s := newSemaphore(t, srv, "late", 3)
	k := &s.k
	taken := k.c.newToken()
	if res, err := k.run(ctx, semAcquireScript, taken, 2).Result(); res != acquiredOK || err != nil {
		t.Fatalf("acquire = %v, %v", res, err)
	}
	for range 2 { // a cancel run twice gives back once
		if err := k.run(ctx, semCancelScript, taken, 2).Err(); err != nil {
			t.Fatal(err)
		}
	}
	assertPermits(t, s, 3)
	late := k.c.newToken()
	if err := k.run(ctx, semCancelScript, late, 2).Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{late, taken} {
		if res, err := k.run(ctx, semAcquireScript, id, 2).Result(); res != attemptCancelled || err != nil {
			t.Fatalf("a cancelled attempt's late run = %v, %v; want %q", res, err, attemptCancelled)
		}
	}
	assertPermits(t, s, 3)
}

// The attempts' record keeps a reply for its window, and drops it after,
// also while the semaphore stays in use (its keys never expire whole).
func TestAttemptRecordEnds(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	s := newSemaphore(t, srv, "record", -1)
	s.k.window = "300"
	s.k.c.quickReply = 0 // no reply is acknowledged: only the ends drop them
	for range 3 {
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.HLen(ctx, s.k.keys[1]).Val(); n != 3 {
		t.Fatalf("%d replies recorded, want 3", n)
	}
	// As if later calls had kept the keys alive: only the ends drop replies.
	rdb.Persist(ctx, s.k.keys[1])
	rdb.Persist(ctx, s.k.keys[2])
	time.Sleep(400 * time.Millisecond)
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n, m := rdb.HLen(ctx, s.k.keys[1]).Val(), rdb.ZCard(ctx, s.k.keys[2]).Val(); n != 1 || m != 1 {
		t.Fatalf("%d replies, %d ends after the first three ended; want the last one", n, m)
	}
}

// Quick replies are acknowledged by the Client's next call on the
// counter, which drops their records: a hundred releases leave one record
// (the last's), where they left a hundred for the window. A slow reply is
// not acknowledged, and its request run again after later calls still
// answers as its first run and adds nothing (as go-redis's re-send or a
// late first run would).
func TestAcknowledgedAttemptsLeaveTheRecord(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	s := newSemaphore(t, srv, "acks", 0)
	records := func() (int64, int64) {
		return rdb.HLen(ctx, s.k.keys[1]).Val(), rdb.ZCard(ctx, s.k.keys[2]).Val()
	}
	slow := s.k.c.newToken()
	if err := s.k.run(ctx, semAddScript, slow, 1).Err(); err != nil {
		t.Fatal(err)
	}
	s.k.ack(slow, false)
	for range 100 {
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := records(); n != 2 || m != 2 {
		t.Fatalf("%d replies, %d ends after 100 quick releases and a slow one; want the slow one's and the last's", n, m)
	}
	if res, err := s.k.run(ctx, semAddScript, slow, 1).Result(); res != acquiredOK || err != nil {
		t.Fatalf("the slow release run again = %v, %v", res, err)
	}
	assertPermits(t, s, 101)
}

// A counter's error names it once, on one line (as TestErrorsNameTheLockOnce).
func TestCounterErrorsNameItOnce(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxTimeout(t, 5*time.Second)
	const name = "errtext-stock"
	s, e, l := c.Semaphore(name), c.PermitExpirableSemaphore(name), c.CountDownLatch(name)
	for _, tc := range []struct {
		call string
		err  error
	}{
		{"TryAcquire", func() error { _, err := s.TryAcquire(ctx, 1, 0); return err }()},
		{"Release", s.Release(ctx, 1)},
		{"Drain", func() error { _, err := s.Drain(ctx); return err }()},
		{"expirable TryAcquire", func() error { _, _, err := e.TryAcquire(ctx, 0, time.Second); return err }()},
		{"expirable Release", e.Release(ctx, "p")},
		{"CountDown", l.CountDown(ctx)},
		{"Await", l.Await(ctx)},
	} {
		if tc.err == nil {
			t.Fatalf("%s against no Redis succeeded", tc.call)
		}
		if n := strings.Count(tc.err.Error(), name); n != 1 || strings.Contains(tc.err.Error(), "\n") {
			t.Errorf("%s: %q names the semaphore %d times or spans lines", tc.call, tc.err, n)
		}
	}
}
