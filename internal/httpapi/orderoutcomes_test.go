package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/metrics"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// replyLostOrders is an order table whose first Buy and first Insert are
// applied and then lose their reply, and whose Void fails while voidDown
// is set: the database acted, the shop cannot know.
type replyLostOrders struct {
	orders.Store
	bought, inserted atomic.Bool
	voidDown         atomic.Bool
}

func errLost(op string) error {
	return fmt.Errorf("orders: %s: %w: %w", op, orders.ErrUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
}

func (r *replyLostOrders) Buy(ctx context.Context, o orders.Order, cond orders.Condition, read int64) (int64, error) {
	remaining, err := r.Store.Buy(ctx, o, cond, read)
	if err == nil && r.bought.CompareAndSwap(false, true) {
		return 0, errLost("commit buy")
	}
	return remaining, err
}

func (r *replyLostOrders) Insert(ctx context.Context, o orders.Order) error {
	err := r.Store.Insert(ctx, o)
	if err == nil && r.inserted.CompareAndSwap(false, true) {
		return errLost("insert order")
	}
	return err
}

func (r *replyLostOrders) Void(ctx context.Context, o orders.Order) error {
	if r.voidDown.Load() {
		return fmt.Errorf("orders: void: %w: connection refused", orders.ErrUnavailable)
	}
	return r.Store.Void(ctx, o)
}

// Issue 34 defects 1 and 2 (issue 33's 1 and 3 through the HTTP API): a
// keyed sale whose order write was applied and whose reply was lost — the
// optimistic transaction's COMMIT, or an insert the shop could not void —
// must not free its key as "nothing sold": the retry with the same key
// must not sell a second unit.
func TestAKeyedSaleWhoseOrderMayHaveLandedSellsOnce(t *testing.T) {
	for _, tc := range []struct {
		stage    string
		voidDown bool
	}{
		{"optimistic-mysql", false},
		{"optimistic-mysql-version", false},
		{"optimistic-redis", true},
		{"one-per-user-lua", true},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lite.Close() })
			store := &replyLostOrders{Store: lite}
			srv := redistest.Start(t)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			inv, err := inventory.New(inventory.Config{Redis: srv.Client(t), Orders: store, Logger: log, Exit: func(int) {}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = inv.Close() })
			h := httpapi.New(httpapi.Config{
				Inventory: inv, Redis: srv.Client(t), Metrics: metrics.New(inv, log), Logger: log, Replica: "r0",
				AdminToken: testToken, RequestTimeout: time.Second,
			}).Handler()
			if err := inv.Reset(context.Background(), tc.stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			store.voidDown.Store(tc.voidDown)
			serve := func() *httptest.ResponseRecorder {
				req := keyedSale(context.Background(), tc.stage, "order-1")
				req.URL.RawQuery = "user=alice"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			first := serve()
			if !store.bought.Load() && !store.inserted.Load() {
				t.Fatal("no reply was lost")
			}
			retry := serve()
			t.Logf("first %d %s; retry %d %s", first.Code, first.Body, retry.Code, retry.Body)
			store.voidDown.Store(false)
			var a inventory.Audit
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if a, err = inv.Audit(context.Background(), tc.stage, "sku-1"); err == nil && a.Orders.Undersold == 0 {
					break
				}
			}
			if a.Orders.Orders > 1 || a.Initial-a.Stock > 1 || a.Orders.Undersold != 0 {
				t.Fatalf("one key sold %d units as %d orders (undersold %d)", a.Initial-a.Stock, a.Orders.Orders, a.Orders.Undersold)
			}
			if (first.Code == http.StatusOK || retry.Code == http.StatusOK) && a.Orders.Orders != 1 {
				t.Fatalf("answers %d and %d, %d orders: a 200 without its order", first.Code, retry.Code, a.Orders.Orders)
			}
		})
	}
}
