package lock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Mutex is a handle on a reentrant distributed lock, Redisson's RLock: a Redis
// hash whose field names the holding Client and counts its levels, kept alive
// by a watchdog while held, and released with a PUBLISH that wakes waiters.
//
// A handle is one owner: Lock, TryLock and Unlock on the same handle are
// reentrant, and Unlock on any other handle returns ErrNotHeld. Use a handle
// from one goroutine at a time, as a sync.Mutex holder would.
type Mutex struct {
	c                  *Client
	name, key, channel string

	// Guarded by the cohort's mu while the handle holds or waits.
	depth    int
	held     context.Context
	stopHeld func(cause error)

	lost atomic.Bool // the hold ended by loss; the next Unlock reports it

	// The cohort of the handle's last acquisition, kept for the next: a
	// handle that locks a free lock again and again allocates no cohort.
	// Written under Client.mu by the handle's user, who reads it in Unlock.
	lastCohort *cohort
}

var _ Locker = (*Mutex)(nil)

// Name is the name the handle was created with.
func (m *Mutex) Name() string { return m.name }

// Key is the Redis key of the lock; its channel shares its hash tag.
func (m *Mutex) Key() string { return m.key }

// Lock waits until the lock is acquired or ctx is done. A watchdog keeps the
// lock until Unlock.
func (m *Mutex) Lock(ctx context.Context) error {
	_, _, err := m.tryLock(ctx, -1, 0)
	return err
}

// LockContext is Lock, and returns a context that is cancelled when the lock
// is lost (cause ErrLockLost: the watchdog found it gone or could not renew
// it before it expired), released (ErrReleased) or its Client closed
// (ErrClosed). It carries ctx's values but not its cancellation. Work done
// under the lock should use it.
func (m *Mutex) LockContext(ctx context.Context) (context.Context, error) {
	held, _, err := m.TryLockContext(ctx, -1, 0)
	return held, err
}

// TryLock waits at most wait for the lock (0: one attempt; negative: no
// limit but ctx). With lease > 0 the lock expires after lease unless
// released; with lease 0 a watchdog keeps it until Unlock.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	_, ok, err := m.tryLock(ctx, wait, lease)
	return ok, err
}

// TryLockContext is TryLock returning the held context of LockContext.
func (m *Mutex) TryLockContext(ctx context.Context, wait, lease time.Duration) (context.Context, bool, error) {
	co, ok, err := m.tryLock(ctx, wait, lease)
	if !ok {
		return nil, false, err
	}
	// Under the cohort's mu, which an eviction takes to end m.held.
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.holder != m { // lost and evicted as soon as acquired
		return endedContext(ctx, ErrLockLost), true, nil
	}
	if m.held == nil {
		m.held, m.stopHeld = heldContext(ctx, m.c, co.hold)
	}
	return m.held, true, nil
}

func (m *Mutex) tryLock(ctx context.Context, wait, lease time.Duration) (*cohort, bool, error) {
	co, err := m.c.cohort(m)
	if err != nil {
		return nil, false, err
	}
	ok, err := co.acquire(ctx, m, wait, lease)
	if !ok {
		m.c.unpin(co) // a held level keeps its pin until Unlock
	}
	if err != nil {
		return co, ok, fmt.Errorf("lock %s: %w", m.name, err)
	}
	return co, ok, nil
}

// Unlock releases one level of the lock. It returns ErrNotHeld when this
// handle does not hold it, and ErrNotHeld wrapping ErrLockLost when the lock
// was lost while held.
func (m *Mutex) Unlock(ctx context.Context) error {
	co := m.lastCohort // the handle's only cohort while it holds
	err := ErrNotHeld
	if co != nil {
		err = co.release(ctx, m)
	}
	if err != ErrNotHeld {
		m.c.unpin(co)
		return err
	}
	// Not this handle's: nothing was released.
	if m.lost.Swap(false) {
		return fmt.Errorf("unlock %s: %w: %w", m.name, ErrNotHeld, ErrLockLost)
	}
	return fmt.Errorf("unlock %s: %w", m.name, ErrNotHeld)
}

// endHeld cancels the handle's held context; called under the cohort's mu.
func (m *Mutex) endHeld(cause error) {
	if m.stopHeld != nil {
		m.stopHeld(cause)
		m.held, m.stopHeld = nil, nil
	}
}
