package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
)

// startOrderShop is a replica whose order stages keep their orders in the
// embedded SQLite file.
func startOrderShop(t *testing.T) *testShop {
	t.Helper()
	srv := redistest.Start(t, "--enable-debug-command", "local")
	s, err := shop.New(shop.Config{
		RedisAddrs: []string{srv.Addr}, Replica: "r0", AdminToken: testToken, LockWait: time.Second,
		OrdersSQLite: filepath.Join(t.TempDir(), "orders.db"),
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)), Exit: func(int) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &testShop{shop: s, rdb: srv.Client(t)}
}

func sale(ts *testShop, t *testing.T, stage, query string) (int, map[string]any) {
	t.Helper()
	rec := ts.serve(httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/deduct?"+query, nil))
	return rec.Code, checkShape(t, rec)
}

// A sale names its buyer with user: required on the one-per-user stages,
// checked wherever it is given, ignored by the lock stages; a bad one
// sells nothing.
func TestTheBuyerOfASale(t *testing.T) {
	ts := startOrderShop(t)
	ts.reset(t, "one-per-user-lua", "sku-1", 5)
	ts.reset(t, "atomic", "sku-1", 5)
	before := ts.digest(t)
	for _, tc := range []struct{ stage, query string }{
		{"one-per-user-lua", "sku=sku-1"},
		{"one-per-user-naive", "sku=sku-1"},
		{"one-per-user-lua", "user="},
		{"one-per-user-lua", "user=" + strings.Repeat("u", 65)},
		{"one-per-user-lua", "user=" + url.QueryEscape("eve\x00")},
		{"one-per-user-lua", "user=" + url.QueryEscape("eve\n")},
		{"atomic", "user=" + url.QueryEscape("eve\x1b")},
	} {
		if code, body := sale(ts, t, tc.stage, tc.query); code != http.StatusBadRequest {
			t.Errorf("%s?%s: %d %v, want 400", tc.stage, tc.query, code, body)
		}
	}
	if after := ts.digest(t); after != before {
		t.Fatal("a refused sale wrote to Redis")
	}
	if code, body := sale(ts, t, "atomic", "sku=sku-1"); code != http.StatusOK {
		t.Fatalf("atomic without a buyer: %d %v", code, body)
	}
	code, body := sale(ts, t, "one-per-user-lua", "user="+url.QueryEscape("李雷"))
	if code != http.StatusOK || body["user"] != "李雷" || body["order"] == "" {
		t.Fatalf("first sale: %d %v", code, body)
	}
	if code, body := sale(ts, t, "one-per-user-lua", "user="+url.QueryEscape("李雷")); code != http.StatusConflict || errorCode(body) != "already_bought" {
		t.Fatalf("second sale of one buyer: %d %v, want 409 already_bought", code, body)
	}
	// The buyer in a JSON body, as sku and qty may be; query and body must agree.
	post := func(query, body string) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/api/stages/one-per-user-lua/deduct"+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := ts.serve(req)
		return rec.Code, checkShape(t, rec)
	}
	if code, body := post("", `{"user":"hanmeimei"}`); code != http.StatusOK || body["user"] != "hanmeimei" {
		t.Fatalf("a buyer in the body: %d %v", code, body)
	}
	if code, body := post("?user=lily", `{"user":"lucy"}`); code != http.StatusBadRequest {
		t.Fatalf("query and body name two buyers: %d %v, want 400", code, body)
	}
	a := ts.audit(t, "one-per-user-lua", "sku-1")
	if a.Stock != 3 || a.Orders.Orders != 2 || a.Orders.Undersold != 0 {
		t.Fatalf("audit %+v, orders %+v", a.Counts, *a.Orders)
	}
}

// GET /api/orders pages through a stage's orders, for the admin only.
func TestOrdersArePaged(t *testing.T) {
	ts := startOrderShop(t)
	ts.reset(t, "optimistic-mysql", "sku-1", 5)
	for range 3 {
		if code, body := sale(ts, t, "optimistic-mysql", "sku=sku-1"); code != http.StatusOK {
			t.Fatalf("sale: %d %v", code, body)
		}
	}
	get := func(query string, admin bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/orders?"+query, nil)
		if admin {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		return ts.serve(req)
	}
	if rec := get("stage=optimistic-mysql", false); rec.Code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", rec.Code)
	}
	for _, bad := range []string{"stage=atomic", "stage=optimistic-mysql&page=2", "stage=optimistic-mysql&limit=0", "stage=optimistic-mysql&limit=x", "stage=optimistic-mysql&sku=a{b"} {
		if rec := get(bad, true); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, rec.Code, rec.Body)
		}
	}
	seen := 0
	next := ""
	for page := 0; page < 3; page++ {
		rec := get("stage=optimistic-mysql&sku=sku-1&limit=2&after="+next, true)
		var body struct {
			Orders []struct{ ID string }
			Next   string
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			t.Fatalf("page %d: %d %s", page, rec.Code, rec.Body)
		}
		seen += len(body.Orders)
		if next = body.Next; next == "" {
			break
		}
	}
	if seen != 3 {
		t.Fatalf("pages held %d orders, want 3", seen)
	}
}

// /metrics reports an order stage's orders, duplicate orders and undersold
// units beside its stock.
func TestOrderMetrics(t *testing.T) {
	ts := startOrderShop(t)
	ts.reset(t, "one-per-user-naive", "sku-1", 5)
	for range 2 {
		if code, body := sale(ts, t, "one-per-user-naive", "user=bob"); code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("sale: %d %v", code, body)
		}
	}
	rec := ts.serve(httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, series := range []string{
		`lockstep_orders{sku="sku-1",stage="one-per-user-naive"} 1`,
		`lockstep_duplicate_orders{sku="sku-1",stage="one-per-user-naive"} 0`,
		`lockstep_undersold{sku="sku-1",stage="one-per-user-naive"} 0`,
	} {
		if !strings.Contains(rec.Body.String(), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if strings.Contains(rec.Body.String(), `lockstep_orders{sku="sku-1",stage="atomic"}`) {
		t.Error("a stage without orders reports orders")
	}
}
