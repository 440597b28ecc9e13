package inventory

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/orders"
)

// asyncStage is 黑马点评's 秒杀优化: one script checks the stock and the
// buyer, deducts, adds the buyer and enqueues the order message on a Redis
// Stream (package asyncorders); the sale answers with the order id at once,
// and the order workers (cmd/orderworker) write the order later. The
// async-two-steps rung enqueues in a second call, with the crash fault's
// window between the two; the other rungs differ in their workers only.
type asyncStage struct {
	*orderSeller
	queue    *asyncorders.Queue
	twoSteps bool
	// payments, when the order table has them, are the orders' payment
	// states (the payment-timeout scenario); nil, orders need no payment.
	payments *orders.Payments
}

func (s *asyncStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *asyncStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if user == "" {
		return Sale{}, errNoBuyer(s.id)
	}
	m := asyncorders.Message{OrderID: orders.NewID(), SKU: sku, User: user, Qty: qty, Replica: s.replica}
	a, err := s.queue.Admit(ctx, m, !s.twoSteps)
	if errors.Is(err, asyncorders.ErrNoStock) {
		if err := s.initialise(ctx, sku); err != nil {
			return Sale{}, err
		}
		a, err = s.queue.Admit(ctx, m, !s.twoSteps)
	}
	if err != nil {
		return Sale{}, asyncFailed(err)
	}
	if s.twoSteps {
		if err := s.crashBeforeOrder(ctx, f); err != nil {
			return Sale{}, err
		}
		if err := s.queue.Enqueue(ctx, m, a); err != nil {
			return Sale{}, asyncFailed(err)
		}
	}
	return Sale{Remaining: a.Remaining, Order: a.OrderID}, nil
}

// asyncFailed maps the queue's errors onto the inventory's.
func asyncFailed(err error) error {
	switch {
	case errors.Is(err, asyncorders.ErrSoldOut):
		return ErrSoldOut
	case errors.Is(err, asyncorders.ErrAlreadyBought):
		return errors.Join(ErrAlreadyBought, err)
	case errors.Is(err, asyncorders.ErrOutcomeUnknown):
		return errors.Join(ErrUnavailable, ErrOutcomeUnknown, err)
	}
	return errors.Join(ErrUnavailable, err)
}

// initialise gives sku, which Redis has no stock of (never reset, or
// Redis lost its data), the default stock in the order table's round: the
// round Redis lost, so that the entries admitted next land (asyncorders,
// "Rounds"). While the table does not answer, the sale answers 503: in a
// lower round its order would never land.
func (s *asyncStage) initialise(ctx context.Context, sku string) error {
	floor, err := s.orders.Round(ctx, s.id, sku)
	if err != nil {
		return ordersUnavailable("read the round", err)
	}
	if err := s.queue.Initialise(ctx, sku, s.defaultStock, floor); err != nil {
		return asyncFailed(err)
	}
	return nil
}

// reset resets the Redis side (stock, buyers, stream), which moves the
// SKU's round on, then the order table (and the payments, in the same
// transaction) into that round, as the synchronous order stages do
// (orderSeller.reset): an entry of the round before never lands as an
// order (its units were in the stock the reset replaced), and one
// admitted between the two resets waits, pending, until the table is in
// its round (asyncorders, "Rounds"). A reset that fails between the two
// stores holds every new order back until it is sent again. Redis's new
// round is past the table's (the floor, read first), also when Redis lost
// its round: the table never refuses it as a late reset's.
func (s *asyncStage) reset(ctx context.Context, sku string, stock int64, _ int) error {
	floor, err := s.orders.Round(ctx, s.id, sku)
	if err != nil {
		return ordersUnavailable("read the round", err)
	}
	round, err := s.queue.Reset(ctx, sku, stock, floor)
	if err != nil {
		return asyncFailed(err)
	}
	if s.payments != nil {
		err = s.payments.Reset(ctx, s.id, sku, stock, round)
	} else {
		err = s.orders.Reset(ctx, s.id, sku, stock, round)
	}
	if err != nil {
		return ordersUnavailable("reset orders", err)
	}
	return nil
}

// audit is the order stages' audit with the stream's figures beside it:
// undersold counts the units admitted whose order no worker wrote yet, so
// it holds at 0 only once the stream is drained (Stream.Drained). The
// stream is read first: a stream read drained after the orders were
// counted would vouch for orders the count missed. The units are read as
// asyncorders.Queue.Account reads them, so a sweeper's cancel read before
// its unit's return counts that unit once, as returning.
func (s *asyncStage) audit(ctx context.Context, sku string) (Audit, error) {
	st, err := s.queue.Stats(ctx, sku)
	if errors.Is(err, asyncorders.ErrNoStock) {
		// As every stage's audit does: a SKU never reset starts with the
		// default stock (the metrics audit the default SKU before any run).
		if err := s.initialise(ctx, sku); err != nil {
			return Audit{}, err
		}
		st, err = s.queue.Stats(ctx, sku)
	}
	if err != nil {
		return Audit{}, asyncFailed(err)
	}
	acc, err := s.queue.Account(ctx, s.orders, s.payments, sku)
	switch {
	case errors.Is(err, orders.ErrUnavailable):
		return Audit{}, ordersUnavailable("count orders", err)
	case err != nil:
		return Audit{}, asyncFailed(err)
	}
	a := auditOf(Counts{Initial: acc.Initial, Stock: acc.Remaining, Sold: acc.Sold}, nil)
	if a.MaxHolders, err = s.holders.max(ctx, sku); err != nil {
		return Audit{}, err
	}
	if a, err = s.withOrders(ctx, sku, a, acc.Orders); err != nil {
		return Audit{}, err
	}
	a.Orders.Returning, a.Orders.Undersold = acc.Returning, acc.Missing()
	a.Stream = &st
	if s.payments != nil {
		pc, err := s.payments.Counts(ctx, s.id, sku)
		if err != nil {
			return Audit{}, ordersUnavailable("count payments", err)
		}
		a.Payments = &pc
	}
	return a, nil
}

// addAsyncStages adds the async stages: their workers are other processes.
func (inv *Inventory) addAsyncStages(seller func(id string) *orderSeller) {
	for _, id := range asyncorders.Stages() {
		inv.stages[id] = &asyncStage{orderSeller: seller(id), queue: asyncorders.NewQueue(inv.cfg.Redis, id),
			twoSteps: id == asyncorders.StageTwoSteps, payments: inv.cfg.Payments}
	}
}

// Pay pays user's order id of an async stage: nil when it is paid (now or
// before: a replay answers the same), orders.ErrCancelled when the sweeper
// cancelled it first, orders.ErrNoOrder when user has no order of that id.
func (inv *Inventory) Pay(ctx context.Context, id, user string) error {
	if err := errors.Join(validateOrderID(id), validateUser(user)); err != nil {
		return err
	}
	if user == "" {
		return fmt.Errorf("%w: name the buyer (user)", ErrInvalid)
	}
	s, _ := inv.stages[asyncorders.StageStream].(*asyncStage)
	if s == nil || s.payments == nil {
		return fmt.Errorf("%w: payments need an order database in SQL (--mysql-dsn or --orders-sqlite)", ErrStageUnavailable)
	}
	err := s.payments.Pay(ctx, id, user)
	if errors.Is(err, orders.ErrUnavailable) {
		return ordersUnavailable("pay", err)
	}
	return err
}

// validateOrderID reports an id NewID cannot have made.
func validateOrderID(id string) error {
	if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
		return fmt.Errorf("%w: order id must be 32 hex digits", ErrInvalid)
	}
	return nil
}
