package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var fencedLockScript = loadScript("fenced_lock.lua")

// FencedMutex is a reentrant watchdog lock whose every new holder gets a
// fencing token, larger than any token handed out before for the same lock.
// A resource that remembers the largest token it has seen and rejects writes
// with a smaller one stays correct even when two owners believe they hold the
// lock at once — after a lease ran out, a long pause, or a failover that lost
// the lock. A reentrant acquisition keeps its holder's token. While its
// Redis Cluster slot migrates, a free lock whose counter has not moved yet
// to the importing master is refused with ErrCounterMoving (try again).
//
// Tokens never go back, even when Redis lost the counter — restarted
// without persistence, wiped, or failed over to a replica that missed its
// last increments: a new token is the counter's next value or the Redis
// server's clock in microseconds (TIME), whichever is larger. So tokens are
// large (about 1.8e15 in 2026), and this holds as long as the clock of the
// server that hands out a token is not behind the clock of the one that
// handed out the last by more than the time between the two (NTP-synced
// hosts, a failover that takes seconds); tokens stay exact in a Lua number
// (below 2^53) until the year 2255.
//
// Like FairMutex, each handle acquires for itself: a lock passed inside a
// process would need a fresh token anyway.
type FencedMutex struct {
	ownedLock
	ops *fencedOps
}

var _ Locker = (*FencedMutex)(nil)

// FencedMutex returns a handle on the fenced lock called name. Its token
// counter is the key FencingCounterKey(name), in the lock's hash slot.
func (c *Client) FencedMutex(name string) *FencedMutex {
	key, channel := lockKeys(name)
	latch := latchKey(key)
	ops := &fencedOps{c: c, keys: []string{key, ownKey("token", key), latch}, releaseKeys: []string{key, latch},
		channel: channel, owner: c.newOwner()}
	return &FencedMutex{ownedLock: newOwnedLock(c, name, channel, forever, ops), ops: ops}
}

// FencingCounterKey is the Redis key of the fencing counter of the
// FencedMutex called name: a string holding the last token handed out, in
// the lock's hash slot, for a script of the program's that must know the
// newest token (to fence off every holder so far, for one).
func FencingCounterKey(name string) string {
	key, _ := lockKeys(name)
	return ownKey("token", key)
}

// Token is the fencing token of the handle's current hold; 0 when it holds
// nothing.
func (f *FencedMutex) Token() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold == nil {
		return 0
	}
	return f.ops.token.Load()
}

type fencedOps struct {
	c           *Client
	keys        []string // lock, token counter, release latch, as fenced_lock.lua takes them
	releaseKeys []string // lock, release latch, as unlock.lua takes them
	channel     string
	owner       string
	token       atomic.Int64
}

func (f *fencedOps) acquire(ctx context.Context, ttl time.Duration, _ bool, token string, levels int) (bool, time.Duration, error) {
	res, err := f.c.runAcquire(ctx, fencedLockScript, f.keys, []any{ms(ttl), f.owner, token, strconv.Itoa(levels), f.keys[1]})
	if redis.HasErrorPrefix(err, "COUNTERMOVING") {
		return false, 0, ErrCounterMoving
	}
	if errors.Is(err, ErrNotReplicated) {
		return true, 0, err // held: the caller releases it
	}
	if err != nil {
		return false, 0, err
	}
	switch v := res.(type) {
	case []any:
		if token, ok := v[0].(int64); ok && len(v) == 1 {
			f.token.Store(token)
			return true, 0, nil
		}
	case int64:
		return false, time.Duration(v) * time.Millisecond, nil
	}
	return false, 0, fmt.Errorf("unexpected reply %v", res)
}

func (f *fencedOps) release(ctx context.Context, ttl time.Duration, token string, left int) error {
	return unlockResult(f.keys[0], f.c.eval(ctx, unlockScript, f.releaseKeys, ms(ttl), f.owner, f.channel, f.c.publishArg,
		token, strconv.Itoa(left), f.c.latchTTLArg).Err())
}

func (f *fencedOps) renew(ctx context.Context, ttl time.Duration, token string) (bool, error) {
	return renewHold(ctx, f.c, f.keys[0], holdField, token, ttl)
}

func (f *fencedOps) abandon(context.Context) error { return nil }
