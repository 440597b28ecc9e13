package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

const testToken = "fuzz-admin-token"

// testShop is one in-process replica on its own redis-server, whose DEBUG
// DIGEST (a hash of the whole dataset) tells whether a request wrote
// anything at all.
type testShop struct {
	shop *shop.Shop
	rdb  *redis.Client
}

func startShop(tb testing.TB, token string, options ...func(*shop.Config)) *testShop {
	tb.Helper()
	srv := redistest.Start(tb, "--enable-debug-command", "local")
	cfg := shop.Config{
		RedisAddrs: []string{srv.Addr},
		Replica:    "r0",
		AdminToken: token,
		LockWait:   time.Second,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Exit:       func(int) {}, // an armed crash fault must not end the test binary
	}
	for _, option := range options {
		option(&cfg)
	}
	s, err := shop.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return &testShop{shop: s, rdb: srv.Client(tb)}
}

// serve runs one request through the shop's handler, as a client that is
// not on loopback.
func (ts *testShop) serve(req *http.Request) *httptest.ResponseRecorder {
	req.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	ts.shop.Handler().ServeHTTP(rec, req)
	return rec
}

func (ts *testShop) digest(tb testing.TB) string {
	tb.Helper()
	d, err := ts.rdb.Do(context.Background(), "DEBUG", "DIGEST").Text()
	if err != nil {
		tb.Fatalf("DEBUG DIGEST: %v", err)
	}
	return d
}

func (ts *testShop) audit(tb testing.TB, stage, sku string) inventory.Audit {
	tb.Helper()
	a, err := ts.shop.Inventory.Audit(context.Background(), stage, sku)
	if err != nil {
		tb.Fatalf("audit %s %s: %v", stage, sku, err)
	}
	return a
}

func (ts *testShop) reset(tb testing.TB, stage, sku string, stock int64) {
	tb.Helper()
	if err := ts.shop.Inventory.Reset(context.Background(), stage, sku, stock, 0); err != nil {
		tb.Fatalf("reset %s %s: %v", stage, sku, err)
	}
}

// documentedCodes are the error codes SPEC.md and httpapi document, by
// status.
var documentedCodes = map[int][]string{
	http.StatusBadRequest:            {"bad_request"},
	http.StatusUnauthorized:          {"unauthorized"},
	http.StatusForbidden:             {"forbidden"},
	http.StatusNotFound:              {"unknown_stage", "not_found"},
	http.StatusMethodNotAllowed:      {"method_not_allowed"},
	http.StatusConflict:              {"sold_out", "outcome_unknown", "already_bought", "order_cancelled"},
	http.StatusRequestEntityTooLarge: {"payload_too_large"},
	http.StatusUnsupportedMediaType:  {"unsupported_media_type"},
	http.StatusLocked:                {"lock_busy", "key_in_progress"},
	http.StatusTooManyRequests:       {"rate_limited"},
	http.StatusServiceUnavailable:    {"redis_unavailable", "mysql_unavailable", "etcd_unavailable", "zookeeper_unavailable", "orders_unavailable", "stage_unavailable", "not_ready", "may_have_sold"},
}

// checkShape asserts what every answer has: X-Replica, a JSON object body,
// and for an error exactly {"error","message"} with a code documented for
// its status and a message. It returns the decoded body.
func checkShape(tb testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	tb.Helper()
	if got := rec.Header().Get("X-Replica"); got != "r0" {
		tb.Errorf("X-Replica = %q", got)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("status %d: Content-Type %q, body %q", rec.Code, ct, rec.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatalf("status %d: body is no JSON object: %v: %q", rec.Code, err, rec.Body)
	}
	if rec.Code < 400 {
		return body
	}
	code, _ := body["error"].(string)
	message, _ := body["message"].(string)
	if len(body) != 2 || message == "" || !slices.Contains(documentedCodes[rec.Code], code) {
		tb.Errorf("status %d: error body %s, want {\"error\":one of %q,\"message\":\"...\"}", rec.Code, rec.Body, documentedCodes[rec.Code])
	}
	return body
}

// errorCode is the "error" of an answer checkShape accepted.
func errorCode(body map[string]any) string {
	code, _ := body["error"].(string)
	return code
}

// stageIDs lists the shop's stages with their availability.
func stageIDs(ts *testShop) map[string]bool {
	ids := make(map[string]bool)
	for _, info := range ts.shop.Inventory.Stages() {
		ids[info.ID] = info.Available
	}
	return ids
}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
