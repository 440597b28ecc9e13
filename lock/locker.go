package lock

import (
	"context"
	"time"
)

// Locker is what every lock of this package offers, and what MultiLock and
// RedLock combine.
type Locker interface {
	// Lock waits until the lock is acquired or ctx is done. A watchdog keeps
	// the lock until Unlock.
	Lock(ctx context.Context) error
	// TryLock waits at most wait for the lock (0: a single attempt). With
	// lease > 0 the lock expires after lease unless released; with lease 0 a
	// watchdog keeps it until Unlock. It reports false when the wait ran out.
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	// Unlock releases one level of the lock; ErrNotHeld when this owner does
	// not hold it.
	Unlock(ctx context.Context) error
}
