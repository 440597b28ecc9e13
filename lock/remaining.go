package lock

import (
	"context"
	"time"
)

// holdKey is the key under which a held context answers its hold.
type holdKey struct{}

// Remaining reports how much longer the lock behind held (a held context
// from LockContext or TryLockContext, or one derived from it) is certainly
// held in Redis, as this process knows it: from when the request that
// acquired, extended or last renewed it was sent, plus its lease. It is 0
// once the hold ended, and ok is false for a context that is not a held
// context of this package.
//
// The held context ends when that time is up, but a holder checks it and
// then writes: a holder paused between the two (a GC pause, a starved
// scheduler) writes after its lock may have passed to another. Work that
// must not outlive the lock can demand a margin before its write, which
// narrows that gap to pauses longer than the margin; only a fencing token
// checked by the store (FencedMutex) closes it.
func Remaining(held context.Context) (left time.Duration, ok bool) {
	h, ok := held.Value(holdKey{}).(*hold)
	if !ok {
		return 0, false
	}
	if !h.alive() || held.Err() != nil {
		return 0, true
	}
	return max(time.Until(time.Unix(0, h.certain.Load())), 0), true
}
