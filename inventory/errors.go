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
	// Nothing was sold, unless the error also wraps ErrOutcomeUnknown.
	// The lock servers' errors wrap it too, with their own name below.
	ErrUnavailable = errors.New("inventory: redis unavailable")
	// ErrMySQLUnavailable, ErrEtcdUnavailable and ErrZooKeeperUnavailable:
	// the lock server of the mysql, etcd or zookeeper stage did not answer.
	// Each is an ErrUnavailable (errors.Is) whose message names its server.
	ErrMySQLUnavailable     error = serverUnavailable("mysql")
	ErrEtcdUnavailable      error = serverUnavailable("etcd")
	ErrZooKeeperUnavailable error = serverUnavailable("zookeeper")
	// ErrOrdersUnavailable: the order database (MySQL or the embedded
	// SQLite file; the wrapped error names which) did not answer. An
	// ErrUnavailable too; what the sale left behind is in its message (see
	// orderSeller.insert).
	ErrOrdersUnavailable error = serverUnavailable("orders")
	// ErrOutcomeUnknown: the stock write was sent but no answer came back (a
	// timeout, a dropped connection), so the sale may have happened. The
	// audit stays consistent either way: the write is one transaction. Every
	// error without it means nothing was sold.
	ErrOutcomeUnknown = errors.New("inventory: outcome of the stock write unknown")
	// ErrAlreadyBought: the buyer has an order of the SKU on a stage that
	// allows one per buyer (一人一单). Nothing was sold.
	ErrAlreadyBought = errors.New("inventory: buyer already bought")
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

// serverUnavailable is ErrUnavailable for a lock server other than Redis.
type serverUnavailable string

func (s serverUnavailable) Error() string        { return "inventory: " + string(s) + " unavailable" }
func (s serverUnavailable) Is(target error) bool { return target == ErrUnavailable }
