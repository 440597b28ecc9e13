package expect

import (
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

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
