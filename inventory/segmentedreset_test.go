package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/lock"
	"github.com/lockstep/lockstep/segments"
)

// A sale across segments that waits for a lock a reset holds, the reset
// changing the segment count (so every segment's tag), sells from the new
// segments instead of answering sold out from the old ones (issue 22: the
// stages walked the tags they read before the wait, every take found no
// stock, and the audit showed stock 4 after "sold out").
//
// The test holds the lock the reset takes first (segmented-atomic's across
// lock; segmented's segment 0), so that the reset queues for it, then the
// sale: the lock is handed over in order. segmented's sale reaches the wait
// in its sale across segments only when it picked segment 1 first (the
// pick is random; from segment 0 it waits on that segment alone, and reads
// the count again after), so that stage runs the scenario several times.
func TestSegmentedSaleAcrossAResetThatChangesTheCount(t *testing.T) {
	for _, tc := range []struct {
		stage  string
		rounds int
		held   func(sku string) string // the lock the test holds
	}{
		{"segmented-atomic", 1, func(sku string) string { return "lockstep:segmented-atomic:{" + sku + "}:lock" }},
		{"segmented", 6, func(sku string) string { return "lockstep:segmented:{" + segments.Tag(sku, 0, 2) + "}:lock" }},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			srv := redistest.Start(t)
			invs := replicasOnRedis(t, srv, 2, func(*inventory.Config) {})
			seller, resetter := invs[0], invs[1]
			locks := lock.New(srv.Client(t))
			t.Cleanup(func() { _ = locks.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for round := range tc.rounds {
				if err := seller.Reset(ctx, tc.stage, "sku-1", 4, 2); err != nil { // 2 + 2
					t.Fatal(err)
				}
				held := locks.Mutex(tc.held("sku-1"))
				if err := held.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				reset := make(chan error, 1)
				go func() { reset <- resetter.Reset(ctx, tc.stage, "sku-1", 4, 3) }() // 2 + 1 + 1, other tags
				time.Sleep(300 * time.Millisecond)                                    // the reset waits for the lock
				type answer struct {
					sale inventory.Sale
					err  error
				}
				sold := make(chan answer, 1)
				go func() {
					sale, err := seller.Deduct(ctx, tc.stage, "sku-1", 3) // no segment holds 3
					sold <- answer{sale, err}
				}()
				time.Sleep(300 * time.Millisecond) // the sale waits behind the reset
				if err := held.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := <-reset; err != nil {
					t.Fatal(err)
				}
				got := <-sold
				if got.err != nil {
					a, _ := seller.Audit(ctx, tc.stage, "sku-1")
					t.Fatalf("round %d: sale of 3 from 4 across a reset: %v (audit %+v)", round, got.err, a)
				}
				if got.sale.Remaining != 1 {
					t.Errorf("round %d: sale answered %d remaining, want 1 (of the new segments)", round, got.sale.Remaining)
				}
				a, err := seller.Audit(ctx, tc.stage, "sku-1")
				if err != nil {
					t.Fatal(err)
				}
				if a.Stock != 1 || a.Sold != 3 || !a.Consistent || len(a.Segments) != 3 {
					t.Fatalf("round %d: audit %+v, want 3 sold of 4 over 3 segments", round, a)
				}
			}
		})
	}
}
