package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/orders"
)

var (
	onePerUserScript = loadScript("one_per_user.lua")
	giveBackScript   = loadScript("give_back.lua")
)

// voidTimeout bounds the void and give-back after an order insert failed;
// they run on a context detached from the request, whose deadline may be
// what failed the insert.
const voidTimeout = time.Second

// buyerStage is a stage whose sale becomes an order of a named buyer.
type buyerStage interface {
	stage
	sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error)
}

// orderSeller is what the order stages share: the seller of the lock
// stages, the order table, and the keys of the buyers and of the units
// given back beside the SKU's stock.
type orderSeller struct {
	*seller
	orders  orders.Store
	replica string
}

func (k stockKeys) buyers() string    { return string(k) + "buyers" }
func (k stockKeys) givenBack() string { return string(k) + "given-back" }
func (k stockKeys) conflicts() string { return string(k) + "conflicts" }

// newOrder names the order of a sale before anything is sent, so that every
// attempt to write it names the same row.
func (s *orderSeller) newOrder(sku, user string, qty int64, onePerUser bool) orders.Order {
	return orders.Order{
		ID: orders.NewID(), Stage: s.id, SKU: sku, User: user, Qty: qty,
		Replica: s.replica, Created: time.Now(), OnePerUser: onePerUser,
	}
}

// crashBeforeOrder exits the process between the Redis deduction and the
// order insert when this replica claims the stage's armed crash fault:
// the window every tutorial's code has.
func (s *orderSeller) crashBeforeOrder(ctx context.Context, f Faults) error {
	return s.crashIfArmed(ctx, "", f, func(context.Context) error { return nil })
}

// placeAfterDeduction places o, whose units the sale took from the Redis
// stock (remaining left), with the crash fault's window between the two.
func (s *orderSeller) placeAfterDeduction(ctx context.Context, o orders.Order, remaining int64, f Faults) (Sale, error) {
	if err := s.crashBeforeOrder(ctx, f); err != nil {
		return Sale{}, err
	}
	if err := s.place(ctx, o); err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining, Order: o.ID}, nil
}

// place inserts the order of units already taken from the Redis stock.
// When the insert fails the units go back, unless the order may exist: the
// id is voided first, so a late insert cannot land after the units went
// back. Only when the database cannot even be told to void do the units
// stay taken without an order, which the audit counts as undersold. The
// insert leaves part of the sale's deadline to the void and the give-back,
// so a sale whose database hangs still answers within its deadline.
func (s *orderSeller) place(ctx context.Context, o orders.Order) error {
	insertCtx, voidCtx, cancel := splitDeadline(ctx)
	defer cancel()
	err := s.orders.Insert(insertCtx, o)
	if err == nil {
		return nil
	}
	if errors.Is(err, orders.ErrDuplicateBuyer) {
		if gerr := s.giveBack(voidCtx, o); gerr != nil {
			return fmt.Errorf("%w: %w (units not given back: %w)", ErrAlreadyBought, err, gerr)
		}
		return fmt.Errorf("%w: the unique index refused the order: %w", ErrAlreadyBought, err)
	}
	switch verr := s.orders.Void(voidCtx, o); {
	case verr == nil:
		if gerr := s.giveBack(voidCtx, o); gerr != nil {
			return ordersUnavailable("insert order (voided; its units stay taken, undersold)", errors.Join(err, gerr))
		}
		return ordersUnavailable("insert order (voided, units given back)", err)
	case errors.Is(verr, orders.ErrOrdered):
		return nil // the insert landed; only its reply was lost
	default:
		return ordersUnavailable("insert order (not voided: the order may still land; until it does its units count as undersold)", errors.Join(err, verr))
	}
}

// splitDeadline gives the insert the sale's deadline less a reserve (half
// what is left, at most voidTimeout), and the void and give-back, on a
// context a client hanging up does not cancel, the whole of it; without a
// deadline the void gets voidTimeout.
func splitDeadline(ctx context.Context) (insert, void context.Context, cancel func()) {
	deadline, ok := ctx.Deadline()
	if !ok {
		void, cancelVoid := context.WithTimeout(context.WithoutCancel(ctx), voidTimeout)
		return ctx, void, cancelVoid
	}
	reserve := min(voidTimeout, time.Until(deadline)/2)
	insert, cancelInsert := context.WithDeadline(ctx, deadline.Add(-reserve))
	void, cancelVoid := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	return insert, void, func() { cancelInsert(); cancelVoid() }
}

// giveBack returns the units of an order that was never placed, once.
func (s *orderSeller) giveBack(ctx context.Context, o orders.Order) error {
	k := s.store.keys(o.SKU)
	err := s.store.run(ctx, giveBackScript, []string{k.stock(), k.sold(), k.buyers(), k.givenBack()}, o.Qty, o.User, o.ID).Err()
	if err != nil {
		return unavailable("give units back", err)
	}
	return nil
}

// countConflict records a sale an optimistic lock refused.
func (s *orderSeller) countConflict(ctx context.Context, sku string) {
	if err := s.store.rdb.Incr(ctx, s.store.keys(sku).conflicts()).Err(); err != nil {
		s.log.Warn("count conflict", "stage", s.id, "err", err)
	}
}

// reset resets the Redis stock, the buyers and the order table.
func (s *orderSeller) reset(ctx context.Context, sku string, stock int64, _ int) error {
	if err := s.resetSKU(ctx, sku, stock, true); err != nil {
		return err
	}
	k := s.store.keys(sku)
	if err := s.store.rdb.Del(ctx, k.buyers(), k.givenBack(), k.conflicts()).Err(); err != nil {
		return unavailable("reset buyers", err)
	}
	if err := s.orders.Reset(ctx, s.id, sku, stock); err != nil {
		return ordersUnavailable("reset orders", err)
	}
	return nil
}

// audit is the audit of a stage whose stock is in Redis, with its orders
// beside it: undersold are the units gone from the stock that no order
// holds.
func (s *orderSeller) audit(ctx context.Context, sku string) (Audit, error) {
	a, err := s.auditSKU(ctx, sku)
	if err != nil {
		return Audit{}, err
	}
	c, err := s.orders.Counts(ctx, s.id, sku)
	if err != nil {
		return Audit{}, ordersUnavailable("count orders", err)
	}
	return s.withOrders(ctx, sku, a, c)
}

// withOrders adds c, the orders of sku, and the conflicts to a.
func (s *orderSeller) withOrders(ctx context.Context, sku string, a Audit, c orders.Counts) (Audit, error) {
	conflicts, err := s.store.rdb.Get(ctx, s.store.keys(sku).conflicts()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Audit{}, unavailable("read conflicts", err)
	}
	a.Orders = &OrderCounts{
		Counts: c, DuplicateOrders: c.DuplicateOrders(),
		Undersold: a.Initial - a.Stock - c.Units, Conflicts: conflicts,
	}
	return a, nil
}

// OrderCounts is the order half of an order stage's audit.
type OrderCounts struct {
	orders.Counts
	// DuplicateOrders are the orders beyond each buyer's first.
	DuplicateOrders int64 `json:"duplicate_orders"`
	// Undersold (少卖) are units gone from the stock that no order holds:
	// initial - remaining - units ordered (- returning, async stages).
	Undersold int64 `json:"undersold"`
	// Returning (async stages with payments) are the units of orders the
	// sweeper cancelled that are not back on sale yet: the cancel and the
	// return are two steps (asyncorders' doc, "The audit while the sweeper
	// works").
	Returning int64 `json:"returning,omitempty"`
	// Conflicts are the sales an optimistic lock refused because the stock
	// changed after they read it.
	Conflicts int64 `json:"conflicts"`
}

// ordersUnavailable marks an error of the order database; err, the order
// store's error, names the store (mysql or sqlite).
func ordersUnavailable(op string, err error) error {
	return fmt.Errorf("inventory: %s: %w: %w", op, ErrOrdersUnavailable, err)
}
