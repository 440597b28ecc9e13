package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/orders"
)

// saleLease is how long a semaphore-expirable sale holds its permits
// before its order is written; the insert gets half of it.
const saleLease = time.Second

// semaphoreExpirableStage is the semaphore rung done right: the stock is a
// PermitExpirableSemaphore's permits, one semaphore per reset round (so a
// reset sets the new stock, and the permits of sales still in flight from
// the last round never come back into it). A sale leases its permits for
// saleLease, inserts its order, then consumes them: the permits leave the
// semaphore for good, in one script (lock's Consume). A sale killed
// before its insert loses no unit:
// its permits come back when their lease ends (no undersell).
//
// Its limit is the lease: an insert must end within it. The insert's
// deadline is half the lease, and one that fails is voided before its
// permits go back; an insert whose void cannot be confirmed may still
// land after its permits came back, and sell them twice.
type semaphoreExpirableStage struct {
	*orderSeller
	clients *lockClients
}

// roundSemaphore is the name of sku's semaphore in round.
func (k stockKeys) roundSemaphore(round int64) string {
	return string(k) + "semaphore:" + strconv.FormatInt(round, 10)
}

func (s *semaphoreExpirableStage) semaphore(ctx context.Context, sku string) (*lock.PermitExpirableSemaphore, int64, error) {
	c, err := s.clients.get(clientOptions{watchdogTimeout: watchdogTimeout})
	if err != nil {
		return nil, 0, err
	}
	round, err := s.roundOf(ctx, sku)
	if err != nil {
		return nil, 0, err
	}
	return c.PermitExpirableSemaphore(s.store.keys(sku).roundSemaphore(round)), round, nil
}

func (s *semaphoreExpirableStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *semaphoreExpirableStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if err := workThenWrite(ctx, f); err != nil {
		return Sale{}, err
	}
	sem, round, err := s.semaphore(ctx, sku)
	if err != nil {
		return Sale{}, err
	}
	o := s.newOrder(orders.NewID(), sku, user, qty, false)
	o.Round = round
	leased := time.Now()
	ids, ok, err := sem.TryAcquireN(ctx, int(qty), 0, saleLease)
	if err != nil {
		return Sale{}, unavailable("semaphore acquire", err)
	}
	if !ok {
		return Sale{}, ErrSoldOut
	}
	if err := s.crashBeforeOrder(ctx, f); err != nil {
		return Sale{}, err
	}
	if err := s.insertLeased(ctx, sem, ids, o, leased.Add(saleLease/2)); err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: permitsLeft(ctx, sem.AvailablePermits), Order: o.ID}, nil
}

// insertLeased inserts o, whose units are the leased permits ids, by
// deadline, and consumes the permits once it stands. An insert that fails
// is voided, then its permits are given back; one that cannot be voided
// leaves them to their lease's end.
func (s *semaphoreExpirableStage) insertLeased(ctx context.Context, sem *lock.PermitExpirableSemaphore, ids []string, o orders.Order, deadline time.Time) error {
	insertCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := s.orders.Insert(insertCtx, o)
	if err == nil {
		s.consume(ctx, sem, ids)
		return nil
	}
	voidCtx, cancelVoid := context.WithTimeout(context.WithoutCancel(ctx), voidTimeout)
	defer cancelVoid()
	why := ordersUnavailable("insert order (voided, its permits given back)", err)
	if errors.Is(err, orders.ErrStaleRound) {
		why = fmt.Errorf("%w: the stage was reset during the sale, nothing sold: %w", ErrLockBusy, err)
	} else {
		switch verr := s.orders.Void(voidCtx, o); {
		case errors.Is(verr, orders.ErrOrdered): // the insert landed; only its reply was lost
			s.consume(ctx, sem, ids)
			return nil
		case verr != nil:
			return ordersUnknown("insert order (not voided: its permits come back at their lease's end, and the order may still land)", errors.Join(err, verr))
		}
	}
	for _, id := range ids {
		if rerr := sem.Release(voidCtx, id); rerr != nil && !errors.Is(rerr, lock.ErrPermitNotHeld) {
			s.log.Warn("give a permit back (it comes back at its lease's end)", "stage", s.id, "err", rerr)
		}
	}
	return why
}

// consume takes the permits of a written order out of the semaphore for
// good, in one step (lock's Consume): the permits available never read
// fewer than there are, which AddPermits(-n) then Release of each did
// between the two (a buyer who tried then was refused, and with every
// buyer trying once a unit went unsold). A permit whose lease ended
// before is back on sale: it is taken out now (a unit sold beside its
// order until then, as the stage's limit says). A failure leaves the
// permits to come back at their lease's end: a unit then on sale again
// beside its order (logged).
func (s *semaphoreExpirableStage) consume(ctx context.Context, sem *lock.PermitExpirableSemaphore, ids []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	n, err := sem.Consume(ctx, ids...)
	if err != nil {
		s.log.Error("consume permits: the units come back on sale at their lease's end", "stage", s.id, "err", err)
		return
	}
	if back := len(ids) - n; back > 0 {
		s.log.Warn("consume permits: a lease ended before its order stood; its unit was on sale again", "stage", s.id, "permits", back)
		if err := sem.AddPermits(ctx, -back); err != nil {
			s.log.Error("consume permits: take out those whose lease ended", "stage", s.id, "err", err)
		}
	}
}

// reset moves the SKU's round on (orderSeller.reset) and sets the new
// round's semaphore, which does not exist yet, to stock. The last round's
// semaphore is left with its permits: nothing sells from it any more.
func (s *semaphoreExpirableStage) reset(ctx context.Context, sku string, stock int64, segments int) error {
	if err := s.orderSeller.reset(ctx, sku, stock, segments); err != nil {
		return err
	}
	sem, _, err := s.semaphore(ctx, sku)
	if err != nil {
		return err
	}
	if _, err := sem.TrySetPermits(ctx, int(stock)); err != nil {
		return unavailable("semaphore trySetPermits", err)
	}
	return nil
}

func (s *semaphoreExpirableStage) audit(ctx context.Context, sku string) (Audit, error) {
	sem, _, err := s.semaphore(ctx, sku)
	if err != nil {
		return Audit{}, err
	}
	return s.permitAudit(ctx, sku, sem.AvailablePermits)
}
