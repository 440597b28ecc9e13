package inventory_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// A watchdog sale the lock was passed to locally reuses the stock the
// previous holder wrote, without a GET. A reset in the same process takes
// the lock by such a pass too, so it must make the next sale read again:
// one that kept the stock from before the reset writes it over the new
// stock (stock + sold != initial).
func TestAResetMakesTheNextWatchdogSaleReadTheStock(t *testing.T) {
	srv := redistest.Start(t)
	inv, err := inventory.New(inventory.Config{
		Redis: srv.Client(t), LockWait: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Exit: func(int) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const stage, sku = "watchdog", "sku-1"
	if err := inv.Reset(ctx, stage, sku, 100_000, 0); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for range 8 { // enough contention that the lock passes locally
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := inv.Deduct(ctx, stage, sku, 1); err != nil && !errors.Is(err, inventory.ErrLockBusy) {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 20 {
		time.Sleep(10 * time.Millisecond)
		if err := inv.Reset(ctx, stage, sku, 100_000, 0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	a, err := inv.Audit(ctx, stage, sku)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Consistent || a.Sold == 0 {
		t.Fatalf("after resets amid local passes: stock %d + sold %d, initial %d", a.Stock, a.Sold, a.Initial)
	}
}
