package main

import (
	"strings"
	"testing"
	"time"
)

// TestOrdersScenario runs the built-in orders scenario end to end (real
// redis-server, three shop processes, nginx or the Go proxy), its orders in
// MariaDB and, without it, in the embedded SQLite file: every rung shows
// what its scenario row predicts, and the banner and the report say where
// the orders were kept.
func TestOrdersScenario(t *testing.T) {
	require(t, "redis-server", "redis-server")
	for _, tc := range []struct {
		name, lockServers, store string
	}{
		{"mariadb", "auto", "MariaDB at "},
		{"embedded sqlite", "off", "embedded SQLite "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lockServers == "auto" {
				require(t, "mariadbd", "mariadbd")
			}
			bins := buildBinaries(t)
			rep, _, stderr := runWorkshop(t, 4*time.Minute, "--shop-bin", bins.shop, "--lock-servers", tc.lockServers,
				"--scenario", "orders", "--out", t.TempDir())
			if !strings.Contains(stderr, "orders: "+tc.store) || !strings.HasPrefix(rep.Orders, tc.store) {
				t.Errorf("report keeps orders in %q; want %q in it and in the banner:\n%s", rep.Orders, tc.store, stderr)
			}
			for _, r := range rep.Stages {
				if !r.Passed() || r.Audit.Orders == nil {
					t.Errorf("%s: checks %+v, orders %+v", r.Stage, r.Checks, r.Audit.Orders)
				}
			}
		})
	}
}

// TestOrdersDownScenario stops the workshop's MariaDB (SIGSTOP) for 6 s
// under load of one-per-user-lua: the sales the stop catches answer 503
// within the sale's deadline or sell late, no unit is taken without an
// order unless an answer said so, and sales resume once it continues.
func TestOrdersDownScenario(t *testing.T) {
	require(t, "redis-server", "redis-server")
	require(t, "mariadbd", "mariadbd")
	bins := buildBinaries(t)
	rep, _, stderr := runWorkshop(t, 3*time.Minute, "--shop-bin", bins.shop, "--scenario", "orders-down", "--out", t.TempDir())
	for _, r := range rep.Stages {
		if !r.Passed() || r.Fault == nil || r.Fault.OrderOutage == nil || r.Fault.OrderOutage.Failures == 0 {
			t.Errorf("%s: checks %+v, fault %+v:\n%s", r.Stage, r.Checks, r.Fault, stderr)
		}
	}
}
