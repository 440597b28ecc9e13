package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
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

// stockWatch is a go-redis hook that, while on, reads the SKU's stock
// through another replica after each command of the watched one.
type stockWatch struct {
	on    atomic.Bool
	other *inventory.Inventory
	stage string
	mu    sync.Mutex
	seen  []int64
}

func (w *stockWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *stockWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if w.on.Load() {
			if a, aerr := w.other.Audit(ctx, w.stage, "sku-1"); aerr == nil {
				w.mu.Lock()
				w.seen = append(w.seen, a.Stock)
				w.mu.Unlock()
			}
		}
		return err
	}
}

func (w *stockWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A semaphore-expirable sale never shows fewer units than there are: read
// after each of its commands, the stock only goes down. Its consumption
// was AddPermits(-1) then Release, which read one unit short between the
// two; a buyer who tried then was refused, and a CI run whose sixty buyers
// each tried once left a unit of twenty unsold.
func TestSemaphoreExpirableSaleNeverShowsFewerUnitsThanThereAre(t *testing.T) {
	m := lockservertest.MariaDB(t)
	srv := redistest.Start(t)
	other := newOrderInventory(t, srv.Client(t), mariaDBOrders(t, m), "r0")
	watch := &stockWatch{other: other, stage: "semaphore-expirable"}
	watchedClient := srv.Client(t)
	watchedClient.AddHook(watch)
	watched := newOrderInventory(t, watchedClient, mariaDBOrders(t, m), "r1")
	prepare(t, []*inventory.Inventory{other, watched}, watch.stage, 5, inventory.Faults{})
	for i := range 3 {
		watch.on.Store(true)
		_, err := watched.DeductFor(context.Background(), watch.stage, "sku-1", fmt.Sprint("buyer-", i), 1)
		watch.on.Store(false)
		if err != nil {
			t.Fatalf("sale %d: %v", i, err)
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for i := 1; i < len(watch.seen); i++ {
		if watch.seen[i] > watch.seen[i-1] {
			t.Fatalf("stock read after each command of three sales: %v; it rose from %d to %d", watch.seen, watch.seen[i-1], watch.seen[i])
		}
	}
	if last := watch.seen[len(watch.seen)-1]; last != 2 {
		t.Fatalf("stock read after each command of three sales: %v; want 2 at the end", watch.seen)
	}
}
