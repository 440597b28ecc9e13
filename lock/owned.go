package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ownedLock is a lock every handle of which acquires for itself in Redis,
// with no cohort: FairMutex (passing it inside a process would break the
// FIFO order) and the two halves of RWMutex. A handle is one owner and is
// reentrant, like Mutex.
type ownedLock struct {
	c        *Client
	name     string
	channel  string // where unlocks that concern this owner are published
	maxSleep time.Duration
	ops      ownedOps
	waker    *waker

	mu       sync.Mutex
	hold     *hold
	depth    int
	held     context.Context
	stopHeld func(cause error)
	lost     bool
}

// ownedOps are the scripts of one kind of owned lock. Each names the hold
// it acts on by its token (see doc.go, "Unknown outcomes").
type ownedOps interface {
	// acquire makes one attempt with the lock's TTL (see attemptFunc) for
	// the hold token, which then has levels levels (1: a new hold).
	acquire(ctx context.Context, ttl time.Duration, waiting bool, token string, levels int) (bool, time.Duration, error)
	// release gives up one level of the hold token, leaving left
	// (givenUp: an attempt given up, see tryLock); unlockResult's errors.
	release(ctx context.Context, ttl time.Duration, token string, left int) error
	// renew extends a watchdog hold; false when Redis no longer has it.
	renew(ctx context.Context, ttl time.Duration, token string) (bool, error)
	// abandon cleans up after a wait that did not acquire.
	abandon(ctx context.Context) error
}

func newOwnedLock(c *Client, name, channel string, maxSleep time.Duration, ops ownedOps) ownedLock {
	return ownedLock{c: c, name: name, channel: channel, maxSleep: maxSleep, ops: ops, waker: newWaker("")}
}

// Lock waits until the lock is acquired or ctx is done; a watchdog keeps it.
func (o *ownedLock) Lock(ctx context.Context) error {
	_, err := o.TryLock(ctx, -1, 0)
	return err
}

// LockContext is Lock returning a context that ends when the lock is lost,
// released or its Client closed (see Mutex.LockContext).
func (o *ownedLock) LockContext(ctx context.Context) (context.Context, error) {
	held, _, err := o.TryLockContext(ctx, -1, 0)
	return held, err
}

// TryLock waits at most wait (0: one attempt; negative: until ctx is done);
// lease > 0 lets the lock expire after lease, 0 keeps it with a watchdog.
func (o *ownedLock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	ok, err := o.tryLock(ctx, wait, lease)
	if err != nil {
		err = fmt.Errorf("lock %s: %w", o.name, err)
	}
	return ok, err
}

// TryLockContext is TryLock returning the held context of LockContext.
func (o *ownedLock) TryLockContext(ctx context.Context, wait, lease time.Duration) (context.Context, bool, error) {
	ok, err := o.TryLock(ctx, wait, lease)
	if !ok {
		return nil, false, err
	}
	// Under mu, which an eviction takes to end o.held.
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hold == nil { // lost and evicted as soon as acquired
		return endedContext(ctx, ErrLockLost), true, nil
	}
	if o.held == nil {
		o.held, o.stopHeld = heldContext(ctx, o.c, o.hold)
	}
	return o.held, true, nil
}

// givenUp is the levels an unlock script is told are left when it
// releases an attempt its caller gave up on: as the last level, and the
// token goes into the latch even when the attempt took nothing.
const givenUp = -1

// counterMovingPoll is how often a waiting FencedMutex tries again while its
// slot migrates and its fencing counter has not moved (ErrCounterMoving).
const counterMovingPoll = 100 * time.Millisecond

func (o *ownedLock) tryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := context.Cause(o.c.life); err != nil {
		return false, err
	}
	ttl := lease
	if ttl <= 0 {
		ttl = o.c.opts.watchdogTimeout
	}
	o.mu.Lock()
	h, levels := o.hold, o.depth
	o.mu.Unlock()
	if h != nil {
		return o.reenter(ctx, h, levels, ttl)
	}
	// Close waits for the cleanup below: a waiter's place must not stay
	// queued once the program closes its Redis client.
	if !o.c.startTask() {
		return false, ErrClosed
	}
	defer o.c.goroutines.Done()
	token := o.c.newToken()
	var sent time.Time
	lost := false
	ok, err := o.c.waitFor(ctx, o.waker, o.channel, time.Now(), wait, o.maxSleep,
		func(ctx context.Context, waiting bool) (bool, time.Duration, error) {
			sent = time.Now()
			ok, ttl, err := o.ops.acquire(ctx, ttl, waiting, token, 1)
			lost = lost || (!ok && replyLost(err))
			if errors.Is(err, ErrCounterMoving) && wait != 0 {
				// A waiter waits for the fencing counter to move as it
				// waits for the lock (the unlock it hears came already).
				return false, counterMovingPoll, nil
			}
			return ok, ttl, err
		})
	o.c.subs.unsubscribe(o.channel, o.waker.listener)
	if ok && err == nil {
		err = expiredOnArrival(sent, ttl)
	}
	cleanupCtx, cancel := o.c.cleanupContext(ctx)
	defer cancel()
	if ok && err != nil { // not replicated, or expired before we knew: give it back
		if releaseErr := o.ops.release(cleanupCtx, ttl, token, 0); !errors.Is(releaseErr, ErrNotHeld) {
			err = errors.Join(err, releaseErr)
		}
		return false, err
	}
	if !ok {
		if lost {
			// The hold named token, if Redis has it, is the lost attempt's;
			// if that attempt has not run yet, the latch keeps it from
			// taking the lock when it does.
			_ = o.ops.release(cleanupCtx, ttl, token, givenUp)
		}
		if abandonErr := o.ops.abandon(cleanupCtx); err == nil {
			err = abandonErr
		}
		return false, err
	}
	if err := context.Cause(o.c.life); err != nil {
		// The Client closed as the attempt took the lock: give it back,
		// since nobody would release it (Close waits for this, startTask).
		if releaseErr := o.ops.release(cleanupCtx, ttl, token, 0); releaseErr != nil && !errors.Is(releaseErr, ErrNotHeld) {
			err = errors.Join(err, fmt.Errorf("give back: %w", releaseErr))
		}
		return false, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Under mu, so that a loss reported at once finds the hold in place.
	o.hold, o.depth, o.lost = o.c.newHold(o.name, token, sent, lease, o), 1, false
	return true, nil
}

// reenter adds a level to h, which has levels: the script finds h by its
// token or fails, and never re-creates a hold Redis lost.
func (o *ownedLock) reenter(ctx context.Context, h *hold, levels int, ttl time.Duration) (bool, error) {
	sent := time.Now()
	ok, _, err := o.ops.acquire(ctx, ttl, false, h.token, levels+1)
	if ok && err == nil && !h.extend(sent, ttl) {
		// The hold expired as the level was added; its eviction is under way.
		err = fmt.Errorf("reentrant acquisition: %w", ErrLockLost)
	}
	if ok && err != nil { // not confirmed by the replicas, or lost: give the level back
		cleanupCtx, cancel := o.c.cleanupContext(ctx)
		defer cancel()
		return false, errors.Join(err, o.ops.release(cleanupCtx, ttl, h.token, levels))
	}
	if err != nil {
		// A lost reply may have set the level count in Redis: harmless,
		// since the last level's release deletes the hold whatever it
		// counts.
		return false, err
	}
	if !ok {
		h.end(ErrLockLost)
		o.evict(h)
		return false, fmt.Errorf("reentrant acquisition: %w", ErrLockLost)
	}
	o.mu.Lock()
	o.depth++
	o.mu.Unlock()
	return true, nil
}

// renew extends a watchdog hold.
func (o *ownedLock) renew(ctx context.Context, h *hold) (bool, error) {
	return o.ops.renew(ctx, o.c.opts.watchdogTimeout, h.token)
}

// evict forgets a hold that was lost; the next Unlock reports it.
func (o *ownedLock) evict(h *hold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hold != h {
		return
	}
	o.hold, o.depth, o.lost = nil, 0, true
	o.endHeldLocked(h.endCause())
}

// Unlock releases one level; ErrNotHeld when this handle does not hold the
// lock, wrapping ErrLockLost when it was lost while held.
func (o *ownedLock) Unlock(ctx context.Context) error {
	o.mu.Lock()
	h := o.hold
	if h == nil {
		lost := o.lost
		o.lost = false
		o.mu.Unlock()
		if lost {
			return fmt.Errorf("unlock %s: %w: %w", o.name, ErrNotHeld, ErrLockLost)
		}
		return fmt.Errorf("unlock %s: %w", o.name, ErrNotHeld)
	}
	if o.depth > 1 {
		o.depth--
		left := o.depth
		o.mu.Unlock()
		return o.ops.release(ctx, h.lease, h.token, left)
	}
	o.hold, o.depth = nil, 0
	o.endHeldLocked(releaseCause(h))
	o.mu.Unlock()
	h.end(ErrReleased) // stops the watchdog before the unlock is sent
	return o.ops.release(ctx, h.lease, h.token, 0)
}

func (o *ownedLock) endHeldLocked(cause error) {
	if o.stopHeld != nil {
		o.stopHeld(cause)
		o.held, o.stopHeld = nil, nil
	}
}
