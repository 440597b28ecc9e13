package asyncorders

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/slotretry"
	"github.com/lockstep/lockstep/orders"
)

// Account is where one SKU's units are, each counted once even while a
// sweeper cancels (see doc.go, "The audit while the sweeper works"): on
// sale (Remaining), in a live order (Orders.Units), or Returning: in an
// order the sweeper cancelled whose units are not back on sale yet.
type Account struct {
	Initial   int64
	Remaining int64
	Sold      int64
	Orders    orders.Counts
	Returning int64
}

// Missing are the units in none of the three places: sold too little (少卖)
// when positive, too much when negative.
func (a Account) Missing() int64 {
	return a.Initial - a.Remaining - a.Orders.Units - a.Returning
}

// Account reads sku's units: Redis first (the stock and the order ids
// whose units went back, in one MULTI: compensate.lua changes both at
// once), then the order database (payments' ledger, the live orders and
// the cancelled ones in one snapshot; with payments nil, the live orders,
// as nothing is ever cancelled). A cancelled order counts as Returning
// when its id was not in the compensated set at the Redis read.
func (q *Queue) Account(ctx context.Context, store orders.Store, payments *orders.Payments, sku string) (Account, error) {
	k := q.keys(sku)
	var counts *redis.SliceCmd
	var back *redis.StringSliceCmd
	err := slotretry.DoErr(ctx, func() error {
		_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			counts = p.MGet(ctx, k.initial(), k.stock(), k.sold())
			back = p.SMembers(ctx, k.compensated())
			return nil
		})
		return err
	})
	if err != nil {
		return Account{}, unavailable("read stock and returns", err)
	}
	var a Account
	if err := parseInts(counts.Val(), &a.Initial, &a.Remaining, &a.Sold); err != nil {
		return Account{}, fmt.Errorf("asyncorders: %s: %w", sku, err)
	}
	if q.betweenAccountReads != nil {
		q.betweenAccountReads()
	}
	if payments == nil {
		if a.Orders, err = store.Counts(ctx, q.stage, sku); err != nil {
			return Account{}, fmt.Errorf("asyncorders: count orders: %w", err)
		}
		return a, nil
	}
	l, err := payments.Ledger(ctx, q.stage, sku)
	if err != nil {
		return Account{}, fmt.Errorf("asyncorders: read the order ledger: %w", err)
	}
	a.Orders = l.Counts
	returned := make(map[string]bool, len(back.Val()))
	for _, id := range back.Val() {
		returned[id] = true
	}
	for id, qty := range l.Cancelled {
		if !returned[id] {
			a.Returning += qty
		}
	}
	return a, nil
}

// parseInts reads an MGET's answers into into; ErrNoStock when the SKU
// has none.
func parseInts(vals []any, into ...*int64) error {
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return ErrNoStock
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("asyncorders: counter %d holds %q: %w", i, s, err)
		}
		*into[i] = n
	}
	return nil
}
