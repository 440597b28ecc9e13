package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/orders"
)

// optimisticRedisStage is 乐观锁 on Redis: WATCH the stock, GET it, do the
// business work, and write the new stock and the sold units in a
// MULTI/EXEC that Redis refuses when the stock changed since the WATCH;
// the MULTI also records the sale's order id in the taken set, by which a
// lost EXEC reply is resolved (undoLostExec).
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
	o := s.newOrder(orders.NewID(), sku, user, qty, false)
	var execLost error // the EXEC was sent and its reply lost
	err := s.store.rdb.Watch(ctx, func(tx *redis.Tx) error {
		// The round with the stock, in one read: a reset changes both, and
		// fails the EXEC.
		vals, err := tx.MGet(ctx, k.stock(), k.round()).Result()
		if err != nil {
			return unavailable("get stock", err)
		}
		stock, round, err := stockAndRound(vals)
		if err != nil {
			return unavailable("get stock", err)
		}
		o.Round = round
		if stock < qty {
			return ErrSoldOut
		}
		if err := s.work(ctx, ctx, f); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k.stock(), stock-qty, 0)
			p.IncrBy(ctx, k.sold(), qty)
			// The sale's mark: what a lost EXEC reply is resolved by.
			p.SAdd(ctx, k.taken(), o.ID)
			return nil
		})
		switch {
		case errors.Is(err, redis.TxFailedErr):
			return err
		case err != nil:
			if outcome.MayHaveRunErr(err) {
				execLost = err
			}
			return writeFailed("commit watched stock", err)
		}
		remaining = stock - qty
		return nil
	}, k.stock(), k.givenBack()) // a give-back of the sale's id fails an EXEC still on its way
	switch {
	case execLost != nil:
		return Sale{}, s.undoLostExec(ctx, o, execLost)
	case errors.Is(err, redis.TxFailedErr):
		s.countConflict(ctx, sku)
		return Sale{}, fmt.Errorf("%w: optimistic lock: the stock changed after the WATCH, nothing sold", ErrLockBusy)
	case errors.Is(err, ErrSoldOut) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLockBusy):
		return Sale{}, err
	case err != nil:
		return Sale{}, unavailable("watch stock", err)
	}
	return s.placeAfterDeduction(ctx, placing{order: o}, remaining, f)
}

// undoLostExec resolves a sale whose EXEC ran or not, its reply lost: the
// give-back of its order id (give_back.lua, proof "taken") returns the
// units when the EXEC's mark shows it ran, and marks the id given back
// either way, which fails an EXEC still on its way (the sale WATCHes the
// given-back ids). Sent again until Redis answers within the sale's
// deadline, it answers "nothing sold"; after the deadline the sale's
// outcome is unknown, and the resolver gives back once Redis answers.
func (s *optimisticRedisStage) undoLostExec(ctx context.Context, o orders.Order, lost error) error {
	_, undoCtx, cancel := splitDeadline(ctx)
	defer cancel()
	for wait := rerunWait; ; wait = min(2*wait, rerunWaitMax) {
		err := s.giveBack(undoCtx, o, byTakenSet)
		if err == nil {
			return unavailable("commit watched stock (its reply was lost; undone: nothing sold)", lost)
		}
		if sleep(undoCtx, wait) != nil {
			s.handOver(undoCtx, placing{order: o, proof: byTakenSet}.owed(false), nil)
			return fmt.Errorf("%w (the shop gives the units back, if the EXEC ran, once Redis answers)", writeFailed("commit watched stock", lost))
		}
	}
}

// stockAndRound reads an MGET of the stock and the round (absent: 0).
func stockAndRound(vals []any) (stock, round int64, err error) {
	str, _ := vals[0].(string)
	if stock, err = strconv.ParseInt(str, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stock %q: %w", str, err)
	}
	if str, ok := vals[1].(string); ok {
		if round, err = strconv.ParseInt(str, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("round %q: %w", str, err)
		}
	}
	return stock, round, nil
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
	return s.byGeneration(ctx, sku, func(id string) (Sale, error) {
		o := s.newOrder(id, sku, user, qty, false)
		remaining, err := s.buy(ctx, o, st.Stock)
		switch {
		case errors.Is(err, orders.ErrVoided):
			return Sale{}, fmt.Errorf("%w: %w", errVoidedID, err) // an earlier request with this key voided this id: it sold nothing
		case errors.Is(err, orders.ErrConflict):
			s.countConflict(ctx, sku)
			return Sale{}, fmt.Errorf("%w: optimistic lock: %w", ErrLockBusy, err)
		case errors.Is(err, orders.ErrSoldOut):
			return Sale{}, ErrSoldOut
		case errors.Is(err, ErrOrdersUnavailable):
			return Sale{}, err // buy's own account of what the sale left behind
		case err != nil:
			return Sale{}, ordersUnavailable("buy", err)
		}
		return Sale{Remaining: remaining, Order: o.ID}, nil
	})
}

// buy runs Buy for o, again with the same id while its outcome is unknown
// (a Buy that committed finds its own row and takes nothing more), until
// it answers or the sale's deadline nears. Once an attempt's outcome was
// unknown, the sale only answers "nothing sold" after voiding o: that
// attempt may still be on its way, and the void keeps it from ever
// committing (or finds that it did, and the sale sold). A sale that cannot
// void before its deadline answers that its outcome is unknown, and the
// resolver voids o later.
func (s *optimisticSQLStage) buy(ctx context.Context, o orders.Order, read int64) (int64, error) {
	insertCtx, voidCtx, cancel := splitDeadline(ctx)
	defer cancel()
	// The first attempt runs on insertCtx: without a sale deadline that is
	// ctx itself, which database/sql and the driver need not watch (a
	// cancellable context costs a goroutine per transaction and a hand-off
	// per statement, +15-20 % CPU per sale); the re-sends get rerunWindow.
	buyCtx := insertCtx
	var unknown, refused error
	for wait := rerunWait; ; wait = min(2*wait, rerunWaitMax) {
		remaining, err := s.orders.Buy(buyCtx, o, s.cond, read)
		if !errors.Is(err, orders.ErrUnavailable) {
			if err == nil || unknown == nil {
				return remaining, err
			}
			refused = err // refused now; the unknown attempt may still commit
			break
		}
		if unknown == nil {
			var stop context.CancelFunc
			buyCtx, stop = rerunWindow(insertCtx)
			defer stop()
		}
		unknown = err
		if sleep(buyCtx, wait) != nil {
			break
		}
	}
	switch verr := s.orders.Void(voidCtx, o); {
	case verr == nil && refused != nil:
		return 0, refused
	case verr == nil:
		return 0, ordersUnavailable("buy (voided, nothing sold)", unknown)
	case errors.Is(verr, orders.ErrOrdered):
		// An attempt committed; sent again, Buy finds its row and reads the stock.
		remaining, err := s.orders.Buy(voidCtx, o, s.cond, read)
		if err != nil {
			remaining = read - o.Qty // the stock as this sale read it
		}
		return remaining, nil
	default:
		s.resolveOrder(voidCtx, placing{order: o, stockInOrders: true})
		return 0, ordersUnknown("buy (not voided: it may have committed; the shop voids it when the database answers)", errors.Join(unknown, verr))
	}
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
	if err := s.orders.Reset(ctx, s.id, sku, stock, 0); err != nil {
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
