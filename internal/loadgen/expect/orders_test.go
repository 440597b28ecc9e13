package expect

import (
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

func TestOrderExpectations(t *testing.T) {
	run := func(initial, stock int, o inventory.OrderCounts) *report.StageRun {
		return &report.StageRun{Answers: report.Answers{Sales: 1}, Outcome: report.Outcome{Audit: report.Audit{Initial: initial, Stock: stock, Orders: &o}}}
	}
	dup := inventory.OrderCounts{Counts: orders.Counts{Orders: 10, Units: 10, Buyers: 7}, DuplicateOrders: 3}
	clean := inventory.OrderCounts{Counts: orders.Counts{Orders: 10, Units: 10, Buyers: 10}}
	refused := clean
	refused.Conflicts = 50
	lost := clean
	lost.Undersold = 1
	// A unit an async stage's sweeper cancelled, read before its return:
	// neither on sale nor live, but accounted for.
	returning := clean
	returning.Returning = 1
	for _, tc := range []struct {
		check string
		run   *report.StageRun
		want  bool
	}{
		{"duplicate-orders", run(10, 0, dup), true},
		{"duplicate-orders", run(10, 0, clean), false},
		{"no-duplicate-orders", run(10, 0, clean), true},
		{"undersells", run(100, 90, refused), true}, // stock left after conflicts: 少卖
		{"undersells", run(100, 90, clean), false},  // a run that ended early is no undersell
		{"undersells", run(11, 0, lost), true},      // a unit taken without an order
		{"no-undersell", run(10, 0, clean), true},
		{"orders-match-stock", run(10, 0, clean), true},
		{"orders-match-stock", run(11, 0, lost), false},
		{"orders-match-stock", run(11, 0, returning), true},
		{"no-undersell", run(11, 0, returning), true},
		{"no-duplicate-orders", &report.StageRun{Answers: report.Answers{Sales: 1}}, false}, // not an order stage
		{"undersold-after-crash", crashed(1), true},
		{"undersold-after-crash", crashed(0), false},
		{"no-undersold-after-crash", crashed(0), true},
		{"no-undersold-after-crash", &report.StageRun{CrashOutcome: report.CrashOutcome{Crash: &report.CrashReport{}}}, false}, // nothing crashed
	} {
		ok, detail := orderChecks[tc.check](tc.run, nil)
		if ok != tc.want {
			t.Errorf("%s on %+v: %v (%s), want %v", tc.check, tc.run.Audit, ok, detail, tc.want)
		}
	}
}

// crashed is a run whose crash step left undersold units.
func crashed(undersold int64) *report.StageRun {
	return &report.StageRun{CrashOutcome: report.CrashOutcome{Crash: &report.CrashReport{Triggered: true, Undersold: &undersold}}}
}
