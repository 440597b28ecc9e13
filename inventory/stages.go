package inventory

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/orders"
	"github.com/redis/go-redis/v9"
)

// releaseTimeout bounds the unlock after a sale; it runs on a context
// detached from the request so a client hanging up does not leave the lock.
const releaseTimeout = time.Second

// crashExitCode is the status a crash-while-holding exit reports: the
// status a shell shows for kill -9.
const crashExitCode = 137

// Sale is a successful deduction.
type Sale struct {
	Remaining int64 // stock left in the SKU
	Segment   *int  // the segment that sold (segmented only)
	// Segments are the segments a sale no segment could serve alone took
	// its units from (segmented only; Segment is nil then).
	Segments []int
	// SegmentRemaining is the stock left in the segment that sold
	// (segmented only).
	SegmentRemaining *int64
	// Order is the id of the sale's order (order stages only).
	Order string
}

// Audit is the accounting of one SKU of one stage, read from Redis, so it
// is the same whichever replica answers.
type Audit struct {
	Counts
	Oversold   int64    `json:"oversold"`   // max(0, sold - initial)
	Consistent bool     `json:"consistent"` // stock + sold == initial
	Segments   []Counts `json:"segments,omitempty"`
	// MaxHolders is the most sales seen inside the critical section at once
	// (the track_holders fault); absent when none was counted.
	MaxHolders *int64 `json:"max_holders,omitempty"`
	// Orders are the orders of an order stage, with the undersold units.
	Orders *OrderCounts `json:"orders,omitempty"`
	// Stream is an async stage's order stream.
	Stream *asyncorders.Stats `json:"stream,omitempty"`
	// Payments are an async stage's payment states, when payments are on.
	Payments *orders.PaymentCounts `json:"payments,omitempty"`
}

func auditOf(c Counts, segments []Counts) Audit {
	return Audit{
		Counts:     c,
		Oversold:   max(0, c.Sold-c.Initial),
		Consistent: c.Stock+c.Sold == c.Initial,
		Segments:   segments,
	}
}

// stage is one implementation of the progression.
type stage interface {
	deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error)
	reset(ctx context.Context, sku string, stock int64, segments int) error
	audit(ctx context.Context, sku string) (Audit, error)
}

// seller is what every stage's sale path shares: the store, the faults, and
// the lock bookkeeping.
type seller struct {
	id           string
	store        store
	faults       *faultBook
	obs          Observer
	log          *slog.Logger
	exit         func(code int)
	pause        func()
	holders      *holders
	defaultStock int64
	lockWait     time.Duration // a reset's wait for the sale in flight
}

// lockKey is the key of tag's lock.
func (s *seller) lockKey(tag string) string { return s.store.keys(tag).lock() }

// acquire takes g's lock of tag and records the wait and its outcome.
func (s *seller) acquire(ctx context.Context, g guard, tag string, f Faults) (context.Context, func(context.Context) error, error) {
	start := time.Now()
	held, release, err := g.acquire(ctx, s.lockKey(tag), f)
	result := LockAcquired
	switch {
	case errors.Is(err, ErrLockBusy):
		result = LockBusy
	case err != nil:
		result = LockError
	}
	s.obs.LockAcquire(s.id, time.Since(start), result)
	return held, release, err
}

// crashIfArmed exits the process while it holds tag's lock when this
// replica claims the stage's armed crash fault. ErrCrashed (an injected exit
// returned) leaves the lock held, as kill -9 would; on any other error the
// lock is released.
func (s *seller) crashIfArmed(ctx context.Context, tag string, f Faults, release func(context.Context) error) error {
	if !f.CrashHoldingLock {
		return nil
	}
	claimed, err := s.faults.claim(ctx, s.id, crashFault)
	if err != nil {
		s.release(ctx, tag, release)
		return err
	}
	if !claimed {
		return nil
	}
	s.log.Error("crash_holding_lock fault: exiting while holding the lock", "stage", s.id)
	s.exit(crashExitCode)
	return ErrCrashed
}

// pauseIfArmed stops the process right before the stock write when this
// replica claims the stage's armed pause fault; it returns once something
// continued the process.
func (s *seller) pauseIfArmed(ctx context.Context, f Faults) error {
	if !f.PauseBeforeWrite {
		return nil
	}
	claimed, err := s.faults.claim(ctx, s.id, pauseFault)
	if err != nil || !claimed {
		return err
	}
	s.log.Warn("pause_before_write fault: stopping before the stock write", "stage", s.id)
	s.pause()
	s.log.Warn("pause_before_write fault: continued", "stage", s.id)
	return nil
}

// enterHeld counts the sale among tag's holders when the stage tracks them;
// the returned function uncounts it.
func (s *seller) enterHeld(ctx context.Context, tag string, f Faults) (leave func(), err error) {
	if !f.TrackHolders {
		return func() {}, nil
	}
	if err := s.holders.enter(ctx, tag); err != nil {
		return nil, err
	}
	return func() { s.holders.leave(ctx, tag) }, nil
}

// release unlocks after a sale and counts a deleted foreign lock.
func (s *seller) release(ctx context.Context, tag string, release func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := release(ctx)
	switch {
	case err == nil:
	case errors.Is(err, lock.ErrForeignUnlock):
		s.obs.ForeignUnlock(s.id)
		if err := s.store.countForeignUnlock(ctx, tag); err != nil {
			s.log.Warn("count foreign unlock", "stage", s.id, "err", err)
		}
	case errors.Is(err, lock.ErrNotHeld):
		// Expired (or reset) during the sale: the stage's defect, seen in the audit.
		s.log.Debug("unlock: lock no longer held", "stage", s.id, "tag", tag)
	default:
		s.log.Warn("unlock", "stage", s.id, "tag", tag, "err", err)
	}
}

// readModifyWrite is the articles' sale: GET the stock, do the business
// work, SET the new stock (with INCRBY sold, in one transaction). It gives
// up before the write when held says the lock was lost.
func (s *seller) readModifyWrite(ctx, held context.Context, tag string, qty int64, f Faults, stock int64) (int64, error) {
	if stock < qty {
		return 0, ErrSoldOut
	}
	if err := s.work(ctx, held, f); err != nil {
		return 0, err
	}
	if err := s.store.commit(ctx, tag, stock-qty, qty); err != nil {
		return 0, err
	}
	return stock - qty, nil
}

// fencedReadModifyWrite is readModifyWrite with the hold's fencing token
// checked at the read, which moves tag's fence to this sale, and at the
// write, refused (errFenced, nothing written) once a newer holder read: a
// holder that lost its lock without knowing cannot write a stale read back.
// Each sale also names itself on the fence, since a failover can hand one
// token to two holders.
func (s *seller) fencedReadModifyWrite(ctx, held context.Context, tag string, qty int64, f Faults, token int64) (int64, error) {
	holder := rand.Text()
	stock, err := s.initialised(ctx, tag, func() (int64, error) { return s.store.fencedStock(ctx, tag, token, holder) })
	if err != nil {
		return 0, err
	}
	if stock < qty {
		return 0, ErrSoldOut
	}
	if err := s.work(ctx, held, f); err != nil {
		return 0, err
	}
	if err := s.store.fencedCommit(ctx, tag, stock-qty, qty, token, holder); err != nil {
		return 0, err
	}
	return stock - qty, nil
}

// work is what a sale does between its read and its write: the business
// work, the pause fault, and the last checks that the lock is still held
// and the buyer still waits.
func (s *seller) work(ctx, held context.Context, f Faults) error {
	if err := sleep(held, f.workTime()); err != nil {
		return heldError(ctx, err)
	}
	if held.Err() != nil {
		return heldError(ctx, context.Cause(held))
	}
	if err := leaseLeftToWrite(held, f); err != nil {
		return heldError(ctx, err)
	}
	if err := s.pauseIfArmed(ctx, f); err != nil {
		return err
	}
	return beforeWrite(ctx)
}

// leaseLeftToWrite refuses a write under a lock with less than a renewal
// interval (a third) of its lease certainly left: a holder starved between
// this check and its write (a loaded machine stalls a process for tens of
// milliseconds) would write after its lock passed to another and lose
// another sale's update. Renewals on time keep two thirds or more left. A
// longer stall still gets through: that is the pause fault's lesson, which
// only the fencing token closes. A sale across segments checks each lock
// (whileAllHeld).
func leaseLeftToWrite(held context.Context, f Faults) error {
	holds, ok := held.Value(allHeldKey{}).([]context.Context)
	if !ok {
		holds = []context.Context{held}
	}
	need := f.lockTTL(watchdogTimeout) / 3
	for _, h := range holds {
		if left, ok := lock.Remaining(h); ok && left < need {
			return fmt.Errorf("%v of the lock's lease left, less than the %v a write needs", left.Round(time.Millisecond), need)
		}
	}
	return nil
}

// heldError explains why a sale stopped before its write: the request
// ended, or the lock was lost.
func heldError(ctx context.Context, cause error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: request ended during the sale: %w", ErrLockBusy, context.Cause(ctx))
	}
	return fmt.Errorf("%w: lock lost before the stock write, nothing sold: %w", ErrLockBusy, cause)
}

// stockOf reads tag's stock, giving a never-reset SKU its default stock.
func (s *seller) stockOf(ctx context.Context, tag string) (int64, error) {
	return s.initialised(ctx, tag, func() (int64, error) { return s.store.stock(ctx, tag) })
}

// initialised runs op, and once more after giving tag its default stock
// when op found that tag has none yet.
func (s *seller) initialised(ctx context.Context, tag string, op func() (int64, error)) (int64, error) {
	n, err := op()
	if !errors.Is(err, errNoStock) {
		return n, err
	}
	if err := s.store.initialise(ctx, tag, s.defaultStock); err != nil {
		return 0, err
	}
	return op()
}

func (s *seller) resetSKU(ctx context.Context, sku string, stock int64, dropLock bool, also ...func(redis.Pipeliner)) error {
	if err := s.store.reset(ctx, sku, stock, dropLock, also...); err != nil {
		return err
	}
	return s.holders.reset(ctx, sku)
}

// resetPoll spaces a reset's attempts at a fail-fast lock.
const resetPoll = 10 * time.Millisecond

// quiesce takes tag's lock with g for a reset, so that no sale is inside
// its critical section while the stock is rewritten (it would write its
// stale read into the new stock, or sell into a segment the reset drops).
// It waits at most wait; a lock still taken then was left by a holder that
// crashed (setnx, mysql) or hangs, and the reset drops it, as a reset
// always did: taken is false then. release gives the lock back.
func (s *seller) quiesce(ctx context.Context, g guard, tag string, wait time.Duration) (taken bool, release func(), err error) {
	deadline := time.Now().Add(wait)
	for {
		_, unlock, err := g.acquire(ctx, s.lockKey(tag), Faults{})
		switch {
		case err == nil:
			return true, func() { s.release(ctx, tag, unlock) }, nil
		case !errors.Is(err, ErrLockBusy):
			return false, nil, err
		case time.Now().After(deadline):
			s.log.Warn("reset: lock still taken, dropping it", "stage", s.id, "tag", tag, "waited", wait)
			return false, func() {}, nil
		}
		if err := sleep(ctx, resetPoll); err != nil {
			return false, nil, unavailable("reset", err)
		}
	}
}

func (s *seller) auditSKU(ctx context.Context, sku string) (Audit, error) {
	c, err := s.store.counts(ctx, sku, s.defaultStock)
	if err != nil {
		return Audit{}, err
	}
	a := auditOf(c, nil)
	if a.MaxHolders, err = s.holders.max(ctx, sku); err != nil {
		return Audit{}, err
	}
	return a, nil
}

// guardedStage is every stage with the read-modify-write under a guard:
// naive (none), synchronized (process mutex), setnx, setnx-expire, uuid-lua,
// watchdog and redlock.
type guardedStage struct {
	*seller
	guard guard
	// locking is false for naive, which has no lock to measure.
	locking bool
	// crashes is true for the stages whose lock lives in Redis, where a
	// crash while holding it means something.
	crashes bool
	// dropLocks deletes the lock of a SKU on reset where it lives outside
	// the stock's Redis (redlock, mysql, etcd), when the reset could not
	// take it.
	dropLocks func(ctx context.Context, key string) error
	// stocks spares the GET of a sale passed the lock within one hold.
	stocks heldStock
}

func (s *guardedStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	var (
		held    context.Context
		release func(context.Context) error
		err     error
	)
	if s.locking {
		held, release, err = s.acquire(ctx, s.guard, sku, f)
	} else {
		held, release, err = s.guard.acquire(ctx, s.lockKey(sku), f)
	}
	if err != nil {
		return Sale{}, err
	}
	if s.crashes {
		if err := s.crashIfArmed(ctx, sku, f, release); err != nil {
			return Sale{}, err
		}
	}
	defer s.release(ctx, sku, release)
	leave, err := s.enterHeld(ctx, sku, f)
	if err != nil {
		return Sale{}, err
	}
	defer leave() // before the release
	if token, fenced := fencingTokenOf(held); fenced {
		remaining, err := s.fencedReadModifyWrite(ctx, held, sku, qty, f, token)
		return Sale{Remaining: remaining}, err
	}
	stock, cached := s.stocks.get(held, sku)
	if !cached {
		if stock, err = s.stockOf(ctx, sku); err != nil {
			return Sale{}, err
		}
		s.stocks.put(held, sku, stock)
	}
	remaining, err := s.readModifyWrite(ctx, held, sku, qty, f, stock)
	switch {
	case errors.Is(err, ErrSoldOut):
		return Sale{}, err
	case err != nil:
		s.stocks.forget(sku) // the commit may have run
		return Sale{}, err
	}
	s.stocks.put(held, sku, remaining)
	return Sale{Remaining: remaining}, nil
}

func (s *guardedStage) reset(ctx context.Context, sku string, stock int64, _ int) error {
	taken, release, err := s.quiesce(ctx, s.guard, sku, s.lockWait)
	if err != nil {
		return err
	}
	defer release()
	defer s.stocks.forget(sku) // under the lock when taken
	if err := s.resetSKU(ctx, sku, stock, !taken); err != nil {
		return err
	}
	if s.dropLocks != nil && !taken {
		return s.dropLocks(ctx, s.lockKey(sku))
	}
	return nil
}

func (s *guardedStage) audit(ctx context.Context, sku string) (Audit, error) {
	return s.auditSKU(ctx, sku)
}

// atomicStage checks and deducts in one Lua script: no lock, no race, and
// the throughput ceiling of the workshop.
type atomicStage struct{ *seller }

func (s *atomicStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	if err := workThenWrite(ctx, f); err != nil {
		return Sale{}, err
	}
	deduct := func() (int64, error) { return s.store.atomicDeduct(ctx, sku, qty) }
	if a, ok := admissionOf(ctx); ok {
		deduct = func() (int64, error) { return s.store.atomicDeductAdmitted(ctx, sku, qty, a) }
	}
	remaining, err := s.initialised(ctx, sku, deduct)
	if err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining}, nil
}

func (s *atomicStage) reset(ctx context.Context, sku string, stock int64, _ int) error {
	return s.resetSKU(ctx, sku, stock, true) // its one script is atomic with the reset
}

func (s *atomicStage) audit(ctx context.Context, sku string) (Audit, error) {
	return s.auditSKU(ctx, sku)
}
