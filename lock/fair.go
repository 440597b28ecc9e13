package lock

import (
	"context"
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
	ops := &fairOps{c: c, keys: []string{key, key + ":queue", key + ":deadlines"}, channel: channel, owner: c.newOwner()}
	// A waiter wakes at least every third of its timeout to refresh its place.
	return &FairMutex{newOwnedLock(c, name, channel+":"+ops.owner, c.opts.fairWaiterTTL/3, ops)}
}

type fairOps struct {
	c       *Client
	keys    []string // lock, queue, deadlines
	channel string   // prefix of the waiters' own channels
	owner   string
}

func (f *fairOps) acquire(ctx context.Context, ttl time.Duration, waiting bool) (bool, time.Duration, error) {
	queue := "0"
	if waiting {
		queue = "1"
	}
	return f.c.attempt(ctx, fairLockScript, f.keys, ms(ttl), f.owner, ms(f.c.opts.fairWaiterTTL), queue)
}

func (f *fairOps) release(ctx context.Context, ttl time.Duration) error {
	return unlockResult(f.keys[0], f.c.eval(ctx, fairUnlockScript, f.keys, ms(ttl), f.owner, f.channel, f.c.publishArg).Err())
}

func (f *fairOps) renew(ctx context.Context, ttl time.Duration) (bool, error) {
	return renewOwner(ctx, f.c, f.keys[0], f.owner, ttl)
}

func (f *fairOps) abandon(ctx context.Context) error {
	return f.c.eval(ctx, fairLeaveScript, f.keys, f.owner, f.channel, f.c.publishArg).Err()
}

// renewOwner extends key while owner's field is in it.
func renewOwner(ctx context.Context, c *Client, key, owner string, ttl time.Duration) (bool, error) {
	n, err := c.eval(ctx, renewScript, []string{key}, ms(ttl), owner).Int()
	return n == 1, err
}
