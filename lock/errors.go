package lock

import "errors"

var (
	// ErrNotHeld is returned by Unlock when the caller does not hold the lock:
	// it never took it, already released it, or lost it to expiry.
	ErrNotHeld = errors.New("lock: not held by this owner")
	// ErrLockBusy is returned by fail-fast acquisitions when another owner
	// holds the lock.
	ErrLockBusy = errors.New("lock: held by another owner")
	// ErrLockLost is the cause of a held context's cancellation when the
	// watchdog found the lock gone or could not renew it before it expired.
	ErrLockLost = errors.New("lock: lost")
	// ErrReleased is the cause of a held context's cancellation after Unlock.
	ErrReleased = errors.New("lock: released")
	// ErrClosed is returned by a closed Client, and is the cause of a held
	// context's cancellation when its Client is closed.
	ErrClosed = errors.New("lock: client closed")
	// ErrForeignUnlock is returned by ExpiringLock.Unlock when its plain delete
	// removed a lock that another owner had taken after ours expired.
	ErrForeignUnlock = errors.New("lock: deleted a lock held by another owner")
	// ErrNotReplicated is returned when WithWaitReplicas is set and too few
	// replicas confirmed the acquisition in time; the lock is released.
	ErrNotReplicated = errors.New("lock: acquisition not confirmed by enough replicas")
	// ErrCounterMoving is returned by a FencedMutex's TryLock without a
	// wait for a free lock while its Redis Cluster slot migrates and its
	// fencing counter has not moved yet to the importing master, the only
	// node that may create the lock then: taking a token there would start
	// the tokens over. Try again: it succeeds once the counter moved (or
	// the slot). A waiting acquisition waits for that instead.
	ErrCounterMoving = errors.New("lock: fencing counter not yet moved with the migrating slot; try again")
)

// ErrInvalidPermits is returned by a Semaphore or PermitExpirableSemaphore
// call given a number of permits it cannot take or give: less than one.
var ErrInvalidPermits = errors.New("lock: number of permits must be at least 1")

// ErrPermitNotHeld is returned by PermitExpirableSemaphore's Release when
// the permit is not taken: released already, its lease ended, or never
// taken.
var ErrPermitNotHeld = errors.New("lock: permit not held")

// ErrInvalidLease is returned by a PermitExpirableSemaphore call given a
// lease that is not positive.
var ErrInvalidLease = errors.New("lock: lease must be positive")
