package expect

import (
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
)

// TestFaultChecks: each expectation of the failure scenarios passes on the
// row it describes and fails on the row that shows the opposite.
func TestFaultChecks(t *testing.T) {
	ptr := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		check    string
		pass     report.StageRun
		fail     report.StageRun
		failWith string
	}{
		{"sales-accounted",
			report.StageRun{Answers: report.Answers{Sales: 10, Errors: 2}, Outcome: report.Outcome{Audit: report.Audit{Sold: 11}}},
			report.StageRun{Answers: report.Answers{Sales: 10, Errors: 2}, Outcome: report.Outcome{Audit: report.Audit{Sold: 13}}}, "13 sold"},
		{"sales-accounted",
			report.StageRun{Answers: report.Answers{Sales: 10}, Outcome: report.Outcome{Audit: report.Audit{Sold: 10}}},
			report.StageRun{Answers: report.Answers{Sales: 10, Errors: 5}, Outcome: report.Outcome{Audit: report.Audit{Sold: 9}}}, "9 sold"},
		{"holders-at-most 1",
			report.StageRun{MaxHolders: n(1)},
			report.StageRun{MaxHolders: n(2)}, "2 holder(s)"},
		{"holders-at-most 1", // counted, and nobody held: 0
			report.StageRun{Load: report.Load{Faults: plan.Faults{TrackHolders: true}}},
			report.StageRun{}, "not counted"},
		{"holders-at-least 2",
			report.StageRun{MaxHolders: n(2)},
			report.StageRun{MaxHolders: n(1)}, "1 holder(s)"},
		{"inconsistent",
			report.StageRun{Outcome: report.Outcome{Consistent: false}},
			report.StageRun{Outcome: report.Outcome{Consistent: true}}, "stock"},
		{"oversells-or-inconsistent",
			report.StageRun{Outcome: report.Outcome{Consistent: true, Oversold: 1}},
			report.StageRun{Outcome: report.Outcome{Consistent: true}}, "oversold 0"},
		{"victim-refused",
			report.StageRun{Fault: &report.FaultReport{VictimAnswer: "423 lock_busy", VictimStatus: 423}},
			report.StageRun{Fault: &report.FaultReport{VictimAnswer: "200", VictimStatus: 200}}, "answered 200"},
		{"victim-sold",
			report.StageRun{Fault: &report.FaultReport{VictimAnswer: "200", VictimStatus: 200}},
			report.StageRun{Fault: &report.FaultReport{}}, "no sale held"},
		{"gives-up-within 1s",
			report.StageRun{Fault: &report.FaultReport{VictimStatus: 423, VictimAnswerMS: ptr(1500), VictimLeftMS: ptr(900)}},
			report.StageRun{Fault: &report.FaultReport{VictimStatus: 423, VictimAnswerMS: ptr(1500)}}, "1500 ms"},
		{"stuck-at-least 500ms",
			report.StageRun{Fault: &report.FaultReport{StuckMS: 600}},
			report.StageRun{Fault: &report.FaultReport{StuckMS: 100}}, "stuck 100 ms"},
		{"stuck-after-crash",
			report.StageRun{Fault: &report.FaultReport{Stuck: true}},
			report.StageRun{Fault: &report.FaultReport{Stuck: false, Sales: 3, Requests: 3}}, "3 sales"},
		{"lock-without-ttl",
			report.StageRun{Fault: &report.FaultReport{LockKeys: []report.LockKey{{Key: "k", TTLMS: -1}}}},
			report.StageRun{Fault: &report.FaultReport{LockKeys: []report.LockKey{{Key: "k", TTLMS: 300}}}}, "every lock key expires"},
		{"fails-fast 1s",
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{Answers: 5, Failures: 5, MaxFailMS: 40}}},
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{Answers: 5, Failures: 5, MaxFailMS: 3000}}}, "3000 ms"},
		{"loses-everything",
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{SalesBefore: 100, LostSales: 100}}},
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{InitialKept: true, SalesBefore: 100}}}, "initial stock kept true"},
		{"loses-at-most 1s",
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{InitialKept: true, SalesBefore: 100, LostSales: 20, LostMS: 100}}},
			report.StageRun{Fault: &report.FaultReport{Outage: &report.OutageReport{InitialKept: true, SalesBefore: 100, LostSales: 400, LostMS: 2000}}}, "2000 ms"},
		{"claimed-while-down",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 3}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 3, PendingWhileDown: 3, UndersoldWhileDown: 2}}}, "3 pending, 2 units"},
		{"claimed-while-down", // killed holding nothing: nothing shown
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 2}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1"}}}, "held no entry"},
		{"rows-when-killed 0",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-read", PendingAtKill: 3}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-read", PendingAtKill: 3, RowsAtKill: 1}}}, "3 entries, 1 with their order row"},
		{"rows-when-killed 1",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-insert", PendingAtKill: 3, RowsAtKill: 1}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-insert"}}}, "held no entry"},
		{"rows-when-killed all",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-insert", PendingAtKill: 3, RowsAtKill: 3}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", At: "after-insert", PendingAtKill: 3, RowsAtKill: 2}}}, "3 entries, 2 with their order row"},
		{"missing-while-down",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 3, PendingWhileDown: 3, UndersoldWhileDown: 2}}},
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 3}}}, "0 pending, 0 units"},
		{"missing-while-down",
			report.StageRun{Fault: &report.FaultReport{WorkerKill: &report.WorkerKillReport{Worker: "w1", PendingAtKill: 3, PendingWhileDown: 1, UndersoldWhileDown: 1}}},
			report.StageRun{Fault: &report.FaultReport{Kind: plan.FaultCrash}}, "no worker-kill or duplicate-delivery step"},
	} {
		c, err := parseCheck(tc.check)
		if err != nil {
			t.Fatalf("%s: %v", tc.check, err)
		}
		if ok, detail := c.eval(&tc.pass, nil); !ok {
			t.Errorf("%s failed on %+v: %s", tc.check, tc.pass, detail)
		}
		if ok, detail := c.eval(&tc.fail, nil); ok || !strings.Contains(detail, tc.failWith) {
			t.Errorf("%s on %+v: %t, %q; want a failure saying %q", tc.check, tc.fail, ok, detail, tc.failWith)
		}
	}
	for _, bad := range []string{"holders-at-most", "holders-at-least -1", "gives-up-within soon", "loses-everything 1s", "rows-when-killed", "rows-when-killed one"} {
		if _, err := parseCheck(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The orders-down checks read the step's OrderOutageReport: every sale
// sent while the orders were down answered 503 orders_unavailable in time,
// and the audit's undersold units are the ones those answers said.
func TestOrdersDownChecks(t *testing.T) {
	want := report.OrderOutageReport{DownMS: 6000, Answers: 6, Failures: 4, MaxFailMS: 9800, OtherCodes: 1, Unanswered: 1, SaidUndersold: 2}
	within, err := ordersDownWithin([]string{"10s"})
	if err != nil {
		t.Fatal(err)
	}
	row := func(o report.OrderOutageReport, undersold int64) *report.StageRun {
		return &report.StageRun{Fault: &report.FaultReport{OrderOutage: &o}, Outcome: report.Outcome{Audit: report.Audit{Orders: &inventory.OrderCounts{Undersold: undersold}}}}
	}
	answered := want
	answered.Unanswered, answered.OtherCodes = 0, 0
	redis := answered
	redis.OtherCodes = 1
	slow := answered
	slow.MaxFailMS = 10500
	for _, tc := range []struct {
		name  string
		check checkFunc
		run   *report.StageRun
		want  bool
	}{
		{"every sale answered 503 in time", within, row(answered, 0), true},
		{"a sale unanswered", within, row(want, 0), false},
		{"a 503 that names Redis", within, row(redis, 0), false},
		{"a 503 past the deadline", within, row(slow, 0), false},
		{"no 503 at all", within, row(report.OrderOutageReport{Answers: 4}, 0), false},
		{"undersold as said", checkUndersoldSaid, row(want, 2), true},
		{"undersold beyond what was said", checkUndersoldSaid, row(want, 3), false},
		{"no outage", checkUndersoldSaid, &report.StageRun{Outcome: report.Outcome{Audit: report.Audit{Orders: &inventory.OrderCounts{}}}}, false},
	} {
		if ok, detail := tc.check(tc.run, nil); ok != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, ok, detail, tc.want)
		}
	}
}
