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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/metrics"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
	"github.com/redis/go-redis/v9"
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

// A replica killed between a keyed sale's Redis deduction and its order
// insert (the crash window docs/orders.md names) leaves the key's marker
// pending with nobody renewing it. On the stages whose keyed sales name
// their order by the key, the buyer's retry with the key, on another
// replica once the marker is a lease old, takes the key over and finishes
// that sale: one unit, one order, the key's — not 409 outcome_unknown for
// the key's lifetime and a unit nobody's order holds.
func TestAKeyedSaleOfAKilledReplicaIsFinishedByItsRetry(t *testing.T) {
	for _, stage := range []string{"one-per-user-lua", "one-per-user-lock"} {
		t.Run(stage, func(t *testing.T) {
			lite, err := orders.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lite.Close() })
			srv := redistest.Start(t)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			dead := make(chan struct{})
			t.Cleanup(func() { close(dead) })
			// The killed replica: its crash stops its lock renewals and its
			// key's beats (its clients close) and never answers.
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			var killed *inventory.Inventory
			crashed := make(chan struct{})
			killed, err = inventory.New(inventory.Config{Redis: rdb, Orders: lite, Logger: log, Replica: "r0", Exit: func(int) {
				close(crashed)
				_ = killed.Close()
				_ = rdb.Close()
				<-dead
			}})
			if err != nil {
				t.Fatal(err)
			}
			live, err := inventory.New(inventory.Config{Redis: srv.Client(t), Orders: lite, Logger: log, Replica: "r1", Exit: func(int) {}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = live.Close() })
			handler := func(inv *inventory.Inventory, rdb redis.UniversalClient) http.Handler {
				s := httpapi.New(httpapi.Config{
					Inventory: inv, Redis: rdb, Metrics: metrics.New(inv, log), Logger: log, Replica: "r",
					AdminToken: testToken, RequestTimeout: time.Second,
				})
				t.Cleanup(s.Close)
				return s.Handler()
			}
			hKilled, hLive := handler(killed, rdb), handler(live, srv.Client(t))
			if err := live.Reset(context.Background(), stage, "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			if err := live.SetFaults(context.Background(), stage, inventory.Faults{CrashHoldingLock: true, LockTTL: 300 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // the killed replica has read the faults
			sale := func(h http.Handler) *httptest.ResponseRecorder {
				req := keyedSale(context.Background(), stage, "order-1")
				req.URL.RawQuery = "user=alice"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			go sale(hKilled) // never answers
			select {
			case <-crashed:
			case <-time.After(10 * time.Second):
				t.Fatal("the replica did not crash")
			}
			// The buyer retries while she is told to (423 while the dead
			// request's marker is younger than a lease, 503 when Redis is
			// slow), until she gets a sale or a refusal.
			var retry *httptest.ResponseRecorder
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if retry = sale(hLive); retry.Code == http.StatusOK || retry.Code == http.StatusConflict {
					break
				}
			}
			want := orders.KeyedID(stage, "sku-1", "order-1", 0)
			if retry.Code != http.StatusOK || !strings.Contains(retry.Body.String(), want) {
				t.Fatalf("retry after the replica died = %d %s, want 200 with the key's order %s", retry.Code, retry.Body, want)
			}
			a, err := live.Audit(context.Background(), stage, "sku-1")
			if err != nil {
				t.Fatal(err)
			}
			if a.Stock != 9 || a.Orders.Orders != 1 || a.Orders.Undersold != 0 {
				t.Fatalf("stock %d, orders %+v: want one unit sold, in one order", a.Stock, *a.Orders)
			}
		})
	}
}
