package lock

import (
	"context"
	"strconv"
	"time"
)

var (
	fairLockScript   = loadScript("fair_lock.lua")
	fairUnlockScript = loadScript("fair_unlock.lua")
	fairLeaveScript  = loadScript("fair_leave.lua")
)

// FairMutex is Redisson's RFairLock: owners get the lock in the order they
// started waiting for it. Waiters queue in Redis with deadlines taken from
// Redis TIME, not from client clocks; a waiter that dies is dropped from the
// queue once its deadline passes, so it blocks nobody for long; an unlock
// wakes only the next waiter, on a channel of its own.
//
// Each handle is one owner, also among handles of one Client: a FairMutex is
// never passed inside a process, since that would jump the queue.
type FairMutex struct {
	ownedLock
}

var _ Locker = (*FairMutex)(nil)

// FairMutex returns a handle on the fair lock called name.
func (c *Client) FairMutex(name string) *FairMutex {
	key, channel := lockKeys(name)
	ops := &fairOps{c: c, keys: []string{key, ownKey("queue", key), ownKey("deadlines", key), latchKey(key)}, channel: channel, owner: c.newOwner()}
	// A waiter wakes at least every third of its timeout to refresh its place.
	return &FairMutex{newOwnedLock(c, name, channel+":"+ops.owner, c.opts.fairWaiterTTL/3, ops)}
}

type fairOps struct {
	c       *Client
	keys    []string // lock, queue, deadlines, release latch
	channel string   // prefix of the waiters' own channels
	owner   string
}

func (f *fairOps) acquire(ctx context.Context, ttl time.Duration, waiting bool, token string, levels int) (bool, time.Duration, error) {
	queue := "0"
	if waiting {
		queue = "1"
	}
	return f.c.attempt(ctx, fairLockScript, f.keys, ms(ttl), f.owner, ms(f.c.opts.fairWaiterTTL), queue, token, strconv.Itoa(levels))
}

func (f *fairOps) release(ctx context.Context, ttl time.Duration, token string, left int) error {
	return unlockResult(f.keys[0], f.c.eval(ctx, fairUnlockScript, f.keys, ms(ttl), f.owner, f.channel, f.c.publishArg,
		token, strconv.Itoa(left), f.c.latchTTLArg).Err())
}

func (f *fairOps) renew(ctx context.Context, ttl time.Duration, token string) (bool, error) {
	return renewHold(ctx, f.c, f.keys[0], holdField, token, ttl)
}

func (f *fairOps) abandon(ctx context.Context) error {
	return f.c.eval(ctx, fairLeaveScript, f.keys[:3], f.owner, f.channel, f.c.publishArg).Err()
}

// holdField is the field of an exclusive lock's hash that names its hold
// (see doc.go, "Unknown outcomes").
const holdField = "hold"

// renewHold extends key while its field holds the hold's token.
func renewHold(ctx context.Context, c *Client, key, field, token string, ttl time.Duration) (bool, error) {
	n, err := c.eval(ctx, renewScript, []string{key}, ms(ttl), field, token).Int()
	return n == 1, err
}
