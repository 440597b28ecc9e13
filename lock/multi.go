package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// lockRoundPerLock is the wait budget per lock of one round of an unlimited
// wait (Redisson's 1500 ms per lock): a round that cannot take its locks
// releases them and starts over, so two composites that take shared locks in
// different orders cannot deadlock.
const lockRoundPerLock = 1500 * time.Millisecond

// maxRetryDelay bounds the random pause between two failed acquisition
// passes within one wait budget, so composites that collided do not collide
// again in step, and instances that fail fast are not hammered.
const maxRetryDelay = 20 * time.Millisecond

var errNoLocks = errors.New("lock: MultiLock/RedLock needs at least one lock")

// multiLock takes its locks in order and succeeds when at least quorum of
// them are held within the wait budget; it is both MultiLock (quorum = all)
// and RedLock (quorum = majority).
type multiLock struct {
	locks  []Locker
	quorum int
	// lockWait is the wait given to one lock out of the remaining budget.
	lockWait func(remaining time.Duration) time.Duration

	mu sync.Mutex
	// held lists, newest last, what each acquisition not yet unlocked got
	// of each lock, so a reentrant acquisition unlocks only its own.
	held [][]outcome
}

// outcome is what one acquisition pass got of one lock.
type outcome uint8

const (
	untried outcome = iota
	taken
	refused // the lock said it was not taken
	failed  // the lock returned an error: its reply may have been lost
)

// selfCleaning is implemented by this package's locks, which release on
// their own an acquisition whose reply was lost and never answer "not
// taken" while they hold what they took: they owe no courtesy unlock, which
// could only remove a level the caller held before.
type selfCleaning interface{ cleansUpLostReplies() }

func (*Mutex) cleansUpLostReplies()     {}
func (*ownedLock) cleansUpLostReplies() {}
func (*multiLock) cleansUpLostReplies() {}

// NewMultiLock returns a lock that holds all of locks or none (Redisson's
// RedissonMultiLock). It takes them in the given order; when one cannot be
// taken within what is left of the wait budget it releases those it took and
// starts over until the budget runs out. The locks may live on different
// Redis servers. Unlock releases all of them and returns the joined errors.
//
// With lease > 0 every lock is taken with that lease, and an acquisition
// that took longer than the lease is released and fails, because its first
// lock may already have expired.
func NewMultiLock(locks ...Locker) Locker {
	return &multiLock{
		locks:    locks,
		quorum:   len(locks),
		lockWait: func(remaining time.Duration) time.Duration { return remaining },
	}
}

// Lock is TryLock with no limit but ctx and a watchdog lease (0).
func (m *multiLock) Lock(ctx context.Context) error {
	_, err := m.TryLock(ctx, -1, 0)
	return err
}

// TryLock makes acquisition passes over the locks until one takes a quorum
// or the wait budget runs out (wait 0: one pass in which every lock gets a
// single attempt; negative: rounds of n × 1.5 s until ctx is done). A lock
// whose TryLock errors counts as not taken.
func (m *multiLock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if len(m.locks) == 0 {
		return false, errNoLocks
	}
	if wait >= 0 {
		return m.tryLock(ctx, wait, lease)
	}
	round := time.Duration(len(m.locks)) * lockRoundPerLock
	for {
		if ok, err := m.tryLock(ctx, round, lease); ok || err != nil {
			return ok, err
		}
	}
}

// tryLock is TryLock with a finite wait budget.
func (m *multiLock) tryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	start := time.Now()
	for {
		outcomes, err := m.acquire(ctx, start, wait, lease)
		if err != nil {
			return false, err
		}
		if outcomes != nil {
			m.mu.Lock()
			m.held = append(m.held, outcomes)
			m.mu.Unlock()
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		remaining := wait - time.Since(start)
		if remaining <= 0 {
			return false, nil
		}
		pause := time.NewTimer(min(rand.N(maxRetryDelay), remaining))
		select {
		case <-ctx.Done():
			pause.Stop()
			return false, ctx.Err()
		case <-pause.C:
		}
	}
}

// acquire makes one pass and returns what it got of each lock, or nil when
// it took too few or took longer than the lease; then it has released them,
// even when ctx is done (a lock kept by its watchdog would otherwise stay
// held). The error reports a taken lock it could not release.
func (m *multiLock) acquire(ctx context.Context, budgetStart time.Time, wait, lease time.Duration) ([]outcome, error) {
	start := time.Now()
	outcomes := make([]outcome, len(m.locks))
	tried, acquired := 0, 0
	for i, l := range m.locks {
		lockWait := time.Duration(0)
		if wait > 0 {
			remaining := wait - time.Since(budgetStart)
			if remaining <= 0 {
				break
			}
			lockWait = min(m.lockWait(remaining), remaining)
		}
		tried++
		ok, err := l.TryLock(ctx, lockWait, lease)
		switch {
		case ok && err == nil:
			outcomes[i] = taken
			acquired++
			continue
		case err != nil:
			outcomes[i] = failed
		default:
			outcomes[i] = refused
		}
		if tried-acquired > len(m.locks)-m.quorum {
			break // the quorum is out of reach
		}
	}
	if acquired >= m.quorum && (lease <= 0 || time.Since(start) < lease) {
		return outcomes, nil
	}
	return nil, errors.Join(m.unlock(context.WithoutCancel(ctx), outcomes)...)
}

// Unlock releases the locks of the newest acquisition and returns the joined
// errors of those it held; ErrNotHeld when nothing is held.
func (m *multiLock) Unlock(ctx context.Context) error {
	m.mu.Lock()
	if len(m.held) == 0 {
		m.mu.Unlock()
		return ErrNotHeld
	}
	outcomes := m.held[len(m.held)-1]
	m.held = m.held[:len(m.held)-1]
	m.mu.Unlock()
	return errors.Join(m.unlock(ctx, outcomes)...)
}

// unlock unlocks the locks that were taken and returns their errors. A lock
// whose TryLock failed gets a courtesy unlock, as Redlock asks, because a
// lost reply may have hidden that it was taken — unless it cleans up after
// itself, or an older acquisition holds it. Courtesy errors are ignored:
// we hold nothing there that we know of, and such a lock expires anyway.
func (m *multiLock) unlock(ctx context.Context, outcomes []outcome) []error {
	m.mu.Lock()
	heldElsewhere := m.heldCounts()
	m.mu.Unlock()
	var errs []error
	for i, got := range outcomes {
		_, cleans := m.locks[i].(selfCleaning)
		switch {
		case got == taken:
			if err := m.locks[i].Unlock(ctx); err != nil {
				errs = append(errs, fmt.Errorf("lock: unlock lock %d: %w", i, err))
			}
		case got == failed && !cleans && heldElsewhere[i] == 0:
			_ = m.locks[i].Unlock(ctx)
		}
	}
	return errs
}

// heldCounts returns per lock how many acquisitions hold it. m.mu must be held.
func (m *multiLock) heldCounts() []int {
	counts := make([]int, len(m.locks))
	for _, outcomes := range m.held {
		for i, got := range outcomes {
			if got == taken {
				counts[i]++
			}
		}
	}
	return counts
}
