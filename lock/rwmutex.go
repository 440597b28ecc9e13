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
)

// RWMutex is Redisson's RReadWriteLock (seed 001): any number of readers or
// one writer. The owner holding the write lock may also take the read lock
// (and keeps it after releasing the write lock); readers hold a timeout key
// per level, so a crashed reader's level expires on its own.
type RWMutex struct {
	read, write *ownedLock
}

// RWMutex returns a handle on the read-write lock called name; its read and
// write lockers are one owner.
func (c *Client) RWMutex(name string) *RWMutex {
	key, channel := lockKeys(name)
	owner := c.newOwner()
	read := &readOps{c: c, owner: owner, writeField: owner + ":write",
		lockKeys:   []string{key, key + ":" + owner + ":rwlock_timeout"},
		unlockKeys: []string{key, channel, key + ":" + owner + ":rwlock_timeout", key},
	}
	write := &writeOps{c: c, field: owner + ":write", keys: []string{key, channel}}
	readLock := newOwnedLock(c, name+" (read)", channel, forever, read)
	writeLock := newOwnedLock(c, name+" (write)", channel, forever, write)
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
	return r.c.attempt(ctx, readLockScript, r.lockKeys, ms(ttl), r.owner, r.writeField)
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
	c     *Client
	field string
	keys  []string // lock, channel
}

func (w *writeOps) acquire(ctx context.Context, ttl time.Duration, _ bool) (bool, time.Duration, error) {
	return w.c.attempt(ctx, writeLockScript, w.keys[:1], ms(ttl), w.field)
}

func (w *writeOps) release(ctx context.Context, ttl time.Duration) error {
	return unlockResult(w.keys[0], writeUnlockScript.Run(ctx, w.c.rdb, w.keys, ms(ttl), w.field).Err())
}

func (w *writeOps) renew(ctx context.Context, ttl time.Duration) (bool, error) {
	return renewOwner(ctx, w.c, w.keys[0], w.field, ttl)
}

func (w *writeOps) abandon(context.Context) error { return nil }
