package loadgen

import (
	"testing"
)

// A plain load run's holder checks read the audit's count, as a fault
// step's do: racy lets several sales into its critical section at once.
func TestPlainRunReadsTheHoldersCount(t *testing.T) {
	fake := startFakeShop(t, 2)
	rep := fake.run(t, `
name: holders
runs:
  - stage: racy
    stock: 60
    workers: 16
    duration: 2s
    until_sold_out: true
    faults: {work: 5ms, track_holders: true}
    expect: [holders-at-least 2]
  - stage: racy
    stock: 60
    workers: 16
    duration: 2s
    until_sold_out: true
    faults: {work: 5ms, track_holders: true}
    expect: [holders-at-most 1]
`)
	least, most := rep.Stages[0], rep.Stages[1]
	if least.MaxHolders == nil || *least.MaxHolders < 2 || !least.Passed() {
		t.Errorf("holders-at-least 2: max holders %v, checks %+v", least.MaxHolders, least.Checks)
	}
	if most.Passed() {
		t.Errorf("holders-at-most 1 passed on a stage that let %v in at once: %+v", most.MaxHolders, most.Checks)
	}
}

// At a fixed rate, a server that stalls 500 ms shows in the latency: the
// requests due during the stall count from when they were due, not from
// when a freed worker got round to sending them (coordinated omission).
func TestFixedRateLatencyCountsFromTheSchedule(t *testing.T) {
	fake := startFakeShop(t, 1)
	rep := fake.run(t, `
name: stall
runs:
  - stage: stall
    stock: 1000
    rate: 100
    workers: 2
    duration: 1500ms
    until_sold_out: false
`)
	r := rep.Stages[0]
	t.Logf("p50 %.1f p90 %.1f p99 %.1f ms; vegeta's own p50 %.1f p99 %.1f ms", r.P50MS, r.P90MS, r.P99MS, *r.ServiceP50MS, *r.ServiceP99MS)
	// ~50 of ~150 requests were due during the stall: p90 waits for it.
	if r.P90MS < 200 || r.ServiceP99MS == nil || *r.ServiceP50MS >= r.P90MS || r.SaleP99MS < 200 {
		t.Errorf("stalled 500 ms at 100/s: p50 %.1f p90 %.1f p99 %.1f ms, sales p99 %.1f, uncorrected p50 %v p99 %v; want p90 and p99 past 200 ms",
			r.P50MS, r.P90MS, r.P99MS, r.SaleP99MS, r.ServiceP50MS, r.ServiceP99MS)
	}
}
