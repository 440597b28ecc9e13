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

// simpleLock is what the three article locks have in common.
type simpleLock interface {
	TryLock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Key() string
}

var simpleLocks = []struct {
	name string
	new  func(rdb redis.Cmdable, key string) simpleLock
}{
	{"SetNXLock", func(rdb redis.Cmdable, key string) simpleLock { return lock.NewSetNXLock(rdb, key) }},
	{"ExpiringLock", func(rdb redis.Cmdable, key string) simpleLock { return lock.NewExpiringLock(rdb, key, 10*time.Second) }},
	{"TokenLock", func(rdb redis.Cmdable, key string) simpleLock { return lock.NewTokenLock(rdb, key, 10*time.Second) }},
}

func TestSimpleLocksFailFast(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	for _, tc := range simpleLocks {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.new(rdb, "simple:"+tc.name), tc.new(rdb, "simple:"+tc.name)
			if a.Key() != "simple:"+tc.name {
				t.Fatalf("Key() = %q", a.Key())
			}
			if err := a.TryLock(ctx); err != nil {
				t.Fatalf("A TryLock: %v", err)
			}
			if err := b.TryLock(ctx); !errors.Is(err, lock.ErrLockBusy) {
				t.Fatalf("B TryLock while A holds = %v, want ErrLockBusy", err)
			}
			if err := a.Unlock(ctx); err != nil {
				t.Fatalf("A Unlock: %v", err)
			}
			if err := a.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("A second Unlock = %v, want ErrNotHeld", err)
			}
			if err := b.TryLock(ctx); err != nil {
				t.Fatalf("B TryLock after A unlocked: %v", err)
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatalf("B Unlock: %v", err)
			}
		})
	}
}

func TestSimpleLocksWrapRedisErrors(t *testing.T) {
	srv := redistest.Start(t)
	rdb := failFastClient(t, srv)
	srv.Stop()
	ctx := context.Background()
	for _, tc := range simpleLocks {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.new(rdb, "down")
			for op, err := range map[string]error{"TryLock": l.TryLock(ctx), "Unlock": l.Unlock(ctx)} {
				if err == nil || errors.Is(err, lock.ErrLockBusy) || errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("%s with Redis down = %v, want a Redis error", op, err)
				}
			}
		})
	}
}

func TestTTLLocksRejectNonPositiveTTL(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	for name, l := range map[string]simpleLock{
		"ExpiringLock": lock.NewExpiringLock(rdb, "zero-ttl", 0),
		"TokenLock":    lock.NewTokenLock(rdb, "zero-ttl", -time.Second),
	} {
		if err := l.TryLock(ctx); err == nil || errors.Is(err, lock.ErrLockBusy) {
			t.Errorf("%s TryLock with ttl ≤ 0 = %v, want an error", name, err)
		}
	}
	if n := rdb.Exists(ctx, "zero-ttl").Val(); n != 0 {
		t.Errorf("a lock with ttl ≤ 0 was written")
	}
}

// Article case 3's defect: the holder dies without unlocking (here: simply
// never calls Unlock) and the key, having no TTL, blocks everyone forever.
func TestSetNXLockStaysLockedAfterHolderDies(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	if err := lock.NewSetNXLock(rdb, "product_001").TryLock(ctx); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if ttl := rdb.PTTL(ctx, "product_001").Val(); ttl != -1 {
		t.Fatalf("PTTL = %v, want -1 (no expiry)", ttl)
	}
	if err := lock.NewSetNXLock(rdb, "product_001").TryLock(ctx); !errors.Is(err, lock.ErrLockBusy) {
		t.Fatalf("TryLock after the holder died = %v, want ErrLockBusy", err)
	}
}

// A's lock expires while A works, B takes it, then A unlocks: the plain
// delete of case 4 removes B's lock, the compare-and-delete of case 5 does not.
func TestUnlockAfterExpiryAndTakeover(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		new           func(key string, ttl time.Duration) simpleLock
		wantUnlockErr error
		wantBKeyKept  bool
	}{
		{
			name:          "ExpiringLock deletes the foreign lock",
			new:           func(key string, ttl time.Duration) simpleLock { return lock.NewExpiringLock(rdb, key, ttl) },
			wantUnlockErr: lock.ErrForeignUnlock,
		},
		{
			name:          "TokenLock keeps the foreign lock",
			new:           func(key string, ttl time.Duration) simpleLock { return lock.NewTokenLock(rdb, key, ttl) },
			wantUnlockErr: lock.ErrNotHeld,
			wantBKeyKept:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "takeover:" + tc.name
			a, b := tc.new(key, 30*time.Millisecond), tc.new(key, 10*time.Second)
			if err := a.TryLock(ctx); err != nil {
				t.Fatalf("A TryLock: %v", err)
			}
			waitKeyGone(t, rdb, key)
			if err := b.TryLock(ctx); err != nil {
				t.Fatalf("B TryLock after A's lock expired: %v", err)
			}
			if err := a.Unlock(ctx); !errors.Is(err, tc.wantUnlockErr) {
				t.Fatalf("A Unlock = %v, want %v", err, tc.wantUnlockErr)
			}
			if kept := rdb.Exists(ctx, key).Val() == 1; kept != tc.wantBKeyKept {
				t.Fatalf("B's lock kept = %v, want %v", kept, tc.wantBKeyKept)
			}
			err := tc.new(key, 10*time.Second).TryLock(ctx)
			if tc.wantBKeyKept && !errors.Is(err, lock.ErrLockBusy) || !tc.wantBKeyKept && err != nil {
				t.Fatalf("C TryLock while B believes it holds = %v", err)
			}
		})
	}
}

func TestTokenLockUnlockSurvivesScriptFlush(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	l := lock.NewTokenLock(rdb, "flushed", 10*time.Second)
	if err := l.TryLock(ctx); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after SCRIPT FLUSH (EVALSHA must fall back to EVAL): %v", err)
	}
	if n := rdb.Exists(ctx, "flushed").Val(); n != 0 {
		t.Fatalf("lock key still exists after Unlock")
	}
}

// waitKeyGone waits until Redis has expired key.
func waitKeyGone(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(context.Background(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failFastClient is a client for a server the test will stop: no command or
// dial retries, so a stopped server costs one refused connection.
func failFastClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
