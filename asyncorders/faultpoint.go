package asyncorders

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/orders"
)

// FaultPoint names a moment of a worker's batch where a fault can strike
// it (Config.FaultHook). What the worker leaves pending differs by point,
// so a test or the workshop that makes it die there knows what to expect.
type FaultPoint string

const (
	// AfterRead: a read (XREADGROUP >) delivered new entries to the worker,
	// and it handled none of them yet: every entry it holds has no order
	// row.
	AfterRead FaultPoint = "after-read"
	// AfterInsert: a batch's order rows (or a lone entry's) are inserted
	// and none of its entries acknowledged: whoever takes them next inserts
	// them again and finds the rows (a duplicate delivery).
	AfterInsert FaultPoint = "after-insert"
	// AfterClaim: a claim (XAUTOCLAIM) moved idle entries to the worker,
	// and it handled none of them yet: they are pending under its name with
	// one more delivery, and the next claim takes them.
	AfterClaim FaultPoint = "after-claim"
	// AfterVoid: a give-up voided the entry's order id and did not run
	// compensate.lua yet: the entry is pending, its order never lands, and
	// its units are not back until whoever takes it next finishes the
	// give-up.
	AfterVoid FaultPoint = "after-void"
)

// FaultPoints lists the fault points.
func FaultPoints() []FaultPoint { return []FaultPoint{AfterRead, AfterInsert, AfterClaim, AfterVoid} }

// ParseFaultPoint is the fault point named s.
func ParseFaultPoint(s string) (FaultPoint, error) {
	for _, p := range FaultPoints() {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("fault point %q: want one of %v", s, FaultPoints())
}

// Held is an entry a consumer read and has not acknowledged.
type Held struct {
	Entry string
	// OrderID is the entry's order id ("" for an entry without one, or one
	// trimmed from the stream).
	OrderID    string
	Deliveries int64
}

// maxHeld bounds what HeldBy lists: far more than a worker's batch.
const maxHeld = 1000

// HeldBy lists the entries consumer holds on sku's stream (its part of
// XPENDING) with their order ids: after a worker died, what it left for a
// claim or for its restart.
func (q *Queue) HeldBy(ctx context.Context, sku, consumer string) ([]Held, error) {
	stream := q.Stream(sku)
	pending, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group,
		Start: "-", End: "+", Count: maxHeld, Consumer: consumer}).Result()
	if err != nil {
		return nil, unavailable("read "+consumer+"'s pending entries", err)
	}
	held := make([]Held, 0, len(pending))
	for _, p := range pending {
		msgs, err := q.rdb.XRangeN(ctx, stream, p.ID, p.ID, 1).Result()
		if err != nil {
			return nil, unavailable("read pending entry "+p.ID, err)
		}
		h := Held{Entry: p.ID, Deliveries: p.RetryCount}
		if len(msgs) == 1 {
			// A malformed entry names no order: OrderID stays empty.
			if m, err := parse(sku, p.ID, msgs[0].Values); err == nil {
				h.OrderID = m.OrderID
			}
		}
		held = append(held, h)
	}
	return held, nil
}

// Written counts the held entries whose order is among written: entries a
// worker inserted and did not acknowledge.
func Written(held []Held, written []orders.Order) int64 {
	var n int64
	for _, h := range held {
		if slices.ContainsFunc(written, func(o orders.Order) bool { return o.ID == h.OrderID }) {
			n++
		}
	}
	return n
}
