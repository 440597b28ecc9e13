package expect

import (
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
)

// drained holds when the stream is drained and no cancelled order's unit
// is still on its way back to the stock.
func TestDrainedIncludesTheSweepersReturns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stream    asyncorders.Stats
		returning int64
		want      bool
	}{
		{"drained, nothing returning", asyncorders.Stats{}, 0, true},
		{"drained, a cancelled unit not back yet", asyncorders.Stats{}, 1, false},
		{"an entry pending", asyncorders.Stats{Pending: 1}, 0, false},
	} {
		row := &report.StageRun{Outcome: report.Outcome{Audit: report.Audit{Stream: &tc.stream, Orders: &inventory.OrderCounts{Returning: tc.returning}}}}
		if ok, detail := asyncChecks["drained"](row, nil); ok != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, ok, detail, tc.want)
		}
	}
}
