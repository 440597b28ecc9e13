package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
)

// tokenLocker adapts a TokenLock to Locker for the MultiLock and RedLock
// tests: it polls every millisecond while it may wait, and ignores lease
// (the TokenLock's TTL is fixed).
type tokenLocker struct{ *lock.TokenLock }

func newTokenLocker(rdb redis.Cmdable, key string) tokenLocker {
	return tokenLocker{lock.NewTokenLock(rdb, key, 10*time.Second)}
}

func (l tokenLocker) Lock(ctx context.Context) error {
	for {
		ok, err := l.TryLock(ctx, time.Second, 0)
		if ok || err != nil {
			return err
		}
	}
}

func (l tokenLocker) TryLock(ctx context.Context, wait, _ time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	for {
		err := l.TokenLock.TryLock(ctx)
		if !errors.Is(err, lock.ErrLockBusy) {
			return err == nil, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// slowLocker delays every acquisition, like a distant or loaded master.
type slowLocker struct {
	lock.Locker
	delay time.Duration
}

func (l slowLocker) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	time.Sleep(l.delay)
	return l.Locker.TryLock(ctx, wait, lease)
}

// lockerKinds are the Lockers MultiLock and RedLock are tested over. Every
// call of new is a new owner; it also returns the lock's Redis key.
var lockerKinds = []struct {
	name string
	new  func(t *testing.T, rdb *redis.Client, name string) (lock.Locker, string)
}{
	{"TokenLock", func(_ *testing.T, rdb *redis.Client, name string) (lock.Locker, string) {
		return newTokenLocker(rdb, name), name
	}},
	{"Mutex", func(t *testing.T, rdb *redis.Client, name string) (lock.Locker, string) {
		c := lock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		m := c.Mutex(name)
		return m, m.Key()
	}},
}

// newLocks returns one lock per name, of one kind, and their Redis keys.
func newLocks(t *testing.T, rdb *redis.Client, newLock func(*testing.T, *redis.Client, string) (lock.Locker, string), names ...string) ([]lock.Locker, []string) {
	locks, keys := make([]lock.Locker, len(names)), make([]string, len(names))
	for i, name := range names {
		locks[i], keys[i] = newLock(t, rdb, name)
	}
	return locks, keys
}

// mustTryLock takes l at once or fails the test.
func mustTryLock(t *testing.T, l lock.Locker) {
	t.Helper()
	if ok, err := l.TryLock(context.Background(), 0, 0); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want true, nil", ok, err)
	}
}

// assertKeys fails the test unless each key exists exactly when want says.
func assertKeys(t *testing.T, rdb *redis.Client, want bool, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if got := rdb.Exists(context.Background(), key).Val() == 1; got != want {
			t.Errorf("%s on %s exists = %v, want %v", key, rdb.Options().Addr, got, want)
		}
	}
}

func TestMultiLockAllOrNothing(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind.name, func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			ctx := context.Background()
			locks, keys := newLocks(t, rdb, kind.new, "a", "b", "c")
			multi := lock.NewMultiLock(locks...)
			other, _ := kind.new(t, rdb, "c")
			mustTryLock(t, other)
			for _, wait := range []time.Duration{0, 50 * time.Millisecond} {
				if ok, err := multi.TryLock(ctx, wait, 0); ok || err != nil {
					t.Fatalf("TryLock(wait %v) while c is held elsewhere = %v, %v; want false, nil", wait, ok, err)
				}
				assertKeys(t, rdb, false, keys[:2]...)
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatalf("other Unlock c: %v", err)
			}
			mustTryLock(t, multi)
			assertKeys(t, rdb, true, keys...)
			if err := multi.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			assertKeys(t, rdb, false, keys...)
			if err := multi.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
			}
		})
	}
}

func TestMultiLockWaitsForBusyLock(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind.name, func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			ctx := context.Background()
			other, _ := kind.new(t, rdb, "b")
			mustTryLock(t, other)
			released := make(chan error, 1)
			time.AfterFunc(50*time.Millisecond, func() { released <- other.Unlock(ctx) })

			locks, keys := newLocks(t, rdb, kind.new, "a", "b")
			multi := lock.NewMultiLock(locks...)
			if ok, err := multi.TryLock(ctx, 5*time.Second, 0); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v; want it to get b once released", ok, err)
			}
			if err := <-released; err != nil {
				t.Fatalf("other Unlock b: %v", err)
			}
			assertKeys(t, rdb, true, keys...)
			if err := multi.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

func TestMultiLockLockEndsWithContext(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind.name, func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			other, _ := kind.new(t, rdb, "c")
			mustTryLock(t, other)
			locks, keys := newLocks(t, rdb, kind.new, "a", "b", "c")
			multi := lock.NewMultiLock(locks...)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := multi.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock = %v, want DeadlineExceeded", err)
			}
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Fatalf("Lock returned %v after its context ended", elapsed-100*time.Millisecond)
			}
			assertKeys(t, rdb, false, keys[:2]...)
		})
	}
}

func TestMultiLockUnlockReportsLostLock(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind.name, func(t *testing.T) {
			rdb := redistest.Start(t).Client(t)
			ctx := context.Background()
			locks, keys := newLocks(t, rdb, kind.new, "a", "b", "c")
			multi := lock.NewMultiLock(locks...)
			mustTryLock(t, multi)
			rdb.Del(ctx, keys[1]) // b is lost, as if it had expired
			if err := multi.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Unlock = %v, want an error wrapping ErrNotHeld for b", err)
			}
			assertKeys(t, rdb, false, keys...)
		})
	}
}

func TestCompositeLocksNeedLocks(t *testing.T) {
	for name, l := range map[string]lock.Locker{"MultiLock": lock.NewMultiLock(), "RedLock": lock.NewRedLock()} {
		if ok, err := l.TryLock(context.Background(), 0, 0); ok || err == nil {
			t.Errorf("%s with no locks: TryLock = %v, %v; want an error", name, ok, err)
		}
	}
}
