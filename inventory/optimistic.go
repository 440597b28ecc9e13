package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/orders"
)

// optimisticRedisStage is 乐观锁 on Redis: WATCH the stock, GET it, do the
// business work, and write the new stock and the sold units in a
// MULTI/EXEC that Redis refuses when the stock changed since the WATCH.
// A refused sale is not retried (as 黑马点评's version check is not): under
// contention most sales are refused, and a run that ends with buyers turned
// away and stock left has sold too little (少卖).
type optimisticRedisStage struct{ *orderSeller }

func (s *optimisticRedisStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *optimisticRedisStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if _, err := s.stockOf(ctx, sku); err != nil { // gives a never-reset SKU its stock
		return Sale{}, err
	}
	k := s.store.keys(sku)
	var remaining int64
	err := s.store.rdb.Watch(ctx, func(tx *redis.Tx) error {
		stock, err := tx.Get(ctx, k.stock()).Int64()
		if err != nil {
			return unavailable("get stock", err)
		}
		if stock < qty {
			return ErrSoldOut
		}
		if err := s.work(ctx, ctx, f); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k.stock(), stock-qty, 0)
			p.IncrBy(ctx, k.sold(), qty)
			return nil
		})
		switch {
		case errors.Is(err, redis.TxFailedErr):
			return err
		case err != nil:
			return writeFailed("commit watched stock", err)
		}
		remaining = stock - qty
		return nil
	}, k.stock())
	switch {
	case errors.Is(err, redis.TxFailedErr):
		s.countConflict(ctx, sku)
		return Sale{}, fmt.Errorf("%w: optimistic lock: the stock changed after the WATCH, nothing sold", ErrLockBusy)
	case errors.Is(err, ErrSoldOut) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLockBusy):
		return Sale{}, err
	case err != nil:
		return Sale{}, unavailable("watch stock", err)
	}
	return s.placeAfterDeduction(ctx, s.newOrder(sku, user, qty, false), remaining, f)
}

// optimisticSQLStage keeps the stock in the order database, as 黑马点评
// does: SELECT the stock, do the business work, then INSERT the order and
// UPDATE the stock under cond in one transaction (orders.Store.Buy).
// SameStock (WHERE stock = the stock read, the version check) refuses
// every sale that raced another and undersells; EnoughStock (WHERE stock
// >= qty) is the fix. The order and the units move together, so nothing
// is ever taken without an order.
type optimisticSQLStage struct {
	*orderSeller
	cond orders.Condition
}

func (s *optimisticSQLStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *optimisticSQLStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	st, err := s.stockRow(ctx, sku)
	if err != nil {
		return Sale{}, err
	}
	if st.Stock < qty {
		return Sale{}, ErrSoldOut
	}
	if err := s.work(ctx, ctx, f); err != nil {
		return Sale{}, err
	}
	if err := s.crashBeforeOrder(ctx, f); err != nil {
		return Sale{}, err
	}
	o := s.newOrder(sku, user, qty, false)
	remaining, err := s.orders.Buy(ctx, o, s.cond, st.Stock)
	switch {
	case errors.Is(err, orders.ErrConflict):
		s.countConflict(ctx, sku)
		return Sale{}, fmt.Errorf("%w: optimistic lock: %w", ErrLockBusy, err)
	case errors.Is(err, orders.ErrSoldOut):
		return Sale{}, ErrSoldOut
	case err != nil:
		return Sale{}, ordersUnavailable("buy", err)
	}
	return Sale{Remaining: remaining, Order: o.ID}, nil
}

// stockRow reads sku's stock row, giving a never-reset SKU its default.
func (s *optimisticSQLStage) stockRow(ctx context.Context, sku string) (orders.Stock, error) {
	st, err := s.orders.Stock(ctx, s.id, sku)
	if errors.Is(err, orders.ErrNoStock) {
		if err := s.orders.Initialise(ctx, s.id, sku, s.defaultStock); err != nil {
			return orders.Stock{}, ordersUnavailable("initialise stock", err)
		}
		st, err = s.orders.Stock(ctx, s.id, sku)
	}
	if err != nil {
		return orders.Stock{}, ordersUnavailable("read stock", err)
	}
	return st, nil
}

func (s *optimisticSQLStage) reset(ctx context.Context, sku string, stock int64, _ int) error {
	if err := s.store.rdb.Del(ctx, s.store.keys(sku).conflicts()).Err(); err != nil {
		return unavailable("reset conflicts", err)
	}
	if err := s.orders.Reset(ctx, s.id, sku, stock); err != nil {
		return ordersUnavailable("reset", err)
	}
	return nil
}

func (s *optimisticSQLStage) audit(ctx context.Context, sku string) (Audit, error) {
	st, err := s.stockRow(ctx, sku)
	if err != nil {
		return Audit{}, err
	}
	c, err := s.orders.Counts(ctx, s.id, sku)
	if err != nil {
		return Audit{}, ordersUnavailable("count orders", err)
	}
	return s.withOrders(ctx, sku, auditOf(Counts{Initial: st.Initial, Stock: st.Stock, Sold: c.Units}, nil), c)
}
