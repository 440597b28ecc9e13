package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockstep/lockstep/inventory"
)

// semaphoreStep is one step of a semaphore rung's life on one SKU: a
// reset to stock (with the crash fault: one sale that crashes before its
// insert, and the lease's end), then buyers buying one unit each at once;
// what it sold, and the audit after.
type semaphoreStep struct {
	stock                     int64
	crash                     bool
	buyers                    int
	sold                      int
	left, undersold, oversold int64
}

func runSemaphoreSteps(t *testing.T, stage string, steps []semaphoreStep) {
	invs := orderReplicas(t, 3)
	for i, st := range steps {
		prepare(t, invs, stage, st.stock, inventory.Faults{Work: 5 * time.Millisecond, CrashHoldingLock: st.crash})
		if st.crash {
			if _, err := invs[0].DeductFor(context.Background(), stage, "sku-1", "crashed", 1); !errors.Is(err, inventory.ErrCrashed) {
				t.Fatalf("step %d: sale: %v, want the injected crash", i, err)
			}
			time.Sleep(1500 * time.Millisecond) // the expirable rung's lease ends
		}
		sold := buyEagerly(t, invs, stage, users(st.buyers), 1)
		a := orderAudit(t, invs[0], stage)
		if sold != st.sold || a.Stock != st.left || a.Orders.Undersold != st.undersold || a.Oversold != st.oversold {
			t.Errorf("step %d (reset to %d, crash %v): %d sold, audit %+v, orders %+v; want %d sold, %d left, %d undersold, %d oversold",
				i, st.stock, st.crash, sold, a.Counts, *a.Orders, st.sold, st.left, st.undersold, st.oversold)
		}
	}
}

// The course's rung: a crash before the insert loses its unit, which no
// reset brings back (trySetPermits ignores it); a reset to a smaller stock
// is ignored too, and the sales go on against the permits left.
func TestSemaphoreRungShowsTheCoursePitfalls(t *testing.T) {
	runSemaphoreSteps(t, "semaphore", []semaphoreStep{
		{stock: 30, crash: true, buyers: 0, left: 29, undersold: 1},
		{stock: 30, buyers: 10, sold: 10, left: 19, undersold: 1},
		{stock: 5, buyers: 30, sold: 19, left: 0, undersold: -14, oversold: 14},
	})
}

// The expirable rung: the crashed sale's permit comes back at its lease's
// end, and a reset sets the new stock, whatever the last round left.
func TestSemaphoreExpirableRungLosesNothing(t *testing.T) {
	runSemaphoreSteps(t, "semaphore-expirable", []semaphoreStep{
		{stock: 30, crash: true, buyers: 0, left: 30},
		{stock: 30, buyers: 10, sold: 10, left: 20},
		{stock: 5, buyers: 30, sold: 5, left: 0},
		{stock: 20, buyers: 60, sold: 20, left: 0},
	})
}

// A sale for two units takes two permits at once, or none.
func TestSemaphoreRungsSellSeveralUnits(t *testing.T) {
	invs := orderReplicas(t, 1)
	for _, stage := range []string{"semaphore", "semaphore-expirable"} {
		t.Run(stage, func(t *testing.T) {
			prepare(t, invs, stage, 3, inventory.Faults{})
			ctx := context.Background()
			for i, want := range []error{nil, inventory.ErrSoldOut} {
				if _, err := invs[0].DeductFor(ctx, stage, "sku-1", fmt.Sprint("buyer-", i), 2); !errors.Is(err, want) {
					t.Fatalf("sale %d of 2 units: %v, want %v", i, err, want)
				}
			}
			if a := orderAudit(t, invs[0], stage); a.Stock != 1 || a.Orders.Units != 2 || a.Orders.Undersold != 0 {
				t.Fatalf("audit %+v, orders %+v; want 1 left and 2 ordered", a.Counts, *a.Orders)
			}
		})
	}
}
