package lock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestWaitQueueWakesAsManyAsThePermitsServe: a message wakes, first come
// first, the waiters the free permits serve; a waiter that leaves with a
// wake it did not use passes it on; "u" wakes all.
func TestWaitQueueWakesAsManyAsThePermitsServe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		needs []int
		// payload is delivered, then the waiter leaving (-1: none) leaves.
		payload string
		leaving int
		woken   []int // the waiters with a wake after all
	}{
		{"one permit wakes the first waiter", []int{1, 1, 1}, "u1", -1, []int{0}},
		{"two permits wake two", []int{1, 1, 1}, "u2", -1, []int{0, 1}},
		{"no permit wakes nobody", []int{1, 1}, "u0", -1, nil},
		{"a waiter needing more is passed over", []int{3, 1, 1}, "u2", -1, []int{1, 2}},
		{"a subscription confirmed again wakes all", []int{3, 1, 1}, "u", -1, []int{0, 1, 2}},
		{"an unused wake goes to the next", []int{1, 1, 1}, "u1", 0, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
			defer rdb.Close()
			c := New(rdb)
			defer c.Close()
			var ws []*queuedWaiter
			for _, need := range tc.needs {
				qw, _ := c.waiters.join("ch", need)
				ws = append(ws, qw)
			}
			c.waiters.mu.Lock()
			q := c.waiters.queues["ch"]
			c.waiters.mu.Unlock()
			q.listener.deliver(tc.payload)
			if tc.leaving >= 0 {
				c.waiters.leave("ch", ws[tc.leaving])
			}
			var woken []int
			for i, qw := range ws {
				if i != tc.leaving && len(qw.notify) == 1 {
					woken = append(woken, i)
				}
			}
			if !slices.Equal(woken, tc.woken) {
				t.Fatalf("woken %v, want %v", woken, tc.woken)
			}
		})
	}
}

// TestWaitQueueOfferSkipsWhoSawTooFew: a waiter whose try found one permit
// of the two it needs offers it to the waiters behind it.
func TestWaitQueueOfferSkipsWhoSawTooFew(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := New(rdb)
	defer c.Close()
	big, _ := c.waiters.join("ch", 2)
	small, _ := c.waiters.join("ch", 1)
	c.waiters.offer("ch", 1)
	if len(big.notify) != 0 || len(small.notify) != 1 {
		t.Fatalf("woken: needing 2 %v, needing 1 %v; want only the one needing 1", len(big.notify) == 1, len(small.notify) == 1)
	}
	c.waiters.leave("ch", big)
	c.waiters.leave("ch", small)
	if n := len(c.waiters.queues); n != 0 {
		t.Fatalf("%d queues left after every waiter left", n)
	}
}

// A woken waiter that finds fewer permits than it needs, but some, offers
// them to the waiters behind it: the message said two were free (the one
// needing two was woken, not the one needing one), another Client took one
// before the woken waiter's try.
func TestAWakeThatFindsTooFewPassesThemOn(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	s := newSemaphore(t, srv, "offer", 0)
	c := s.k.c
	queued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			c.waiters.mu.Lock()
			q := c.waiters.queues[s.k.channel]
			got := q != nil && len(q.waiters) == n
			c.waiters.mu.Unlock()
			if got {
				return
			}
		}
		t.Fatalf("never %d waiters queued", n)
	}
	bigCtx, stopBig := context.WithCancel(ctx)
	defer stopBig()
	go func() { _, _ = s.TryAcquire(bigCtx, 2, -1) }()
	queued(1)
	small := make(chan error, 1)
	go func() {
		ok, err := s.TryAcquire(ctx, 1, 10*time.Second)
		if err == nil && !ok {
			err = errors.New("not taken within its wait")
		}
		small <- err
	}()
	queued(2)
	time.Sleep(100 * time.Millisecond) // both listen
	// Two given back and said free, one of them taken at once by another.
	const giveTwoTakeOne = "redis.call('incrby', KEYS[1], 2) redis.call('publish', ARGV[1], 'u2') redis.call('decrby', KEYS[1], 1)"
	if err := rdb.Eval(ctx, giveTwoTakeOne, []string{s.k.key}, s.k.channel).Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	select {
	case err := <-small:
		if err != nil {
			t.Fatalf("the waiter needing one, with one free: %v", err)
		}
	case <-time.After(2 * time.Second): // its wait's last try would come at 10 s
		t.Fatal("the waiter needing one slept while one permit was free")
	}
}
