package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/orders"
)

var (
	onePerUserScript  = loadScript("one_per_user.lua")
	orderDeductScript = loadScript("order_deduct.lua")
	giveBackScript    = loadScript("give_back.lua")
	roundResetScript  = loadScript("round_reset.lua")
)

// voidTimeout bounds the void and give-back after an order insert failed;
// they run on a context detached from the request, whose deadline may be
// what failed the insert.
const voidTimeout = time.Second

// rerunWait spaces the attempts of a sale that sends a write again with
// the same order id because the reply of the last was lost, doubling up to
// rerunWaitMax.
const (
	rerunWait    = 5 * time.Millisecond
	rerunWaitMax = 100 * time.Millisecond
)

// maxGenerations bounds the order ids one idempotency key goes through:
// each is voided before the next is used (orders.KeyedID).
const maxGenerations = 64

// errVoidedID: the sale's keyed order id was voided by an earlier request
// with the key, which therefore sold nothing; the sale goes on under the
// key's next id.
var errVoidedID = errors.New("inventory: the order id of this idempotency key was voided")

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
	// resolver finishes, in the background, the orders whose outcome a
	// sale could not learn before its deadline; pending keeps them in
	// Redis until then, for another replica should this one die.
	resolver *resolver
	pending  *pendingOrders
}

func (k stockKeys) buyers() string    { return string(k) + "buyers" }
func (k stockKeys) givenBack() string { return string(k) + "given-back" }
func (k stockKeys) conflicts() string { return string(k) + "conflicts" }
func (k stockKeys) taken() string     { return string(k) + "taken" }

// round is the SKU's reset round, which every reset of an order stage
// moves on: an order's insert lands only in the round its units were
// taken in (orders/doc.go, "Resets").
func (k stockKeys) round() string { return string(k) + "round" }

// newOrder names the order of a sale before anything is sent, so that every
// attempt to write it names the same row.
func (s *orderSeller) newOrder(id, sku, user string, qty int64, onePerUser bool) orders.Order {
	return orders.Order{
		ID: id, Stage: s.id, SKU: sku, User: user, Qty: qty,
		Replica: s.replica, Created: time.Now(), OnePerUser: onePerUser,
	}
}

// orderID is the order id of generation of a sale: derived from the
// client's idempotency key when the request has one (WithSaleKey), so that
// a request sent again finds the sale the first one started, else random.
// Every stage that uses it writes first with a script or a transaction
// that recognises its own order id (one_per_user.lua, order_deduct.lua,
// Buy): sent again, it takes nothing more.
func (s *orderSeller) orderID(ctx context.Context, sku string, generation int) string {
	if key, ok := saleKey(ctx); ok {
		return orders.KeyedID(s.id, sku, key, generation)
	}
	return orders.NewID()
}

// byGeneration runs sell under the sale's order id of each generation in
// turn while sell finds the id voided (errVoidedID: a request sent earlier
// with the key gave it up, so it sold nothing, and the key may sell once,
// under the next id). A sale without a key draws a fresh id each time.
func (s *orderSeller) byGeneration(ctx context.Context, sku string, sell func(id string) (Sale, error)) (Sale, error) {
	for generation := range maxGenerations {
		sale, err := sell(s.orderID(ctx, sku, generation))
		if !errors.Is(err, errVoidedID) {
			return sale, err
		}
	}
	return Sale{}, fmt.Errorf("%w: the sales of this idempotency key were voided %d times: use a new key", ErrInvalid, maxGenerations)
}

// ResumesKeyedSales reports whether stage's sales with an idempotency key
// name their order by the key (orderID), so that a request sent again
// with the key finishes the sale an earlier one started, or finds it
// voided and sells under the next id, and never sells twice: a request
// whose replica died may then be sent again (httpapi's idempotency takes
// such a key over instead of answering that its outcome is unknown).
func (inv *Inventory) ResumesKeyedSales(stage string) bool {
	switch inv.stages[stage].(type) {
	case *onePerUserStage, *onePerUserLuaStage, *optimisticSQLStage:
		return true
	}
	return false
}

// crashBeforeOrder exits the process between the Redis deduction and the
// order insert when this replica claims the stage's armed crash fault:
// the window every tutorial's code has.
func (s *orderSeller) crashBeforeOrder(ctx context.Context, f Faults) error {
	return s.crashIfArmed(ctx, "", f, func(context.Context) error { return nil })
}

// placing is an order whose units a sale took from the Redis stock (in
// order.Round), and how to give them back.
type placing struct {
	order orders.Order
	// proof is what shows, when the units go back, that the sale took them.
	proof takenProof
	// stockInOrders: the units moved with the order, in its transaction
	// (optimistic MySQL): a void leaves nothing to give back.
	stockInOrders bool
	// hold is the buyer's guard (nil: none); it is kept until the order's
	// outcome is known, so that the buyer's next sale cannot pass its check
	// while this order may still land.
	hold *guardHold
}

// takenProof is what give_back.lua reads to learn whether a sale took its
// units, and so whether it has any to give back.
type takenProof int

const (
	// byRound: the sale knows it took them, in order.Round (optimistic-redis).
	byRound takenProof = iota
	// byBuyer: the buyers hash holds the order id (one-per-user-lua).
	byBuyer
	// byTakenSet: order_deduct.lua's taken set holds the order id.
	byTakenSet
)

// guardHold is a guard's release that an order whose outcome is unknown
// takes over: the sale then leaves it held, and the resolver releases it.
type guardHold struct {
	release func()
	kept    bool
}

// keep hands the release over; the sale's own release does nothing then.
func (h *guardHold) keep() {
	if h != nil {
		h.kept = true
	}
}

// releaseUnlessKept is the sale's release, deferred.
func (h *guardHold) releaseUnlessKept() {
	if !h.kept {
		h.release()
	}
}

// done is the resolver's release of a kept guard.
func (h *guardHold) done() {
	if h != nil {
		h.release()
	}
}

// placeAfterDeduction places p, whose units the sale took from the Redis
// stock (remaining left), with the crash fault's window between the two.
func (s *orderSeller) placeAfterDeduction(ctx context.Context, p placing, remaining int64, f Faults) (Sale, error) {
	if err := s.crashBeforeOrder(ctx, f); err != nil {
		return Sale{}, err
	}
	if err := s.place(ctx, p); err != nil {
		return Sale{}, err
	}
	return Sale{Remaining: remaining, Order: p.order.ID}, nil
}

// place inserts the order of units already taken from the Redis stock.
// When the insert fails the units go back, unless the order may exist: the
// id is voided first, so a late insert cannot land after the units went
// back. When the database cannot be told to void before the sale's
// deadline, the sale answers that its outcome is unknown, and the resolver
// voids the id (or finds the order landed) and gives the units back later,
// holding the buyer's guard until then. The insert leaves part of the
// sale's deadline to the void and the give-back, so a sale whose database
// hangs still answers within its deadline.
func (s *orderSeller) place(ctx context.Context, p placing) error {
	insertCtx, voidCtx, cancel := splitDeadline(ctx)
	defer cancel()
	err := s.orders.Insert(insertCtx, p.order)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, orders.ErrDuplicateBuyer):
		return s.undo(voidCtx, p, fmt.Errorf("%w: the unique index refused the order: %w", ErrAlreadyBought, err))
	case errors.Is(err, orders.ErrStaleRound):
		return s.undo(voidCtx, p, fmt.Errorf("%w: the stage was reset during the sale, nothing sold: %w", ErrLockBusy, err))
	case errors.Is(err, orders.ErrVoided):
		return s.undo(voidCtx, p, fmt.Errorf("%w: %w", errVoidedID, err))
	}
	switch verr := s.orders.Void(voidCtx, p.order); {
	case verr == nil:
		return s.undo(voidCtx, p, ordersUnavailable("insert order (voided, nothing sold)", err))
	case errors.Is(verr, orders.ErrOrdered):
		return nil // the insert landed; only its reply was lost
	default:
		s.resolveOrder(voidCtx, p)
		return ordersUnknown("insert order (not voided: the order may still land; until the shop voids it or it lands, its units count as undersold)", errors.Join(err, verr))
	}
}

// undo gives back the units of p, whose order never stands, and answers
// why. A give-back that fails is handed to the resolver (it is the same
// when run twice), so the units return once Redis answers.
func (s *orderSeller) undo(ctx context.Context, p placing, why error) error {
	err := s.giveBack(ctx, p.order, p.proof)
	if err == nil {
		return why
	}
	s.handOver(ctx, p.owed(false), nil)
	return fmt.Errorf("%w (its units count as undersold until they go back, once Redis answers: %v)", why, err)
}

// resolveOrder hands p over to the resolver (handOver, on ctx: what is
// left of the sale's deadline): it voids the id until the void is
// confirmed — then no insert of it can land — and gives the units back,
// or finds the order inserted, which stands; then it releases the buyer's
// guard.
func (s *orderSeller) resolveOrder(ctx context.Context, p placing) {
	s.handOver(ctx, p.owed(true), p.hold)
}

// owed is the pending resolution of p: its void first when void.
func (p placing) owed(void bool) pendingEntry {
	return pendingEntry{
		Order: p.order, Round: p.order.Round, OnePerUser: p.order.OnePerUser,
		Void: void, Proof: p.proof, StockInOrders: p.stockInOrders,
	}
}

// splitDeadline gives the insert the sale's deadline less a reserve (half
// what is left, at most voidTimeout), and the void and give-back the whole
// of it (voidWindow).
func splitDeadline(ctx context.Context) (insert, void context.Context, cancel func()) {
	void, cancelVoid := voidWindow(ctx)
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, void, cancelVoid
	}
	insert, cancelInsert := context.WithDeadline(ctx, insertDeadline(deadline))
	return insert, void, func() { cancelInsert(); cancelVoid() }
}

// voidWindow is the context of a void and a give-back: the sale's whole
// deadline, or voidTimeout without one, on a context a client hanging up
// does not cancel.
func voidWindow(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), deadline)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), voidTimeout)
}

// rerunWindow bounds the attempts of a sale that sends a write again
// because its reply was lost: ctx's deadline, or voidTimeout without one.
func rerunWindow(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, voidTimeout)
}

// insertDeadline is the insert's share of a sale's deadline: all of it
// but a reserve for the void and the give-back (half what is left, at
// most voidTimeout).
func insertDeadline(deadline time.Time) time.Time {
	return deadline.Add(-min(voidTimeout, time.Until(deadline)/2))
}

// insertWindow is rerunWindow of splitDeadline's insert context, in one
// context: every sale's first write runs in it.
func insertWindow(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, insertDeadline(deadline))
	}
	return context.WithTimeout(ctx, voidTimeout)
}

// giveBack returns the units of an order that was never placed, once:
// those proof shows taken (the buyers hash, the taken set), or those taken
// in o.Round, unless a reset replaced that round's stock since.
func (s *orderSeller) giveBack(ctx context.Context, o orders.Order, proof takenProof) error {
	k := s.store.keys(o.SKU)
	taken := strconv.FormatInt(o.Round, 10)
	switch proof {
	case byBuyer:
		taken = "buyer"
	case byTakenSet:
		taken = "taken"
	}
	keys := []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round(), k.taken()}
	if err := s.store.run(ctx, giveBackScript, keys, o.Qty, o.User, o.ID, taken).Err(); err != nil {
		return unavailable("give units back", err)
	}
	return nil
}

// takeByID runs script, which takes o's units and recognises o's id (one
// run takes at most once per id, and takes nothing once the id was given
// back), until it answers: when its reply is lost it runs it again with
// the same id, until it answers or the insert's share of the sale's
// deadline ends. Then the sale's outcome is unknown, and the resolver
// voids the id and gives back whatever a run took (proof shows it), once
// the stores answer: the give-back marks the id, so a run still on its
// way takes nothing, and the void comes first because a keyed request
// sent again may have inserted the order under the same id (then the
// order stands, and nothing is given back). The reply is {n, round}: n as
// the script answers, round the SKU's.
func (s *orderSeller) takeByID(ctx context.Context, what string, script *redis.Script, keys []string, args []any, o orders.Order, proof takenProof) ([]int64, error) {
	runCtx, cancel := insertWindow(ctx)
	defer cancel()
	for wait := rerunWait; ; wait = min(2*wait, rerunWaitMax) {
		res, err := s.store.run(runCtx, script, keys, args...).Int64Slice()
		switch {
		case err == nil && len(res) != 2:
			return nil, unavailable(what, fmt.Errorf("reply %v", res))
		case err == nil:
			return res, nil
		}
		err = writeFailed(what, err)
		if !errors.Is(err, ErrOutcomeUnknown) {
			return nil, err // refused: it ran nothing
		}
		if sleep(runCtx, wait) != nil {
			voidCtx, cancelVoid := voidWindow(ctx)
			s.resolveOrder(voidCtx, placing{order: o, proof: proof})
			cancelVoid()
			return nil, fmt.Errorf("%w (the shop voids the order id and gives back what it may have taken once the stores answer)", err)
		}
	}
}

// deductForOrder takes o's units with order_deduct.lua, which records o's
// id with them, and records the round they were taken in: the remaining
// stock, ErrSoldOut or errNoStock.
func (s *orderSeller) deductForOrder(ctx context.Context, o *orders.Order) (int64, error) {
	k := s.store.keys(o.SKU)
	keys := []string{k.stock(), k.sold(), k.round(), k.taken(), k.givenBack()}
	res, err := s.takeByID(ctx, "order deduct", orderDeductScript, keys, []any{o.Qty, o.ID}, *o, byTakenSet)
	if err != nil {
		return 0, err
	}
	o.Round = res[1]
	switch res[0] {
	case -1:
		return 0, ErrSoldOut
	case -2:
		return 0, errNoStock
	case -4:
		return 0, errVoidedID // a fresh id never is: a defect
	}
	return res[0], nil
}

// countConflict records a sale an optimistic lock refused.
func (s *orderSeller) countConflict(ctx context.Context, sku string) {
	if err := s.store.rdb.Incr(ctx, s.store.keys(sku).conflicts()).Err(); err != nil {
		s.log.Warn("count conflict", "stage", s.id, "err", err)
	}
}

// reset resets the Redis stock, the buyers and the order table, and moves
// the SKU's round on in both stores: Redis's in the stock's transaction,
// then the order table's. A sale whose units came from the old stock is
// fenced out of the new round (its insert and its give-back write
// nothing); one that took from the new stock before the order table's
// round moved is refused there, and gives its units back. A reset that
// fails between the two stores refuses every order until it is sent again.
// The new round is above the order table's (round_reset.lua): a Redis that
// lost its keys counts again from 0, and its first reset heals it.
func (s *orderSeller) reset(ctx context.Context, sku string, stock int64, _ int) error {
	k := s.store.keys(sku)
	floor, err := s.orders.Round(ctx, s.id, sku)
	if err != nil {
		return ordersUnavailable("read the order table's round", err)
	}
	var round *redis.Cmd
	err = s.resetSKU(ctx, sku, stock, true, func(p redis.Pipeliner) {
		p.Del(ctx, k.buyers(), k.givenBack(), k.taken(), k.conflicts())
		// The source, not its SHA: a NOSCRIPT inside the transaction would
		// fail this command alone after the others ran.
		round = roundResetScript.Eval(ctx, p, []string{k.round()}, floor)
	})
	if err != nil {
		return err
	}
	newRound, err := round.Int64()
	if err != nil {
		return unavailable("reset round", err)
	}
	if err := s.orders.Reset(ctx, s.id, sku, stock, newRound); err != nil {
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

// ordersUnknown is ordersUnavailable for a sale that may have sold.
func ordersUnknown(op string, err error) error {
	return fmt.Errorf("inventory: %s: %w: %w: %w", op, ErrOrdersUnavailable, ErrOutcomeUnknown, err)
}
