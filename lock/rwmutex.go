package lock

import (
	"context"
	"time"
)

var (
	readLockScript    = loadScript("read_lock.lua")
	readUnlockScript  = loadScript("read_unlock.lua")
	readRenewScript   = loadScript("read_renew.lua")
	writeLockScript   = loadScript("write_lock.lua")
	writeUnlockScript = loadScript("write_unlock.lua")
	writeLeaveScript  = loadScript("write_leave.lua")
)

// RWMutex is Redisson's RReadWriteLock (seed 001): any number of readers or
// one writer. The owner holding the write lock may also take the read lock
// (and keeps it after releasing the write lock); readers hold a timeout key
// per level, so a crashed reader's level expires on its own.
//
// Unlike Redisson, and like sync.RWMutex, writers come first: once a writer
// waits, new readers wait behind it, so overlapping readers cannot starve
// it. Readers that already hold a level may take more, and the writer may
// read, so neither deadlocks. A waiting writer keeps its place in Redis
// (refreshed every third of WithFairWaiterTimeout while it waits); a writer
// that dies or gives up stops holding readers back within that timeout, or
// at once when it leaves. Writers are not ordered among themselves, and a
// steady stream of writers can keep new readers waiting.
// WithReadersFirst restores Redisson's rule.
type RWMutex struct {
	read, write *ownedLock
}

// RWMutex returns a handle on the read-write lock called name; its read and
// write lockers are one owner.
func (c *Client) RWMutex(name string) *RWMutex {
	key, channel := lockKeys(name)
	owner := c.newOwner()
	writers := key + ":writers"
	read := &readOps{c: c, owner: owner, writeField: owner + ":write",
		lockKeys:   []string{key, key + ":" + owner + ":rwlock_timeout", writers},
		unlockKeys: []string{key, channel, key + ":" + owner + ":rwlock_timeout", key},
	}
	write := &writeOps{c: c, field: owner + ":write", keys: []string{key, writers}, leaveKeys: []string{writers, channel},
		unlockKeys: []string{key, channel}}
	// A reader held back by a writer wakes by the writer's place lapsing at
	// the latest (the script's answer); a waiting writer refreshes its place.
	readLock := newOwnedLock(c, name+" (read)", channel, forever, read)
	writeLock := newOwnedLock(c, name+" (write)", channel, c.opts.fairWaiterTTL/3, write)
	return &RWMutex{read: &readLock, write: &writeLock}
}

// ReadLocker returns the shared side of the lock.
func (rw *RWMutex) ReadLocker() Locker { return rw.read }

// WriteLocker returns the exclusive side of the lock.
func (rw *RWMutex) WriteLocker() Locker { return rw.write }

type readOps struct {
	c                    *Client
	owner, writeField    string
	lockKeys, unlockKeys []string // unlockKeys: lock, channel, owner's timeout prefix, key prefix
}

func (r *readOps) acquire(ctx context.Context, ttl time.Duration, _ bool) (bool, time.Duration, error) {
	writersFirst := "1"
	if r.c.opts.readersFirst {
		writersFirst = "0"
	}
	return r.c.attempt(ctx, readLockScript, r.lockKeys, ms(ttl), r.owner, r.writeField, writersFirst)
}

func (r *readOps) release(ctx context.Context, _ time.Duration) error {
	return unlockResult(r.lockKeys[0], readUnlockScript.Run(ctx, r.c.rdb, r.unlockKeys, r.owner).Err())
}

func (r *readOps) renew(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := readRenewScript.Run(ctx, r.c.rdb, []string{r.lockKeys[0], r.lockKeys[0]}, ms(ttl), r.owner).Int()
	return n == 1, err
}

func (r *readOps) abandon(context.Context) error { return nil }

type writeOps struct {
	c                           *Client
	field                       string
	keys, leaveKeys, unlockKeys []string // lock, writers; writers, channel; lock, channel
}

func (w *writeOps) acquire(ctx context.Context, ttl time.Duration, waiting bool) (bool, time.Duration, error) {
	wait := "0"
	if waiting {
		wait = "1"
	}
	return w.c.attempt(ctx, writeLockScript, w.keys, ms(ttl), w.field, wait, ms(w.c.opts.fairWaiterTTL))
}

func (w *writeOps) release(ctx context.Context, ttl time.Duration) error {
	return unlockResult(w.keys[0], writeUnlockScript.Run(ctx, w.c.rdb, w.unlockKeys, ms(ttl), w.field).Err())
}

func (w *writeOps) renew(ctx context.Context, ttl time.Duration) (bool, error) {
	return renewOwner(ctx, w.c, w.keys[0], w.field, ttl)
}

// abandon gives up the writer's place, waking the readers it held back.
func (w *writeOps) abandon(ctx context.Context) error {
	return writeLeaveScript.Run(ctx, w.c.rdb, w.leaveKeys, w.field).Err()
}
