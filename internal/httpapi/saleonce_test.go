package httpapi_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/metrics"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
	"github.com/lockstep/lockstep/inventory"
	"github.com/redis/go-redis/v9"
)

// keyedSale is POST deduct of one unit with an Idempotency-Key.
func keyedSale(ctx context.Context, stage, key string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/stages/"+stage+"/deduct", nil)
	req.Header.Set("Idempotency-Key", key)
	return req
}

// A keyed sale that provably sold nothing — its buyer hung up during the
// work, or it failed before the stock write — leaves its key free: the
// retry with the same key sells, once.
func TestKeyedSaleThatSoldNothingCanBeRetried(t *testing.T) {
	for _, tc := range []struct {
		name, stage string
		// fail makes the first attempt sell nothing; undo lets the retry sell.
		fail, undo func(t *testing.T, ts *testShop) context.Context
	}{
		{"buyer hangs up during the work", "watchdog", hangUpDuringWork("watchdog"), noWork("watchdog")},
		{"buyer hangs up during the work", "segmented", hangUpDuringWork("segmented"), noWork("segmented")},
		{"lock fails before the write", "watchdog", func(t *testing.T, ts *testShop) context.Context {
			// A lock key of the wrong type: the lock script fails, nothing sold.
			ts.rdb.Set(context.Background(), "lockstep:watchdog:{sku-1}:lock", "not a hash", 0)
			return context.Background()
		}, func(t *testing.T, ts *testShop) context.Context {
			ts.rdb.Del(context.Background(), "lockstep:watchdog:{sku-1}:lock")
			return context.Background()
		}},
	} {
		t.Run(tc.name+"/"+tc.stage, func(t *testing.T) {
			ts := startShop(t, testToken)
			ts.reset(t, tc.stage, "sku-1", 10)
			first := ts.serve(keyedSale(tc.fail(t, ts), tc.stage, "order-1"))
			if first.Code == http.StatusOK {
				t.Fatalf("first attempt sold: %d %s", first.Code, first.Body)
			}
			if a := ts.audit(t, tc.stage, "sku-1"); a.Sold != 0 {
				t.Fatalf("first attempt answered %d but sold %d", first.Code, a.Sold)
			}
			retry := ts.serve(keyedSale(tc.undo(t, ts), tc.stage, "order-1"))
			if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("retry with the same key = %d %s (replayed %q), want a sale", retry.Code, retry.Body, retry.Header().Get("Idempotent-Replayed"))
			}
			again := ts.serve(keyedSale(context.Background(), tc.stage, "order-1"))
			if again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("third try = %d (replayed %q), want the sale replayed", again.Code, again.Header().Get("Idempotent-Replayed"))
			}
			if a := ts.audit(t, tc.stage, "sku-1"); a.Sold != 1 || !a.Consistent {
				t.Fatalf("audit %+v, want exactly one sale", a)
			}
		})
	}
}

func hangUpDuringWork(stage string) func(t *testing.T, ts *testShop) context.Context {
	return func(t *testing.T, ts *testShop) context.Context {
		if err := ts.shop.Inventory.SetFaults(context.Background(), stage, inventory.Faults{Work: 300 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		waitFaults(t, ts, stage, 300*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
}

func noWork(stage string) func(t *testing.T, ts *testShop) context.Context {
	return func(t *testing.T, ts *testShop) context.Context {
		if err := ts.shop.Inventory.SetFaults(context.Background(), stage, inventory.Faults{}); err != nil {
			t.Fatal(err)
		}
		waitFaults(t, ts, stage, 0)
		return context.Background()
	}
}

func waitFaults(t *testing.T, ts *testShop, stage string, work time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if f, _ := ts.shop.Inventory.Faults(stage); f.Work == work {
			return
		}
	}
	t.Fatalf("%s never ran with work %v", stage, work)
}

// failStore fails every run of one script on one go-redis client, as a
// Redis that refuses writes to the idempotency keys would.
type failStore struct{ sha string }

func (f failStore) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f failStore) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 1 && args[1] == f.sha {
			err := errors.New("NOPERM this user has no permissions to access one of the keys")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (f failStore) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func scriptSHA(t *testing.T, name string) string {
	t.Helper()
	src, err := fs.ReadFile(httpapi.Scripts(), "scripts/"+name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// keyedShop is a shop's handler on one Redis, with atomic's sku-1 reset to 10.
type keyedShop struct {
	inv *inventory.Inventory
	h   http.Handler
}

// startKeyedShop starts a keyedShop whose idempotency keys go through a
// client with hook, and whose requests last at most requestTimeout; the
// stock's client has stockHooks.
func startKeyedShop(t *testing.T, hook redis.Hook, requestTimeout time.Duration, stockHooks ...redis.Hook) *keyedShop {
	t.Helper()
	srv := redistest.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stock := srv.Client(t)
	for _, h := range stockHooks {
		stock.AddHook(h)
	}
	inv, err := inventory.New(inventory.Config{Redis: stock, Logger: log, Exit: func(int) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	keys := srv.Client(t)
	// Every script loaded: each runs as an EVALSHA, which the hook sees.
	scripts, err := fs.Glob(httpapi.Scripts(), "scripts/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range scripts {
		src, err := fs.ReadFile(httpapi.Scripts(), name)
		if err == nil {
			err = keys.ScriptLoad(context.Background(), string(src)).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	keys.AddHook(hook)
	server := httpapi.New(httpapi.Config{
		Inventory: inv, Redis: keys, Metrics: metrics.New(inv, log), Logger: log, Replica: "r0",
		AdminToken: testToken, RequestTimeout: requestTimeout,
	})
	t.Cleanup(server.Close)
	h := server.Handler()
	if err := inv.Reset(context.Background(), "atomic", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	return &keyedShop{inv: inv, h: h}
}

// serve sends one sale of sku-1 with the Idempotency-Key order-1.
func (ks *keyedShop) serve() *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	ks.h.ServeHTTP(rec, keyedSale(context.Background(), "atomic", "order-1"))
	return rec
}

// A sale whose answer cannot be stored is never sold again under its key:
// retries are told the outcome is unknown, however long they wait.
func TestKeyedSaleWhoseAnswerIsLostNeverSellsTwice(t *testing.T) {
	const requestTimeout = 200 * time.Millisecond // markers of running requests last this + 5s
	ks := startKeyedShop(t, failStore{sha: scriptSHA(t, "idempotency_store.lua")}, requestTimeout)
	inv, serve := ks.inv, ks.serve
	if first := serve(); first.Code != http.StatusOK {
		t.Fatalf("first sale = %d %s", first.Code, first.Body)
	}
	if retry := serve(); retry.Code != http.StatusLocked {
		t.Fatalf("immediate retry = %d %s, want 423 (the first is still unsettled)", retry.Code, retry.Body)
	}
	time.Sleep(requestTimeout + 5*time.Second + 200*time.Millisecond) // past any running request's marker
	late := serve()
	if late.Code != http.StatusConflict || !containsCode(late, httpapi.CodeOutcomeUnknown) {
		t.Fatalf("late retry = %d %s, want 409 outcome_unknown", late.Code, late.Body)
	}
	if a, _ := inv.Audit(context.Background(), "atomic", "sku-1"); a.Sold != 1 {
		t.Fatalf("sold %d under one key", a.Sold)
	}
}

// loseReply runs the first EVALSHA of one script and then loses its
// reply, as a read timeout does: the script ran, the caller cannot know.
type loseReply struct {
	sha  string
	lost *atomic.Int32
}

func (l loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); err == nil && cmd.Name() == "evalsha" && len(args) > 1 && args[1] == l.sha && l.lost.CompareAndSwap(0, 1) {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
		}
		return err
	}
}
func (l loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A claim of a key whose reply is lost (it ran: the key is marked pending)
// answers 503 having sold nothing, and leaves the key free: the retry
// sells at once, instead of polling the orphan marker until its deadline
// to be answered 423 (a soak under CPU starvation: a retry of such a key
// waited the shop's whole 10 s request timeout).
func TestAClaimWhoseReplyIsLostLeavesTheKeyFree(t *testing.T) {
	var lost atomic.Int32
	const requestTimeout = 2 * time.Second
	ks := startKeyedShop(t, loseReply{sha: scriptSHA(t, "idempotency_claim.lua"), lost: &lost}, requestTimeout)
	first := ks.serve()
	if lost.Load() != 1 || first.Code != http.StatusServiceUnavailable || !containsCode(first, httpapi.CodeRedisUnavailable) {
		t.Fatalf("claim whose reply was lost (%d lost) = %d %s, want 503 redis_unavailable", lost.Load(), first.Code, first.Body)
	}
	if a, _ := ks.inv.Audit(context.Background(), "atomic", "sku-1"); a.Sold != 0 {
		t.Fatalf("the failed claim sold %d", a.Sold)
	}
	start := time.Now()
	retry := ks.serve()
	if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after %v = %d %s, want a sale: the lost claim's marker still held the key", time.Since(start), retry.Code, retry.Body)
	}
	if a, _ := ks.inv.Audit(context.Background(), "atomic", "sku-1"); a.Sold != 1 {
		t.Fatalf("sold %d under one key", a.Sold)
	}
}

func containsCode(rec *httptest.ResponseRecorder, code string) bool {
	var body struct{ Error string }
	return json.Unmarshal(rec.Body.Bytes(), &body) == nil && body.Error == code
}

func TestIdempotencyTTLBelowAMillisecondIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	for _, ttl := range []time.Duration{-time.Second, 500 * time.Microsecond} {
		_, err := shop.New(shop.Config{RedisAddrs: []string{srv.Addr}, IdempotencyTTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			t.Errorf("idempotency TTL %v accepted", ttl)
		}
	}
}

// A path with a trailing slash answers the JSON contract, not a redirect.
func TestTrailingSlashAnswersJSON(t *testing.T) {
	ts := startShop(t, testToken)
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodPost, "/api/stages/atomic/deduct/", nil),
		httptest.NewRequest(http.MethodGet, "/api/stages/", nil),
	} {
		rec := ts.serve(req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s %s = %d %s, want 404", req.Method, req.URL.Path, rec.Code, rec.Body)
		}
		checkShape(t, rec)
	}
}
