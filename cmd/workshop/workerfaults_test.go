package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// TestAsyncWorkerFaultScenario runs the async scenario's worker-kill and
// duplicate-delivery rows on real processes (redis-server, three shops,
// nginx, MariaDB, two order workers): an order worker's crash hook kills it
// with SIGKILL after a read (holding entries without rows) or after an
// insert (its batch, each with its row), and it is kept down past the claim bound. On
// async-stream the other worker claims them while it is down, the
// duplicate's insert finding its row; on async-no-claim they stay pending,
// their orders missing, until it starts again under its name. Every row
// ends drained, nothing lost or doubled.
func TestAsyncWorkerFaultScenario(t *testing.T) {
	require(t, "redis-server", "redis-server")
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	require(t, "mariadbd", "mariadbd")
	bins := buildBinaries(t)
	out := filepath.Join(t.ArtifactDir(), "worker-faults")
	rep, stdout, _ := runWorkshop(t, 5*time.Minute, "--shop-bin", bins.shop,
		"--scenario", "async", "--only", "async-stream,async-no-claim", "--out", out)
	t.Logf("report in %s:\n%s", out, stdout)
	// Rows of the held entries: none after a read, every one after a
	// batch's insert.
	rowsAtKill := func(kind string, w *report.WorkerKillReport) int64 {
		if kind == plan.FaultDuplicateDelivery {
			return w.PendingAtKill
		}
		return 0
	}
	seen := map[string]int{}
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if r.Fault == nil {
			continue
		}
		seen[r.Fault.Kind]++
		w := r.Fault.WorkerKill
		// The stream was followed while the step ran (the live page and
		// report.html show it).
		if p := r.StreamWhileRunning; p == nil || p.Samples == 0 || p.Length == 0 || p.Pending == 0 {
			t.Errorf("%s %s: stream while running %+v", r.Stage, r.Fault.Kind, p)
		}
		if !r.Passed() || w == nil || w.PendingAtKill < 1 || w.RowsAtKill != rowsAtKill(r.Fault.Kind, w) ||
			r.Audit.Stream == nil || !r.Audit.Stream.Drained() ||
			r.Audit.Orders == nil || r.Audit.Orders.Undersold != 0 || r.Audit.Orders.DuplicateOrders != 0 {
			t.Errorf("%s %s: error %q, checks %+v, worker %+v, stream %+v, orders %+v",
				r.Stage, r.Fault.Kind, r.Error, r.Checks, w, r.Audit.Stream, r.Audit.Orders)
		}
	}
	if seen[plan.FaultWorkerKill] != 2 || seen[plan.FaultDuplicateDelivery] != 1 {
		t.Errorf("fault rows %v, want 2 worker-kill (async-stream, async-no-claim) and 1 duplicate-delivery", seen)
	}
}
