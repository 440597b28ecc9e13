package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Issue 32, finding 4: a lock's name never reaches the keys the library
// keeps beside another lock (its waiter queue, deadlines, waiting writers,
// read levels, release latch, fencing counter): while each of them exists,
// a Mutex named as it would have been takes a lock of its own.
func TestLockNamesDoNotReachTheLibrarysKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	// A client that re-sends requests, so that releases leave a latch.
	retrying := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = retrying.Close() })
	holders := New(retrying)
	t.Cleanup(func() { _ = holders.Close() })
	waiters := newClient(t, srv)

	// A Mutex and a FairMutex held with a waiter queued, a write lock held
	// with a writer waiting and a read lock held (its level key), a
	// released Mutex (its latch) and a FencedMutex held (its counter).
	mutex := holders.Mutex("{order-7}")
	fair := holders.FairMutex("{order-8}")
	rw := holders.RWMutex("{order-9}")
	reader := holders.RWMutex("{order-10}").ReadLocker()
	fenced := holders.FencedMutex("{order-12}")
	for _, l := range []Locker{mutex, fair, rw.WriteLocker(), reader, fenced} {
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	released := holders.Mutex("{order-11}")
	if err := released.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := released.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 3)
	for _, l := range []Locker{waiters.Mutex("{order-7}"), waiters.FairMutex("{order-8}"), waiters.RWMutex("{order-9}").WriteLocker()} {
		go func() { waiting <- l.Lock(ctx) }()
	}
	for _, key := range []string{ownKey("queue", "{order-7}"), ownKey("queue", "{order-8}"), ownKey("deadlines", "{order-8}"),
		ownKey("writers", "{order-9}"), latchKey("{order-11}"), ownKey("token", "{order-12}")} {
		waitFor(t, func() bool { return rdb.Exists(ctx, key).Val() == 1 })
	}
	levels := rdb.Keys(ctx, ownKey("rwlock_timeout", "{order-10}")+":*").Val()
	if len(levels) != 1 {
		t.Fatalf("read level keys %v, want one", levels)
	}

	// Each name the library's keys had before (key+":queue" and so on),
	// and each of its keys' names now.
	names := []string{"{order-7}:queue", "{order-8}:queue", "{order-8}:deadlines", "{order-9}:writers",
		"{order-11}:released", "{order-12}:token", levels[0]}
	for _, key := range []string{ownKey("queue", "{order-7}"), ownKey("queue", "{order-8}"), ownKey("deadlines", "{order-8}"),
		ownKey("writers", "{order-9}"), latchKey("{order-11}"), ownKey("token", "{order-12}"), levels[0]} {
		names = append(names, key)
	}
	other := newClient(t, srv)
	for _, name := range names {
		m := other.Mutex(name)
		if ok, err := m.TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("Mutex(%q).TryLock = %v, %v; want its own lock (key %s)", name, ok, err, m.Key())
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Mutex(%q).Unlock: %v", name, err)
		}
	}

	// The locks beside them are untouched: their waiters get them.
	for _, l := range []Locker{mutex, fair, rw.WriteLocker(), fenced} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 32, finding 6: an acquisition that reaches Redis after its hold
// was released must take nothing, or the lock stays held for a lease by
// nobody: a first run delayed behind go-redis's re-send of it, which took
// the lock for the owner, who released it since; or an attempt whose reply
// was lost and which its caller gave up on (releasing by its token) before
// it arrived. The hook keeps a copy of the first attempt, lets it run or
// loses it, and the test delivers the copy once the owner is done. A
// client that never re-sends keeps no latch, and is not covered.
func TestALateFirstAcquisitionTakesNothing(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reply lost %t", kind.name, lost), func(t *testing.T) {
				ctx := ctxTimeout(t, 20*time.Second)
				var late atomic.Pointer[[]any]
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
				t.Cleanup(func() { _ = rdb.Close() })
				loadScripts(t, rdb)
				rdb.AddHook(scriptHook{sha: kind.acquire.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
					args := cmd.Args()
					if late.CompareAndSwap(nil, &args) && lost {
						return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded} // sent, no reply
					}
					return next(ctx, cmd)
				}})
				c := New(rdb)
				t.Cleanup(func() { _ = c.Close() })
				name := fmt.Sprintf("late-first-%s-%t", kind.name, lost)
				l := kind.handle(c, name)
				ok, err := l.TryLock(ctx, 0, 0)
				if lost && (ok || err == nil) {
					t.Fatalf("TryLock = %v, %v; want the lost reply's error", ok, err)
				}
				if !lost {
					if !ok || err != nil {
						t.Fatalf("TryLock = %v, %v", ok, err)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				delivered := srv.Client(t).Do(ctx, *late.Load()...)
				if res, err := delivered.Result(); err != nil && !errors.Is(err, redis.Nil) || acquiredReply(res, err) {
					t.Fatalf("the late first run answered %v, %v", res, err)
				}
				assertRivalTakes(t, srv, kind, name, "the late first run")
			})
		}
	}
}
