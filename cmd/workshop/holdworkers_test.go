package main

import (
	"path/filepath"
	"testing"
)

// TestHeldOrderWorkersWriteNothingUntilTheLoadEnds runs async-stream twice
// on real processes (redis-server, three shops, nginx, MariaDB, two order
// workers): with the workers running, they write orders while the load
// runs; held (hold_workers), they write none until it ends, and then the
// whole backlog, timed.
func TestHeldOrderWorkersWriteNothingUntilTheLoadEnds(t *testing.T) {
	rep, stdout := runAsyncScenario(t, filepath.Join("testdata", "hold-workers.yaml"), t.TempDir())
	t.Logf("report:\n%s", stdout)
	if len(rep.Stages) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Stages))
	}
	running, held := &rep.Stages[0], &rep.Stages[1]
	if running.WorkersHeld || running.OrdersAtLoadEnd == 0 {
		t.Errorf("workers running: held %v, %d orders written by the load's end", running.WorkersHeld, running.OrdersAtLoadEnd)
	}
	if !held.WorkersHeld || held.OrdersAtLoadEnd != 0 || held.DrainOrdersPerSec <= 0 {
		t.Errorf("workers held: held %v, %d orders written by the load's end, %.0f orders/s in the drain",
			held.WorkersHeld, held.OrdersAtLoadEnd, held.DrainOrdersPerSec)
	}
	for _, r := range rep.Stages {
		if !r.Passed() || r.Sales == 0 || r.Audit.Orders == nil || r.Audit.Orders.Orders != int64(r.Sales) {
			t.Errorf("%s: %d sales, checks %+v, orders %+v, error %q", r.Label, r.Sales, r.Checks, r.Audit.Orders, r.Error)
		}
	}
}
