package asyncorders

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
)

// A give-up of an entry whose order id was compensated before without it
// (by the sweeper, e.g. when the inserting worker died before its XACK and
// the order's payment expired before a claimer took the entry):
// compensate.lua returns nothing more, and acknowledges the entry every
// time, as its doc says; left pending it would be claimed for ever.
func TestACompensationRunAgainAcknowledgesTheEntry(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	q := NewQueue(rdb, "async-stream")
	k := q.keys("sku-1")
	if err := rdb.Set(ctx, k.stock(), 9, 0).Err(); err != nil {
		t.Fatal(err)
	}
	entry, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.stream(), Values: []any{"order", "x"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.XGroupCreate(ctx, k.stream(), Group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "w1", Streams: []string{k.stream(), ">"}}).Err(); err != nil {
		t.Fatal(err)
	}
	sweeper := compensation{mark: "order-1", reason: "payment expired", qty: 1, freeBuyer: "ann", fenced: true}
	if _, err := q.compensate(ctx, "sku-1", sweeper); err != nil {
		t.Fatal(err)
	}
	giveUp := compensation{mark: "order-1", entry: entry, reason: "voided", qty: 1, freeBuyer: "ann", fields: "order x", fenced: true}
	if _, err := q.compensate(ctx, "sku-1", giveUp); err != nil {
		t.Fatal(err)
	}
	if stock, err := rdb.Get(ctx, k.stock()).Int64(); err != nil || stock != 10 {
		t.Fatalf("stock %d (%v), want 10: the unit returned once", stock, err)
	}
	if p, err := rdb.XPending(ctx, k.stream(), Group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending %+v (%v), want the entry acknowledged", p, err)
	}
}

// compensate.lua late across a reset (a give-up's or a sweeper's, of an
// order whose units were taken in the round before) gives nothing back,
// frees nobody and dead-letters nothing: the reset replaced the stock, the
// buyers and the stream. A give-up's entry is still acknowledged (a no-op
// on the stream's new group).
func TestACompensationOfARoundBeforeGivesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	q := NewQueue(rdb, "async-stream")
	k := q.keys("sku-1")
	if _, err := q.Reset(ctx, "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	old, err := q.Admit(ctx, Message{OrderID: "0123456789abcdef0123456789abcdef", SKU: "sku-1", User: "ann", Qty: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Reset(ctx, "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Admit(ctx, Message{OrderID: "fedcba9876543210fedcba9876543210", SKU: "sku-1", User: "ann", Qty: 1}, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []compensation{
		{mark: "0123456789abcdef0123456789abcdef", entry: "1-1", reason: "refused", qty: 1, freeBuyer: "ann", round: old.Round, fenced: true},
		{mark: "0123456789abcdef0123456789abcdef", reason: "payment timeout", qty: 1, freeBuyer: "ann", round: old.Round, fenced: true},
	} {
		if n, err := q.compensate(ctx, "sku-1", c); err != nil || n != -1 {
			t.Fatalf("compensate %+v: %d %v; want -1, the round over", c, n, err)
		}
	}
	stock, _ := rdb.Get(ctx, k.stock()).Int64()
	dead, _ := rdb.XLen(ctx, k.dead()).Result()
	ann, _ := rdb.SIsMember(ctx, k.buyers(), "ann").Result()
	if stock != 9 || dead != 0 || !ann {
		t.Fatalf("stock %d, dead letters %d, ann a buyer %v; want 9 (the new round's sale), none, true", stock, dead, ann)
	}
}

// compensate.lua after Redis lost its data (a restart without
// persistence) gives nothing back, even in round 0, which a lost round key
// reads as: the units were in the stock that is gone, and an INCRBY would
// make a stock without the SKU's other keys, which the next sale would
// sell from instead of initialising the SKU in the order table's round.
func TestACompensationAfterRedisLostItsDataGivesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	q := NewQueue(rdb, "async-stream")
	if err := q.Initialise(ctx, "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil { // the data lost
		t.Fatal(err)
	}
	c := compensation{mark: "0123456789abcdef0123456789abcdef", reason: "payment timeout", qty: 1, freeBuyer: "ann", fenced: true}
	if n, err := q.compensate(ctx, "sku-1", c); err != nil || n != -1 {
		t.Fatalf("compensate %+v: %d %v; want -1, nothing to give back into", c, n, err)
	}
	if n, err := rdb.Exists(ctx, q.keys("sku-1").stock()).Result(); err != nil || n != 0 {
		t.Fatalf("stock key exists %d (%v): the give-back made a stock Redis had lost", n, err)
	}
	if _, err := q.Admit(ctx, Message{OrderID: "fedcba9876543210fedcba9876543210", SKU: "sku-1", User: "bob", Qty: 1}, true); !errors.Is(err, ErrNoStock) {
		t.Fatalf("the next admission: %v, want ErrNoStock (the SKU initialised again)", err)
	}
}
