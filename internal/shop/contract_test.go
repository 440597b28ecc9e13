package shop_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestContract walks the SPEC's HTTP table: every route's good answer and
// every bad input's error code, with no change to any stock or sale.
func TestContract(t *testing.T) {
	const token = "s3cret-token"
	r := startReplicas(t, redistest.Start(t), 1, withAdminToken(token))
	auth := map[string]string{"Authorization": "Bearer " + token}
	stages := []string{"naive", "synchronized", "setnx", "setnx-expire", "uuid-lua", "watchdog", "segmented", "atomic"}
	for _, s := range stages {
		r.reset(s, 50, 4)
	}
	before := make(map[string]auditResult)
	for _, s := range stages {
		before[s] = r.audit(s)
	}

	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		status       int
		code         string
	}{
		{"unknown stage deduct", "POST", "/api/stages/nope/deduct", "", nil, 404, "unknown_stage"},
		{"unknown stage audit", "GET", "/api/stages/nope/audit", "", nil, 404, "unknown_stage"},
		{"unknown stage reset", "POST", "/api/stages/nope/reset", `{"stock":1}`, auth, 404, "unknown_stage"},
		{"unknown stage faults", "PUT", "/api/stages/nope/faults", `{}`, auth, 404, "unknown_stage"},
		{"redlock without 3 masters", "POST", "/api/stages/redlock/deduct", "", nil, 503, "stage_unavailable"},
		{"qty 0", "POST", "/api/stages/atomic/deduct?qty=0", "", nil, 400, "bad_request"},
		{"qty -1", "POST", "/api/stages/atomic/deduct?qty=-1", "", nil, 400, "bad_request"},
		{"qty 101", "POST", "/api/stages/atomic/deduct?qty=101", "", nil, 400, "bad_request"},
		{"qty abc", "POST", "/api/stages/atomic/deduct?qty=abc", "", nil, 400, "bad_request"},
		{"qty 1.5", "POST", "/api/stages/naive/deduct?qty=1.5", "", nil, 400, "bad_request"},
		{"qty empty", "POST", "/api/stages/naive/deduct?qty=", "", nil, 400, "bad_request"},
		{"qty huge", "POST", "/api/stages/naive/deduct?qty=99999999999999999999", "", nil, 400, "bad_request"},
		{"sku empty", "POST", "/api/stages/watchdog/deduct?sku=", "", nil, 400, "bad_request"},
		{"sku 300 bytes", "POST", "/api/stages/watchdog/deduct?sku=" + long, "", nil, 400, "bad_request"},
		{"sku with hash tag", "POST", "/api/stages/segmented/deduct?sku=%7Bsku-1%7D", "", nil, 400, "bad_request"},
		{"audit sku empty", "GET", "/api/stages/atomic/audit?sku=", "", nil, 400, "bad_request"},
		{"idempotency key too long", "POST", "/api/stages/atomic/deduct", "", map[string]string{"Idempotency-Key": long}, 400, "bad_request"},
		{"idempotency key with space", "POST", "/api/stages/atomic/deduct", "", map[string]string{"Idempotency-Key": "a b"}, 400, "bad_request"},
		{"reset without token", "POST", "/api/stages/atomic/reset", `{"stock":1}`, nil, 401, "unauthorized"},
		{"reset wrong token", "POST", "/api/stages/atomic/reset", `{"stock":1}`, map[string]string{"Authorization": "Bearer wrong"}, 401, "unauthorized"},
		{"reset token not bearer", "POST", "/api/stages/atomic/reset", `{"stock":1}`, map[string]string{"Authorization": token}, 401, "unauthorized"},
		{"faults without token", "PUT", "/api/stages/atomic/faults", `{}`, nil, 401, "unauthorized"},
		{"faults wrong token", "PUT", "/api/stages/atomic/faults", `{}`, map[string]string{"Authorization": "Bearer " + token + "x"}, 401, "unauthorized"},
		{"reset negative stock", "POST", "/api/stages/atomic/reset", `{"stock":-1}`, auth, 400, "bad_request"},
		{"reset huge stock", "POST", "/api/stages/atomic/reset", `{"stock":1000000000000}`, auth, 400, "bad_request"},
		{"reset no stock", "POST", "/api/stages/atomic/reset", `{"sku":"sku-1"}`, auth, 400, "bad_request"},
		{"reset malformed JSON", "POST", "/api/stages/atomic/reset", `{"stock":`, auth, 400, "bad_request"},
		{"reset empty body", "POST", "/api/stages/atomic/reset", ``, auth, 400, "bad_request"},
		{"reset unknown field", "POST", "/api/stages/atomic/reset", `{"stock":1,"stok":2}`, auth, 400, "bad_request"},
		{"reset two values", "POST", "/api/stages/atomic/reset", `{"stock":1}{"stock":2}`, auth, 400, "bad_request"},
		{"reset stock as string", "POST", "/api/stages/atomic/reset", `{"stock":"5"}`, auth, 400, "bad_request"},
		{"reset bad sku", "POST", "/api/stages/atomic/reset", `{"sku":"","stock":1}`, auth, 400, "bad_request"},
		{"reset negative segments", "POST", "/api/stages/segmented/reset", `{"stock":1,"segments":-2}`, auth, 400, "bad_request"},
		{"reset too many segments", "POST", "/api/stages/segmented/reset", `{"stock":1,"segments":5000}`, auth, 400, "bad_request"},
		{"faults malformed JSON", "PUT", "/api/stages/naive/faults", `{"work":`, auth, 400, "bad_request"},
		{"faults bad duration", "PUT", "/api/stages/naive/faults", `{"work":"fast"}`, auth, 400, "bad_request"},
		{"faults negative duration", "PUT", "/api/stages/naive/faults", `{"work":"-1ms"}`, auth, 400, "bad_request"},
		{"faults work_max below work", "PUT", "/api/stages/naive/faults", `{"work":"5ms","work_max":"2ms"}`, auth, 400, "bad_request"},
		{"faults slow_ratio above 1", "PUT", "/api/stages/naive/faults", `{"slow_ratio":1.5}`, auth, 400, "bad_request"},
		{"faults lock_ttl below 1ms", "PUT", "/api/stages/watchdog/faults", `{"lock_ttl":"10us"}`, auth, 400, "bad_request"},
		{"faults unknown field", "PUT", "/api/stages/naive/faults", `{"wrok":"5ms"}`, auth, 400, "bad_request"},
		{"faults crash without a Redis lock", "PUT", "/api/stages/atomic/faults", `{"crash_holding_lock":true}`, auth, 400, "bad_request"},
		{"no such route", "GET", "/api/nothing", "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/api/stages/atomic/deduct", "", nil, 405, "method_not_allowed"},
		{"deduct by GET", "GET", "/api/stages/atomic/deduct", "", nil, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.do(0, tc.method, tc.path, tc.body, tc.header)
			if res.status != tc.status || res.code() != tc.code {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, res.status, res.body, tc.status, tc.code)
			}
			if msg, _ := res.field("message").(string); msg == "" {
				t.Errorf("no message in %s", res.body)
			}
			if res.header.Get("X-Replica") != "r0" {
				t.Errorf("X-Replica = %q", res.header.Get("X-Replica"))
			}
			if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
	for _, s := range stages {
		if after := r.audit(s); !reflect.DeepEqual(after, before[s]) {
			t.Errorf("%s changed by bad requests: %+v, was %+v", s, after.Audit, before[s].Audit)
		}
	}

	t.Run("good answers", func(t *testing.T) {
		res := r.deduct(0, "atomic", "?sku=sku-1&qty=3")
		if res.status != 200 || res.field("stage") != "atomic" || res.field("sku") != "sku-1" ||
			res.field("qty") != 3.0 || res.field("remaining") != 47.0 || res.field("replica") != "r0" {
			t.Errorf("deduct = %d %s", res.status, res.body)
		}
		res = r.deduct(0, "naive", "") // sku-1, qty 1 by default
		if res.status != 200 || res.field("sku") != "sku-1" || res.field("qty") != 1.0 || res.field("remaining") != 49.0 {
			t.Errorf("deduct with defaults = %d %s", res.status, res.body)
		}
		res = r.deduct(0, "segmented", "?qty=2")
		if res.status != 200 || res.field("segment") == nil {
			t.Errorf("segmented deduct = %d %s", res.status, res.body)
		}
		a := r.audit("atomic")
		if a.Initial != 50 || a.Stock != 47 || a.Sold != 3 || a.Oversold != 0 || !a.Consistent || a.SKU != "sku-1" {
			t.Errorf("audit = %+v", a)
		}
		r.reset("atomic", 0, 0)
		if res := r.deduct(0, "atomic", ""); res.status != 409 || res.code() != "sold_out" {
			t.Errorf("deduct of empty stock = %d %s", res.status, res.body)
		}
		res = r.do(0, "PUT", "/api/stages/watchdog/faults", `{"work":"1ms","work_max":"3ms","slow_ratio":0.01,"slow":"300ms","lock_ttl":"200ms","crash_holding_lock":false}`, auth)
		if res.status != 200 {
			t.Errorf("faults = %d %s", res.status, res.body)
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/stages"} {
			if res := r.do(0, "GET", path, "", nil); res.status != 200 || res.header.Get("X-Replica") != "r0" {
				t.Errorf("GET %s = %d %s", path, res.status, res.body)
			}
		}
	})

	t.Run("lock busy", func(t *testing.T) {
		r.reset("setnx", 10, 0)
		rdb := r.redis.Client(t)
		if err := rdb.Set(t.Context(), "lockstep:setnx:{sku-1}:lock", "someone", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if res := r.deduct(0, "setnx", ""); res.status != 423 || res.code() != "lock_busy" {
			t.Errorf("deduct while another owner holds the lock = %d %s", res.status, res.body)
		}
		if a := r.audit("setnx"); a.Stock != 10 || a.Sold != 0 {
			t.Errorf("busy deduct changed the audit: %+v", a)
		}
	})
}

// TestAdminLoopbackOnlyWithoutToken: with no token, admin routes refuse
// clients that are not on loopback and accept those that are.
func TestAdminLoopbackOnlyWithoutToken(t *testing.T) {
	r := startReplicas(t, redistest.Start(t), 1)
	h := r.shops[0].Handler()
	for _, tc := range []struct {
		remote string
		status int
	}{
		{"192.0.2.1:1234", http.StatusForbidden},
		{"[2001:db8::1]:1234", http.StatusForbidden},
		{"127.0.0.1:1234", http.StatusOK},
		{"[::1]:1234", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/stages/atomic/reset", strings.NewReader(`{"stock":5}`))
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("reset from %s = %d %s, want %d", tc.remote, rec.Code, rec.Body, tc.status)
		}
	}
	// A forwarded-for header must not make a remote client look local.
	req := httptest.NewRequest(http.MethodPut, "/api/stages/atomic/faults", strings.NewReader(`{}`))
	req.Header.Set("X-Forwarded-For", "127.0.0.1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("faults from 192.0.2.1 claiming 127.0.0.1 = %d", rec.Code)
	}
}
