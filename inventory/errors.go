package inventory

import "errors"

var (
	// ErrSoldOut: the stock (every segment of it, for segmented) has fewer
	// units than the sale asked for.
	ErrSoldOut = errors.New("inventory: sold out")
	// ErrLockBusy: a fail-fast lock was held by another owner, or the wait
	// budget ran out, or the lock was lost before the stock write. Nothing was
	// sold.
	ErrLockBusy = errors.New("inventory: lock busy")
	// ErrUnavailable: Redis did not answer (down, timed out, or refused).
	// Whether a sale whose write timed out happened is unknown; the audit stays
	// consistent either way because the write is one transaction.
	ErrUnavailable = errors.New("inventory: redis unavailable")
	// ErrInvalid: a request argument is out of range.
	ErrInvalid = errors.New("inventory: invalid argument")
	// ErrUnknownStage: no stage has that id.
	ErrUnknownStage = errors.New("inventory: unknown stage")
	// ErrStageUnavailable: the stage exists but this shop cannot run it
	// (redlock without three Redis masters).
	ErrStageUnavailable = errors.New("inventory: stage unavailable")
	// ErrCrashed is returned, after the exit function, by a sale that
	// simulated a crash while holding its lock. With os.Exit it is never seen;
	// with an injected exit (tests) the lock stays held, as after kill -9.
	ErrCrashed = errors.New("inventory: crashed while holding the lock")
)
