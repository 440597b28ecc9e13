package inventory

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/orders"
)

// semaphoreStage is 谷粒商城's 秒杀 on a Redisson RSemaphore, as the
// course writes it: the stock is loaded into the SKU's semaphore with
// trySetPermits when the sale is set up (the reset), a sale is
// tryAcquire(qty) with no wait, then the order is inserted (here
// synchronously, where the course sends it to a queue). Its two pitfalls
// show in a run:
//   - trySetPermits does nothing once the semaphore exists, so a reset
//     that changes the stock is ignored: the sales go on against the
//     permits the last run left (more than the new stock: oversold);
//   - nothing gives a permit back: a sale that dies between its acquire
//     and its insert (the crash step), or whose insert fails, leaves a
//     unit neither sold nor on sale (undersold).
type semaphoreStage struct {
	*orderSeller
	clients *lockClients
}

// semaphore is the name of sku's semaphore, under the SKU's hash tag.
func (k stockKeys) semaphore() string { return string(k) + "semaphore" }

func (s *semaphoreStage) client() (*lock.Client, error) {
	return s.clients.get(clientOptions{watchdogTimeout: watchdogTimeout})
}

func (s *semaphoreStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *semaphoreStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if err := workThenWrite(ctx, f); err != nil {
		return Sale{}, err
	}
	c, err := s.client()
	if err != nil {
		return Sale{}, err
	}
	o := s.newOrder(orders.NewID(), sku, user, qty, false)
	if o.Round, err = s.roundOf(ctx, sku); err != nil {
		return Sale{}, err
	}
	sem := c.Semaphore(s.store.keys(sku).semaphore())
	ok, err := sem.TryAcquire(ctx, int(qty), 0)
	if err != nil {
		return Sale{}, unavailable("semaphore acquire", err)
	}
	if !ok {
		return Sale{}, ErrSoldOut
	}
	if err := s.crashBeforeOrder(ctx, f); err != nil {
		return Sale{}, err
	}
	if err := s.orders.Insert(ctx, o); err != nil {
		return Sale{}, ordersUnavailable("insert order (its permit is not given back: undersold)", err)
	}
	return Sale{Remaining: permitsLeft(ctx, sem.AvailablePermits), Order: o.ID}, nil
}

// roundOf is sku's reset round, which the order carries so that an order
// of an earlier round is refused (orders/doc.go, "Resets").
func (s *orderSeller) roundOf(ctx context.Context, sku string) (int64, error) {
	round, err := s.store.rdb.Get(ctx, s.store.keys(sku).round()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable("read round", err)
	}
	return round, nil
}

// permitsLeft is what a sale answers as the stock left: the permits
// available, or 0 when they cannot be read (the sale stands).
func permitsLeft(ctx context.Context, available func(context.Context) (int, error)) int64 {
	n, err := available(ctx)
	if err != nil {
		return 0
	}
	return int64(max(n, 0))
}

// reset is the sale's set-up: the order half as every order stage's, and
// trySetPermits(stock), which an existing semaphore ignores.
func (s *semaphoreStage) reset(ctx context.Context, sku string, stock int64, segments int) error {
	if err := s.orderSeller.reset(ctx, sku, stock, segments); err != nil {
		return err
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	set, err := c.Semaphore(s.store.keys(sku).semaphore()).TrySetPermits(ctx, int(stock))
	if err != nil {
		return unavailable("semaphore trySetPermits", err)
	}
	if !set {
		s.log.Warn("reset: trySetPermits ignored, the semaphore exists (the course's pitfall)", "stage", s.id, "sku", sku, "stock", stock)
	}
	return nil
}

func (s *semaphoreStage) audit(ctx context.Context, sku string) (Audit, error) {
	c, err := s.client()
	if err != nil {
		return Audit{}, err
	}
	return s.permitAudit(ctx, sku, c.Semaphore(s.store.keys(sku).semaphore()).AvailablePermits)
}

// permitAudit is the audit of a stage whose stock is a semaphore's
// permits: the stock is the permits available, and sold the units in
// orders, against the stock the last reset asked for.
func (s *orderSeller) permitAudit(ctx context.Context, sku string, available func(context.Context) (int, error)) (Audit, error) {
	counts, err := s.store.counts(ctx, sku, s.defaultStock)
	if err != nil {
		return Audit{}, err
	}
	n, err := available(ctx)
	if err != nil {
		return Audit{}, unavailable("read permits", err)
	}
	oc, err := s.orders.Counts(ctx, s.id, sku)
	if err != nil {
		return Audit{}, ordersUnavailable("count orders", err)
	}
	a := auditOf(Counts{Initial: counts.Initial, Stock: int64(n), Sold: oc.Units}, nil)
	if a.MaxHolders, err = s.holders.max(ctx, sku); err != nil {
		return Audit{}, err
	}
	return s.withOrders(ctx, sku, a, oc)
}
