package loadgen

import (
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
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

// faster-than and fastest compare with the rows they name: by label, else
// the nearest plain run of the stage through the proxy; never a fault
// step's row, a failed or a one-replica run.
func TestComparisonsPickTheRowsTheyName(t *testing.T) {
	rows := []report.StageRun{
		{StageID: report.StageID{Index: 0, Stage: "watchdog", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 87}, Fault: &report.FaultReport{}},
		{StageID: report.StageID{Index: 1, Stage: "watchdog", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 267}},
		{StageID: report.StageID{Index: 2, Stage: "watchdog", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 5000}, Status: report.Status{Error: "broke off"}},
		{StageID: report.StageID{Index: 3, Stage: "watchdog", Label: "watchdog+WAIT", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 100}, Fault: &report.FaultReport{}},
		{StageID: report.StageID{Index: 4, Stage: "segmented", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 1659}},
		{StageID: report.StageID{Index: 5, Stage: "atomic", Via: plan.ViaOneReplica}, Answers: report.Answers{SalesPerSec: 90000}},
		{StageID: report.StageID{Index: 6, Stage: "atomic", Via: plan.ViaProxy}, Answers: report.Answers{SalesPerSec: 17000}},
	}
	for _, tc := range []struct {
		row    int
		check  string
		pass   bool
		detail string
	}{
		{4, "faster-than watchdog 3x", true, "6.2x watchdog (1659 vs 267"},
		{4, "faster-than watchdog 7x", false, "6.2x watchdog"},
		{4, "faster-than watchdog+WAIT 1x", true, "16.6x watchdog+WAIT"},
		{4, "faster-than nobody 1x", false, "no nobody run"},
		{6, "fastest", true, "the highest"},
		{4, "fastest", false, "atomic sold faster"},
	} {
		c, err := parseCheck(tc.check)
		if err != nil {
			t.Fatal(err)
		}
		passed, detail := c.eval(&rows[tc.row], rows)
		if passed != tc.pass || !strings.Contains(detail, tc.detail) {
			t.Errorf("%s on %s: %v %q, want %v with %q", tc.check, rows[tc.row].Stage, passed, detail, tc.pass, tc.detail)
		}
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
