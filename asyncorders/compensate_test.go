package asyncorders

import (
	"context"
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
	if err := q.compensate(ctx, "sku-1", "order-1", "", "payment expired", 1, "ann", ""); err != nil { // the sweeper's
		t.Fatal(err)
	}
	if err := q.compensate(ctx, "sku-1", "order-1", entry, "voided", 1, "ann", "order x"); err != nil { // the give-up's
		t.Fatal(err)
	}
	if stock, err := rdb.Get(ctx, k.stock()).Int64(); err != nil || stock != 10 {
		t.Fatalf("stock %d (%v), want 10: the unit returned once", stock, err)
	}
	if p, err := rdb.XPending(ctx, k.stream(), Group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending %+v (%v), want the entry acknowledged", p, err)
	}
}
