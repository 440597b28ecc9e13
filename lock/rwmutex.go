package lock

import (
	"context"
	"strconv"
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

// RWMutex is Redisson's RReadWriteLock (读写锁 in 《Redisson分布式锁的实现》,
// docs/articles.md): any number of readers or
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
	keys := []string{key, ownKey("writers", key), latchKey(key)}
	release := []string{key, keys[2]}
	read := &readOps{c: c, writeField: owner + ":write", channel: channel, keys: keys, releaseKeys: release, levels: ownKey("rwlock_timeout", key)}
	write := &writeOps{c: c, field: owner + ":write", keys: keys, releaseKeys: release, channel: channel}
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

// readOps are the read side's scripts. A read hold's field in the hash is
// its token, so every hold has its own field and level keys.
type readOps struct {
	c           *Client
	writeField  string   // the owner's write side's field
	keys        []string // lock, waiting writers, release latch
	releaseKeys []string // lock, release latch
	channel     string
	levels      string // the lock's read-timeout prefix (read_unlock.lua)
}

// levelPrefix names the keys that time each level of the read hold token.
func (r *readOps) levelPrefix(token string) string {
	return r.levels + ":" + token
}

func (r *readOps) acquire(ctx context.Context, ttl time.Duration, _ bool, token string, levels int) (bool, time.Duration, error) {
	writersFirst := "1"
	if r.c.opts.readersFirst {
		writersFirst = "0"
	}
	return r.c.attempt(ctx, readLockScript, r.keys, ms(ttl), token, r.writeField, writersFirst, r.levelPrefix(token), strconv.Itoa(levels))
}

func (r *readOps) release(ctx context.Context, _ time.Duration, token string, left int) error {
	return unlockResult(r.keys[0], r.c.eval(ctx, readUnlockScript, r.releaseKeys, token, r.channel, r.levelPrefix(token), r.levels, r.c.publishArg,
		strconv.Itoa(left), r.c.latchTTLArg).Err())
}

func (r *readOps) renew(ctx context.Context, ttl time.Duration, token string) (bool, error) {
	n, err := r.c.eval(ctx, readRenewScript, r.keys[:1], ms(ttl), token, r.levels).Int()
	return n == 1, err
}

func (r *readOps) abandon(context.Context) error { return nil }

type writeOps struct {
	c           *Client
	field       string
	keys        []string // lock, waiting writers, release latch
	releaseKeys []string // lock, release latch
	channel     string
}

func (w *writeOps) acquire(ctx context.Context, ttl time.Duration, waiting bool, token string, levels int) (bool, time.Duration, error) {
	wait := "0"
	if waiting {
		wait = "1"
	}
	return w.c.attempt(ctx, writeLockScript, w.keys, ms(ttl), w.field, wait, ms(w.c.opts.fairWaiterTTL), token, strconv.Itoa(levels))
}

func (w *writeOps) release(ctx context.Context, ttl time.Duration, token string, left int) error {
	return unlockResult(w.keys[0], w.c.eval(ctx, writeUnlockScript, w.releaseKeys, ms(ttl), w.field, w.channel, w.c.publishArg,
		token, strconv.Itoa(left), w.c.latchTTLArg, w.keys[1]).Err())
}

// renew extends the write hold; its token is in the write field's ":hold".
func (w *writeOps) renew(ctx context.Context, ttl time.Duration, token string) (bool, error) {
	return renewHold(ctx, w.c, w.keys[0], w.field+":hold", token, ttl)
}

// abandon gives up the writer's place, waking the readers it held back.
func (w *writeOps) abandon(ctx context.Context) error {
	return w.c.eval(ctx, writeLeaveScript, w.keys[1:2], w.field, w.channel, w.c.publishArg).Err()
}
