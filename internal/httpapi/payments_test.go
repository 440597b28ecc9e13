package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/orders"
)

// An async sale answers its order id at once; a worker writes the order
// with a payment due; POST /api/orders/{id}/pay pays it (again, with or
// without the same Idempotency-Key: the same answer, paid or cancelled),
// and a bad, unknown, someone else's or cancelled order gets a
// JSON error and changes nothing.
func TestPayingAnAsyncOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.db")
	ts := startOrderShopOn(t, path)
	ctx := context.Background()
	store, err := orders.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	payments, err := store.Payments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	q := asyncorders.NewQueue(ts.rdb, asyncorders.StageStream)
	cfg := asyncorders.DefaultConfig("w1", []string{"sku-1"})
	cfg.Payments, cfg.PayWithin = payments, 500*time.Millisecond
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = asyncorders.NewWorker(q, store, cfg, quiet).Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })

	ts.reset(t, asyncorders.StageStream, "sku-1", 5)
	orderOf := func(user string) string {
		code, body := sale(ts, t, asyncorders.StageStream, "user="+user)
		id, _ := body["order"].(string)
		if code != http.StatusOK || len(id) != 32 {
			t.Fatalf("sale of %s: %d %v", user, code, body)
		}
		return id
	}
	ann, bob := orderOf("ann"), orderOf("bob")
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := q.Drain(dctx, "sku-1"); err != nil {
		t.Fatal(err)
	}
	// pay sends a payment, with an Idempotency-Key when key is not empty
	// (a client's retry of one payment).
	pay := func(id, user string, key ...string) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/api/orders/"+id+"/pay?user="+user, nil)
		if len(key) > 0 {
			req.Header.Set("Idempotency-Key", key[0])
		}
		rec := ts.serve(req)
		return rec.Code, checkShape(t, rec)
	}
	for _, key := range [][]string{nil, nil, {"ann-pays"}, {"ann-pays"}} {
		if code, body := pay(ann, "ann", key...); code != http.StatusOK || body["status"] != "paid" {
			t.Fatalf("ann pays (key %v): %d %v", key, code, body)
		}
	}
	before := ts.digest(t)
	for _, tc := range []struct {
		id, user string
		status   int
	}{
		{"nope", "ann", http.StatusBadRequest},
		{ann, "", http.StatusBadRequest},
		{orders.NewID(), "ann", http.StatusNotFound},
		{bob, "ann", http.StatusNotFound},
	} {
		if code, body := pay(tc.id, tc.user); code != tc.status {
			t.Errorf("pay %s as %q: %d %v, want %d", tc.id, tc.user, code, body, tc.status)
		}
	}
	// The query is read as strictly as every other route's: a repeated
	// user paid as the first one, an unknown parameter was ignored.
	for _, query := range []string{"user=bob&user=ann", "user=bob&colour=red", "user=bob;", "user=%zz"} {
		rec := ts.serve(httptest.NewRequest(http.MethodPost, "/api/orders/"+bob+"/pay?"+query, nil))
		if body := checkShape(t, rec); rec.Code != http.StatusBadRequest || errorCode(body) != httpapi.CodeBadRequest {
			t.Errorf("pay bob's order ?%s: %d %v, want 400 bad_request", query, rec.Code, body)
		}
	}
	if ts.digest(t) != before {
		t.Error("a refused payment changed Redis")
	}
	if st, err := payments.Status(ctx, bob, "bob"); err != nil || st != orders.PaymentUnpaid {
		t.Errorf("bob's order after the refused payments: %q %v", st, err)
	}
	time.Sleep(600 * time.Millisecond)
	if err := asyncorders.NewSweeper(q, payments, time.Hour, quiet).Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]string{nil, {"bob-pays"}, {"bob-pays"}} {
		if code, body := pay(bob, "bob", key...); code != http.StatusConflict || body["error"] != "order_cancelled" {
			t.Fatalf("bob pays late (key %v): %d %v", key, code, body)
		}
	}
	if after := ts.digest(t); after == before {
		t.Fatal("the sweep returned nothing to Redis") // bob's unit went back
	}
	rec := ts.serve(httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, series := range []string{
		`lockstep_stream_pending{sku="sku-1",stage="async-stream"} 0`,
		`lockstep_stream_undelivered{sku="sku-1",stage="async-stream"} 0`,
		`lockstep_dead_letters{sku="sku-1",stage="async-stream"} 0`,
		`lockstep_order_lag_seconds{quantile="0.99",sku="sku-1",stage="async-stream"} `,
	} {
		if !strings.Contains(rec.Body.String(), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	a := ts.audit(t, asyncorders.StageStream, "sku-1")
	if a.Stock != 4 || a.Orders.Orders != 1 || a.Orders.Undersold != 0 || a.Stream == nil || !a.Stream.Drained() {
		t.Fatalf("audit: stock %d, orders %+v, stream %+v", a.Stock, a.Orders, a.Stream)
	}
}
