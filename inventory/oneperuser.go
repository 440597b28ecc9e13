package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// onePerUserStage is 黑马点评's 一人一单 in code: under guard (none, a
// process-local mutex per buyer, or the library's watchdog Mutex per
// buyer), ask the order table whether the buyer has an order, do the
// business work, deduct with atomic's script, insert the order. Its orders
// leave the unique index unused (orders/doc.go), so what keeps a buyer to
// one order is the guard alone, and a guard that does not hold shows as
// duplicate orders.
type onePerUserStage struct {
	*orderSeller
	guard guard
}

func (s *onePerUserStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *onePerUserStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if user == "" {
		return Sale{}, errNoBuyer(s.id)
	}
	acquire := s.acquire // records the lock's wait and outcome
	if _, none := s.guard.(noGuard); none {
		acquire = func(ctx context.Context, g guard, tag string, f Faults) (context.Context, func(context.Context) error, error) {
			return g.acquire(ctx, s.lockKey(tag), f) // naive takes no lock to measure
		}
	}
	held, release, err := acquire(ctx, s.guard, sku+":buyer:"+user, f)
	if err != nil {
		return Sale{}, err
	}
	hold := &guardHold{release: func() { s.release(ctx, sku, release) }}
	defer hold.releaseUnlessKept()
	bought, err := s.orders.HasOrder(ctx, s.id, sku, user)
	if err != nil {
		return Sale{}, ordersUnavailable("find the buyer's order", err)
	}
	if bought {
		return Sale{}, fmt.Errorf("%w: %s has an order of %s", ErrAlreadyBought, user, sku)
	}
	if err := s.work(ctx, held, f); err != nil {
		return Sale{}, err
	}
	return s.byGeneration(ctx, sku, func(id string) (Sale, error) {
		o := s.newOrder(id, sku, user, qty, false)
		remaining, err := s.initialised(ctx, sku, func() (int64, error) { return s.deductForOrder(ctx, &o) })
		if err != nil {
			return Sale{}, err
		}
		return s.placeAfterDeduction(ctx, placing{order: o, proof: byTakenSet, hold: hold}, remaining, f)
	})
}

// errNoBuyer is the answer of a per-user stage to a sale naming no buyer.
func errNoBuyer(stage string) error {
	return fmt.Errorf("%w: stage %s sells one per buyer: name the buyer (user)", ErrInvalid, stage)
}

// keyedLocalGuard is Java's synchronized(userId.intern()): one mutex per
// key in this process, dropped when nobody holds or waits for it.
type keyedLocalGuard struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
	wait  time.Duration
}

type keyedLock struct {
	sem   chan struct{}
	users int // holders and waiters
}

func newKeyedLocalGuard(wait time.Duration) *keyedLocalGuard {
	return &keyedLocalGuard{locks: make(map[string]*keyedLock), wait: wait}
}

func (g *keyedLocalGuard) acquire(ctx context.Context, key string, _ Faults) (context.Context, func(context.Context) error, error) {
	g.mu.Lock()
	l, ok := g.locks[key]
	if !ok {
		l = &keyedLock{sem: make(chan struct{}, 1)}
		g.locks[key] = l
	}
	l.users++
	g.mu.Unlock()
	done := func() {
		g.mu.Lock()
		if l.users--; l.users == 0 {
			delete(g.locks, key)
		}
		g.mu.Unlock()
	}
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case l.sem <- struct{}{}:
		return ctx, func(context.Context) error { <-l.sem; done(); return nil }, nil
	case <-timer.C:
		done()
		return nil, nil, fmt.Errorf("%w: process mutex of %s not free within %v", ErrLockBusy, key, g.wait)
	case <-ctx.Done():
		done()
		return nil, nil, fmt.Errorf("%w: %w", ErrLockBusy, context.Cause(ctx))
	}
}

// onePerUserLuaStage checks the stock and the buyer, deducts and records
// the buyer in one script, then inserts the order with the buyer in the
// unique index: the index is the backstop, and a refusal there gives the
// units back and answers already bought, never a 500.
type onePerUserLuaStage struct{ *orderSeller }

func (s *onePerUserLuaStage) deduct(ctx context.Context, sku string, qty int64, f Faults) (Sale, error) {
	return s.sell(ctx, sku, "", qty, f)
}

func (s *onePerUserLuaStage) sell(ctx context.Context, sku, user string, qty int64, f Faults) (Sale, error) {
	if user == "" {
		return Sale{}, errNoBuyer(s.id)
	}
	if err := workThenWrite(ctx, f); err != nil {
		return Sale{}, err
	}
	return s.byGeneration(ctx, sku, func(id string) (Sale, error) {
		o := s.newOrder(id, sku, user, qty, true)
		remaining, err := s.initialised(ctx, sku, func() (int64, error) { return s.take(ctx, &o) })
		if err != nil {
			return Sale{}, err
		}
		return s.placeAfterDeduction(ctx, placing{order: o, proof: byBuyer}, remaining, f)
	})
}

// take runs one_per_user.lua for o (takeByID) and records the round it
// took the units in.
func (s *onePerUserLuaStage) take(ctx context.Context, o *orders.Order) (int64, error) {
	k := s.store.keys(o.SKU)
	keys := []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round()}
	res, err := s.takeByID(ctx, "one-per-user deduct", onePerUserScript, keys, []any{o.Qty, o.User, o.ID}, *o, byBuyer)
	if err != nil {
		return 0, err
	}
	o.Round = res[1]
	switch n := res[0]; n {
	case -1:
		return 0, ErrSoldOut
	case -2:
		return 0, errNoStock
	case -3:
		return 0, fmt.Errorf("%w: %s is among the buyers of %s", ErrAlreadyBought, o.User, o.SKU)
	case -4:
		return 0, errVoidedID
	default:
		return n, nil
	}
}
