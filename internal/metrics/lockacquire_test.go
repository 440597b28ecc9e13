package metrics

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/lockstep/lockstep/inventory"
	"github.com/prometheus/client_golang/prometheus"
)

// TestLockAcquireSeries: the cached children are the vectors' own series,
// one per stage and result, made only when first seen.
func TestLockAcquireSeries(t *testing.T) {
	m := New(nil, slog.Default())
	for range 3 {
		m.LockAcquire("watchdog", time.Millisecond, inventory.LockAcquired)
	}
	m.LockAcquire("watchdog", time.Millisecond, inventory.LockBusy)
	m.LockAcquire("fenced", time.Millisecond, inventory.LockAcquired)
	reg := prometheus.NewRegistry() // the shop's also scrapes the (here absent) auditor
	reg.MustRegister(m.acquisitions, m.lockWait)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range s.GetLabel() {
				key += " " + l.GetValue() // labels come sorted by name: result, stage
			}
			switch mf.GetName() {
			case "lockstep_lock_acquisitions_total":
				got[key] = s.GetCounter().GetValue()
			case "lockstep_lock_wait_seconds":
				got[key] = float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"lockstep_lock_acquisitions_total acquired fenced":   1,
		"lockstep_lock_acquisitions_total acquired watchdog": 3,
		"lockstep_lock_acquisitions_total busy watchdog":     1,
		"lockstep_lock_wait_seconds fenced":                  1,
		"lockstep_lock_wait_seconds watchdog":                4,
	}
	if !maps.Equal(got, want) {
		t.Errorf("lock series %v, want %v (no series for a result never seen)", got, want)
	}
}

// BenchmarkLockAcquire is the metrics' cost of one lock stage's sale.
func BenchmarkLockAcquire(b *testing.B) {
	m := New(nil, slog.Default())
	for b.Loop() {
		m.LockAcquire("watchdog", time.Millisecond, inventory.LockAcquired)
	}
}

// Every lock stage's sale reports its acquisition: once its series exist,
// that allocates nothing (a sync.Map keyed by any boxed the stage and the
// series' key, two allocations per sale).
func TestLockAcquireAllocatesNothingOnceSeen(t *testing.T) {
	m := New(nil, slog.Default())
	m.LockAcquire("watchdog", time.Millisecond, inventory.LockAcquired)
	if n := testing.AllocsPerRun(100, func() { m.LockAcquire("watchdog", time.Millisecond, inventory.LockAcquired) }); n != 0 {
		t.Errorf("LockAcquire allocates %.0f times per call, want 0", n)
	}
}
