package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The three simple locks of the flash-sale articles (cases 3–5 of
// 《关于分布式锁(Redisson)的原理分析》, docs/articles.md),
// kept as small types so their defects can be shown next to the Redisson
// lock. Each value is one owner with its own random token, and each fails
// fast: TryLock returns ErrLockBusy while another owner holds the key.

var tokenUnlockScript = loadScript("token_unlock.lua")

// SetNXLock is article case 3: SETNX with no expiry (sent as SET NX, which
// is the same command), released with DEL.
//
// Defect: a holder that dies before Unlock (kill -9, crash, redeploy) leaves
// the key without a TTL, so nobody can take the lock again until someone
// deletes it by hand. Unlock also deletes the key whoever holds it.
type SetNXLock struct {
	rdb   redis.Cmdable
	key   string
	token string
}

// NewSetNXLock returns a SETNX lock on key.
func NewSetNXLock(rdb redis.Cmdable, key string) *SetNXLock {
	return &SetNXLock{rdb: rdb, key: key, token: rand.Text()}
}

// Key returns the Redis key of the lock.
func (l *SetNXLock) Key() string { return l.key }

// TryLock takes the lock once: nil, ErrLockBusy, or a wrapped Redis error.
func (l *SetNXLock) TryLock(ctx context.Context) error {
	return setNX(ctx, l.rdb, l.key, l.token, 0)
}

// Unlock deletes the key, whoever holds it; ErrNotHeld when it was gone.
func (l *SetNXLock) Unlock(ctx context.Context) error {
	n, err := l.rdb.Del(ctx, l.key).Result()
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", l.key, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}

// ttlLock is the acquisition ExpiringLock and TokenLock share:
// SET key token NX PX ttl.
type ttlLock struct {
	rdb   redis.Cmdable
	key   string
	token string
	ttl   time.Duration
}

func newTTLLock(rdb redis.Cmdable, key string, ttl time.Duration) ttlLock {
	return ttlLock{rdb: rdb, key: key, token: rand.Text(), ttl: ttl}
}

// Key returns the Redis key of the lock.
func (l *ttlLock) Key() string { return l.key }

// TryLock takes the lock once for its TTL: nil, ErrLockBusy, or a wrapped
// Redis error. A TTL ≤ 0 is an error rather than a lock that never expires.
func (l *ttlLock) TryLock(ctx context.Context) error {
	if l.ttl <= 0 {
		return fmt.Errorf("lock: acquire %q: ttl must be positive, got %v", l.key, l.ttl)
	}
	return setNX(ctx, l.rdb, l.key, l.token, l.ttl)
}

// ExpiringLock is article case 4: SET NX with an expiry, released with a
// plain delete (GETDEL, so the deletion can be seen for what it was).
//
// Defect: when the work outlasts the TTL, the lock expires, another owner
// takes it, and our Unlock deletes the other owner's lock. Unlock reports
// that as ErrForeignUnlock — after the key is already gone.
type ExpiringLock struct{ ttlLock }

// NewExpiringLock returns a lock on key that expires after ttl (> 0).
func NewExpiringLock(rdb redis.Cmdable, key string, ttl time.Duration) *ExpiringLock {
	return &ExpiringLock{newTTLLock(rdb, key, ttl)}
}

// Unlock deletes the key. It returns ErrForeignUnlock when the deleted value
// was another owner's token (the lock is deleted nonetheless) and ErrNotHeld
// when the key was gone.
func (l *ExpiringLock) Unlock(ctx context.Context) error {
	value, err := l.rdb.GetDel(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return ErrNotHeld
	case err != nil:
		return fmt.Errorf("lock: release %q: %w", l.key, err)
	case value != l.token:
		return ErrForeignUnlock
	}
	return nil
}

// TokenLock is article case 5: SET NX PX with a random token, released by a
// Lua compare-and-delete, so it never deletes another owner's lock.
//
// Defect: nothing extends the TTL, so work that outlasts it still lets a
// second owner in while the first is inside its critical section.
type TokenLock struct{ ttlLock }

// NewTokenLock returns a lock on key that expires after ttl (> 0).
func NewTokenLock(rdb redis.Cmdable, key string, ttl time.Duration) *TokenLock {
	return &TokenLock{newTTLLock(rdb, key, ttl)}
}

// Unlock deletes the key if it still holds this lock's token; ErrNotHeld
// otherwise (expired, or taken by another owner, whose lock stays).
func (l *TokenLock) Unlock(ctx context.Context) error {
	deleted, err := tokenUnlockScript.Run(ctx, l.rdb, []string{l.key}, l.token).Int()
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", l.key, err)
	}
	if deleted == 0 {
		return ErrNotHeld
	}
	return nil
}

// setNX sets key to token unless it exists, expiring after ttl (0: never).
func setNX(ctx context.Context, rdb redis.Cmdable, key, token string, ttl time.Duration) error {
	ok, err := rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return fmt.Errorf("lock: acquire %q: %w", key, err)
	}
	if !ok {
		return ErrLockBusy
	}
	return nil
}
