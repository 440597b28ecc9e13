package loadgen

import (
	"context"
	"github.com/lockstep/lockstep/internal/storeview"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// TestRedisPassword: the load generator reads the Redis it is given (its
// version for the report, lock keys after a crash) with the password, and
// says so in the report when the password is wrong.
func TestRedisPassword(t *testing.T) {
	srv := redistest.Start(t)
	const password = "loadgen-secret"
	// Set after the start, so redistest's readiness probe needs no password;
	// from then on every new connection must AUTH, as with --requirepass.
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs: [{stage: atomic, stock: 5, workers: 1, rate: 50, duration: 100ms}]"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password string
		ok       bool
	}{
		{password, true},
		{"wrong", false},
		{"", false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rep, err := Run(ctx, Config{Target: fake.proxy, Scenario: sc, Stores: openStores(t, storeview.Addrs{Addr: srv.Addr, Password: tc.password})})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := rep.Redis
		if tc.ok && (got.Kind != "redis-server" || got.Version == "" || got.Note != "") {
			t.Errorf("password %q: report's Redis %+v, want redis-server with its version", tc.password, got)
		}
		if !tc.ok && (got.Version != "" || !strings.Contains(got.Note, "AUTH") && !strings.Contains(got.Note, "WRONGPASS")) {
			t.Errorf("password %q: report's Redis %+v, want the authentication error", tc.password, got)
		}
	}
}

// openStores opens a view of the shops' Redis for a run, closed with the
// test.
func openStores(t *testing.T, a storeview.Addrs) *storeview.View {
	t.Helper()
	v := storeview.Open(a)
	t.Cleanup(func() { _ = v.Close() })
	return v
}
