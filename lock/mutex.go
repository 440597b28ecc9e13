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
	// Guarded by Client.mu.
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
	_, err := m.tryLock(ctx, -1, 0)
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
	return m.tryLock(ctx, wait, lease)
}

// TryLockContext is TryLock returning the held context of LockContext.
func (m *Mutex) TryLockContext(ctx context.Context, wait, lease time.Duration) (context.Context, bool, error) {
	ok, err := m.tryLock(ctx, wait, lease)
	if !ok {
		return nil, false, err
	}
	co := m.cohortHeld()
	co.mu.Lock()
	defer co.mu.Unlock()
	if m.held == nil {
		m.held, m.stopHeld = heldContext(ctx, co.hold)
	}
	return m.held, true, nil
}

func (m *Mutex) tryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	co, err := m.c.cohort(m)
	if err != nil {
		return false, err
	}
	ok, err := co.acquire(ctx, m, wait, lease)
	if !ok {
		m.c.unpin(co) // a held level keeps its pin until Unlock
	}
	if err != nil {
		return ok, fmt.Errorf("lock %s: %w", m.name, err)
	}
	return ok, nil
}

// Unlock releases one level of the lock. It returns ErrNotHeld when this
// handle does not hold it, and ErrNotHeld wrapping ErrLockLost when the lock
// was lost while held.
func (m *Mutex) Unlock(ctx context.Context) error {
	co := m.cohortHeld()
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

// cohortHeld returns the cohort of the handle's key if one exists.
func (m *Mutex) cohortHeld() *cohort {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.c.cohorts[m.key]
}

// endHeld cancels the handle's held context; called under the cohort's mu.
func (m *Mutex) endHeld(cause error) {
	if m.stopHeld != nil {
		m.stopHeld(cause)
		m.held, m.stopHeld = nil, nil
	}
}
