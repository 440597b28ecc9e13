package main

import (
	"path/filepath"
	"testing"
	"time"
)

// TestAsyncWorkerKillScenario runs the async scenario's worker-kill rows on
// real processes (redis-server, three shops, nginx, MariaDB, two order
// workers): an order worker is killed with SIGKILL holding entries it read
// and did not acknowledge, and kept down past the claim bound. On
// async-stream the other worker claims them while it is down; on
// async-no-claim they stay pending, their orders missing, until it starts
// again under its name. Both end drained, nothing lost or doubled.
func TestAsyncWorkerKillScenario(t *testing.T) {
	require(t, "redis-server", "redis-server")
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	require(t, "mariadbd", "mariadbd")
	bins := buildBinaries(t)
	out := filepath.Join(t.ArtifactDir(), "worker-kill")
	rep, stdout, _ := runWorkshop(t, 4*time.Minute, "--shop-bin", bins.shop,
		"--scenario", "async", "--only", "async-stream,async-no-claim", "--out", out)
	t.Logf("report in %s:\n%s", out, stdout)
	seen := 0
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if r.Fault == nil {
			continue
		}
		seen++
		w := r.Fault.WorkerKill
		// The stream was followed while the step ran (the live page and
		// report.html show it).
		if p := r.StreamWhileRunning; p == nil || p.Samples == 0 || p.Length == 0 || p.Pending == 0 {
			t.Errorf("%s: stream while running %+v", r.Stage, p)
		}
		if !r.Passed() || w == nil || w.PendingAtKill < 1 || r.Audit.Stream == nil || !r.Audit.Stream.Drained() ||
			r.Audit.Orders == nil || r.Audit.Orders.Undersold != 0 || r.Audit.Orders.DuplicateOrders != 0 {
			t.Errorf("%s: checks %+v, worker kill %+v, stream %+v, orders %+v", r.Stage, r.Checks, w, r.Audit.Stream, r.Audit.Orders)
		}
	}
	if seen != 2 {
		t.Errorf("%d worker-kill rows, want 2 (async-stream, async-no-claim)", seen)
	}
}
