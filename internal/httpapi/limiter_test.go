package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/frontdoor"
	"github.com/lockstep/lockstep/internal/shop"
)

// A request the limiter refuses loses nothing: it answers 429 rate_limited
// with Retry-After, sells nothing, and leaves its Idempotency-Key free, so
// the retry after Retry-After sells under that key, once.
func TestARateLimitedRequestLosesNothing(t *testing.T) {
	for _, limiter := range []string{frontdoor.Local, frontdoor.Redis} {
		t.Run(limiter, func(t *testing.T) {
			ts := startShop(t, testToken, func(c *shop.Config) {
				c.Limiter = limiter
				c.Limits = frontdoor.Limits{PerBuyer: frontdoor.Rate{Events: 1, Per: time.Second, Burst: 1}}
			})
			ts.reset(t, "atomic", "sku-1", 10)
			if code, body := sale(ts, t, "atomic", "sku=sku-1&user=bot"); code != http.StatusOK {
				t.Fatalf("first sale = %d %v", code, body)
			}
			req := keyedSale(context.Background(), "atomic", "order-1")
			req.URL.RawQuery = "sku=sku-1&user=bot"
			rec := ts.serve(req)
			body := checkShape(t, rec)
			after, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if rec.Code != http.StatusTooManyRequests || body["error"] != "rate_limited" || err != nil || after < 1 {
				t.Fatalf("second sale = %d %v Retry-After %q, want 429 rate_limited with Retry-After", rec.Code, body, rec.Header().Get("Retry-After"))
			}
			if a := ts.audit(t, "atomic", "sku-1"); a.Sold != 1 {
				t.Fatalf("a refused request sold: %+v", a)
			}
			if got := metricValue(t, ts.shop, "lockstep_frontdoor_refused_total"); got != 1 {
				t.Fatalf("lockstep_frontdoor_refused_total = %v after one refusal", got)
			}
			time.Sleep(time.Duration(after) * time.Second)
			req = keyedSale(context.Background(), "atomic", "order-1")
			req.URL.RawQuery = "sku=sku-1&user=bot"
			retry := ts.serve(req)
			if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("retry after Retry-After = %d %s (replayed %q), want a new sale under the key", retry.Code, retry.Body, retry.Header().Get("Idempotent-Replayed"))
			}
			if a := ts.audit(t, "atomic", "sku-1"); a.Sold != 2 || !a.Consistent {
				t.Fatalf("audit %+v, want two sales", a)
			}
		})
	}
}

// With limit-redis on one Redis an atomic request is one script run,
// admitted, refused by a limit or sold out: atomic's script judges the
// limits (inventory's admit.lua), and the limiter makes no round trip of
// its own. A refusal sells nothing and spends no token.
func TestLimitRedisIsJudgedInAtomicsScript(t *testing.T) {
	ts := startShop(t, testToken, func(c *shop.Config) {
		c.Limiter = frontdoor.Redis
		c.Limits = frontdoor.Limits{PerBuyer: frontdoor.Rate{Events: 1, Per: time.Hour, Burst: 2}}
	})
	ts.reset(t, "atomic", "sku-1", 1)
	ts.reset(t, "atomic", "sku-2", 1)
	if code, body := sale(ts, t, "atomic", "sku=sku-2&user=warm"); code != http.StatusOK { // loads the script
		t.Fatalf("warm-up sale = %d %v", code, body)
	}
	for i, step := range []struct {
		user string
		code int
		err  string
	}{
		{"bot", http.StatusOK, ""},
		{"bot", http.StatusConflict, "sold_out"},
		{"bot", http.StatusTooManyRequests, "rate_limited"},
		{"honest", http.StatusConflict, "sold_out"},
	} {
		before := scriptRuns(t, ts.rdb)
		code, body := sale(ts, t, "atomic", "sku=sku-1&user="+step.user)
		if code != step.code || errorCode(body) != step.err {
			t.Fatalf("request %d (%s) = %d %v, want %d %s", i, step.user, code, body, step.code, step.err)
		}
		if runs := scriptRuns(t, ts.rdb) - before; runs != 1 {
			t.Fatalf("request %d (%s): %d scripts ran, want 1", i, step.user, runs)
		}
	}
	if a := ts.audit(t, "atomic", "sku-1"); a.Sold != 1 || !a.Consistent {
		t.Fatalf("audit %+v, want the one unit sold", a)
	}
}
