package orders_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// InsertBatch's one INSERT, and what it does when it meets rows already
// there: its own (a batch run again), a void, a buyer's other order, a
// reset's round.
func TestInsertBatchMeetingRowsAlreadyThere(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			bs := s.(orders.BatchStore)
			for _, c := range []struct {
				name string
				// before writes what the batch meets; the batch is
				// ordersOf(sku, "a", "b", "c").
				before func(t *testing.T, sku string, batch []orders.Order)
				want   error
				live   int64
			}{
				{"nothing", func(*testing.T, string, []orders.Order) {}, nil, 3},
				{"the whole batch, run before", func(t *testing.T, _ string, batch []orders.Order) {
					if err := bs.InsertBatch(ctx, batch, nil); err != nil {
						t.Fatal(err)
					}
				}, nil, 3},
				{"part of the batch, inserted alone", func(t *testing.T, _ string, batch []orders.Order) {
					if err := s.Insert(ctx, batch[1]); err != nil {
						t.Fatal(err)
					}
				}, nil, 3},
				{"a void of one of its ids", func(t *testing.T, _ string, batch []orders.Order) {
					if err := s.Void(ctx, batch[2]); err != nil {
						t.Fatal(err)
					}
				}, orders.ErrBatchRefused, 0},
				{"a buyer's other order", func(t *testing.T, sku string, _ []orders.Order) {
					if err := s.Insert(ctx, ordersOf(sku, "b")[0]); err != nil {
						t.Fatal(err)
					}
				}, orders.ErrBatchRefused, 1},
				{"its own id and a buyer's other order", func(t *testing.T, sku string, batch []orders.Order) {
					if err := s.Insert(ctx, batch[0]); err != nil {
						t.Fatal(err)
					}
					if err := s.Insert(ctx, ordersOf(sku, "c")[0]); err != nil {
						t.Fatal(err)
					}
				}, orders.ErrBatchRefused, 2},
				{"a reset to the next round", func(t *testing.T, sku string, _ []orders.Order) {
					if err := s.Reset(ctx, "st", sku, 1000, 1); err != nil {
						t.Fatal(err)
					}
				}, orders.ErrStaleRound, 0},
			} {
				t.Run(c.name, func(t *testing.T) {
					sku := fmt.Sprintf("sku-%d", time.Now().UnixNano())
					if err := s.Reset(ctx, "st", sku, 1000, 0); err != nil {
						t.Fatal(err)
					}
					batch := ordersOf(sku, "a", "b", "c")
					c.before(t, sku, batch)
					if err := bs.InsertBatch(ctx, batch, nil); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
						t.Fatalf("InsertBatch: %v, want %v", err, c.want)
					}
					if n := liveOrders(t, s, sku); n != c.live {
						t.Fatalf("%d live orders, want %d", n, c.live)
					}
				})
			}
		})
	}
}
