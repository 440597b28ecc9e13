package shop_test

import (
	"context"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
)

// TestRedisPassword: a shop given the password of its password-protected
// Redis masters uses it on every one (stock, locks, idempotency keys and
// redlock's three masters); without it, it is not ready and answers 503
// redis_unavailable.
func TestRedisPassword(t *testing.T) {
	const password = "shop-secret"
	var servers []*redistest.Server
	var addrs []string
	for range 3 {
		srv := redistest.Start(t)
		// Set after the start, so redistest's readiness probe needs no
		// password; from then on every new connection must AUTH, as with
		// --requirepass.
		if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
			t.Fatal(err)
		}
		servers, addrs = append(servers, srv), append(addrs, srv.Addr)
	}
	withMasters := func(pw string) replicaOption {
		return func(c *shop.Config) { c.RedisAddrs, c.RedisPassword = addrs, pw }
	}

	r := startReplicas(t, servers[0], 1, withAdminToken("tok"), withMasters(password))
	if res := r.do(0, "GET", "/readyz", "", nil); res.status != 200 {
		t.Fatalf("readyz with the password = %d %s", res.status, res.body)
	}
	for _, stage := range []string{"atomic", "watchdog", "redlock"} {
		r.reset(stage, 10, 0)
		idem := map[string]string{"Idempotency-Key": "order-" + stage}
		for range 2 { // the second is a replay from the idempotency key
			if res := r.do(0, "POST", "/api/stages/"+stage+"/deduct?qty=2", "", idem); res.status != 200 {
				t.Errorf("%s deduct with the password = %d %s", stage, res.status, res.body)
			}
		}
		if a := r.audit(stage); a.Sold != 2 || !a.Consistent {
			t.Errorf("%s audit %+v, want 2 sold once", stage, a.Audit)
		}
	}

	for _, pw := range []string{"", "wrong"} {
		r := startReplicas(t, servers[0], 1, withMasters(pw))
		if res := r.do(0, "GET", "/readyz", "", nil); res.status != 503 || res.code() != "redis_unavailable" {
			t.Errorf("readyz with password %q = %d %s, want 503 redis_unavailable", pw, res.status, res.body)
		}
		if res := r.deduct(0, "atomic", ""); res.status != 503 || res.code() != "redis_unavailable" {
			t.Errorf("deduct with password %q = %d %s, want 503 redis_unavailable", pw, res.status, res.body)
		}
	}
}
