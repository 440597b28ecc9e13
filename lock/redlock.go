package lock

import "time"

// NewRedLock returns a lock held when a majority (n/2+1) of locks is taken
// within the wait budget: Redisson's RedissonRedLock, after the Redlock
// algorithm. Each lock should live on an independent Redis master (no
// replication between them), so the lock survives the loss of a minority of
// masters.
//
// Each lock gets max(remaining/n, 1 ms) of the remaining wait budget
// (Redisson's calcLockWaitTime), so one busy or slow master cannot spend the
// whole budget; a lock whose TryLock errors counts as not taken. An
// unreachable master costs what its client's dial and read timeouts allow,
// so keep them short. With lease > 0 the lock is valid for lease minus the
// time the acquisition took, and an acquisition left with no validity is
// released and fails. Unlock releases the locks it took and also unlocks the
// other masters, ignoring what they answer, in case a lost reply hid a lock
// that was taken there. Lock and the failure paths behave as in
// NewMultiLock.
func NewRedLock(locks ...Locker) Locker {
	n := len(locks)
	return &multiLock{
		locks:  locks,
		quorum: n/2 + 1,
		lockWait: func(remaining time.Duration) time.Duration {
			return max(remaining/time.Duration(n), time.Millisecond)
		},
	}
}
