package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestAsyncOutagesScenario runs scenarios/async-outages.yaml on real
// processes (redis-server, three shops, nginx, MariaDB, two order workers):
// async-stream through MariaDB stopped for 6 s, and through a kill -9 and
// restart of Redis without persistence and with AOF everysec. Each row must
// come out as its comment predicts (the scenario's checks, failed ones fail
// the test in faultRows); beyond them: the sales never waited for the
// stopped database, the restart without persistence lost sales answered
// 200 and the stock, the one with AOF lost none.
func TestAsyncOutagesScenario(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	require(t, "mariadbd", "mariadbd")
	bins := buildBinaries(t)
	out := filepath.Join(t.ArtifactDir(), "async-outages")
	rep, stdout, _ := runWorkshop(t, 4*time.Minute, "--shop-bin", bins.shop, "--scenario", "async-outages", "--out", out)
	t.Logf("report in %s:\n%s", out, stdout)
	rows := faultRows(t, rep)
	for key, r := range rows {
		t.Logf("%s: notes %q, stream after draining %+v", key, r.Fault.Notes, r.Audit.Stream)
	}

	down := row(t, rows, "orders-down/async-stream, MariaDB stopped 6 s")
	if o, a := down.Fault.OrderOutage, down.Fault.AsyncOrders; o == nil || a == nil || o.Failures != 0 || a.AtHeal == nil ||
		a.AtHeal.Entries() == 0 || a.Admitted != down.Sales || a.WithoutOrder != 0 || down.Audit.Stream.LagP99 < 5*time.Second {
		t.Errorf("orders-down: outage %+v, async %+v, %d sales, lag p99 %v; want no 503, a backlog at SIGCONT, every sale an order, the lag p99 past 5 s",
			o, a, down.Sales, down.Audit.Stream.LagP99)
	}

	none := row(t, rows, "redis-restart/async-stream, Redis restarted, no persistence")
	if a, o := none.Fault.AsyncOrders, none.Fault.Outage; a == nil || o == nil || a.WithoutOrder == 0 || o.InitialKept ||
		none.Audit.Initial == 5000 || none.Audit.Orders.Undersold >= 0 || a.RebuyStatus != http.StatusOK || none.Audit.Stream.DeadLetters < 1 {
		t.Errorf("redis-restart, none: async %+v, outage %+v, audit %+v; want sales without orders, the stock started again (undersold < 0), the buyer bought again and its second order dead-lettered",
			a, o, none.Audit)
	}

	aof := row(t, rows, "redis-restart/async-stream, Redis restarted, AOF everysec")
	if a := aof.Fault.AsyncOrders; a == nil || a.AtFault.Entries() == 0 || a.WithoutOrder != 0 || a.RebuyStatus != http.StatusConflict || aof.Audit.Stream.DeadLetters != 0 {
		t.Errorf("redis-restart, aof-everysec: async %+v, audit %+v; want a backlog at the kill, every sale an order, the buyer refused", a, aof.Audit)
	}
}
