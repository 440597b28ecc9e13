package loadgen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
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

// TestFaultStepsParse: the fault steps' defaults, and what they refuse.
func TestFaultStepsParse(t *testing.T) {
	sc, err := ParseScenario([]byte("runs: [{stage: atomic, fault: {kind: redis-restart, before: 1s, hold: 1s, observe: 1s}}, {stage: watchdog, fault: {kind: failover}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if f := sc.Runs[0].Fault; f.Persistence != plan.PersistenceNone || f.Rate != 100 || f.Workers != 32 {
		t.Errorf("redis-restart defaults: %+v", f)
	}
	if f := sc.Runs[1].Fault; f.Target != plan.FailoverMaster {
		t.Errorf("failover defaults: %+v", f)
	}
	for _, doc := range []string{
		"runs: [{stage: setnx, fault: {kind: crash, observe: 1s}}]",                                   // no victim_work
		"runs: [{stage: watchdog, fault: {kind: pause, hold: 2s, observe: 1s}}]",                      // observe ends before the pause
		"runs: [{stage: watchdog, fault: {kind: partition, victim_work: 1s, hold: 2s, observe: 3s}}]", // the victim finishes inside the cut
		"runs: [{stage: atomic, fault: {kind: redis-restart, before: 1s, hold: 1s, observe: 1s, persistence: rdb}}]",
		"runs: [{stage: redlock, fault: {kind: failover, target: sentinel}}]",
		"runs: [{stage: watchdog, fault: {kind: meteor}}]",
		"runs: [{stage: watchdog, faults: {pause_before_write: true}}]",
		"runs: [{stage: setnx, crash: {observe: 1s}, fault: {kind: crash, victim_work: 1s, observe: 1s}}]",
		"runs: [{stage: watchdog, faults: {wait_replicas: 1}}]",                                        // WAIT without a timeout blocks forever
		"runs: [{stage: async-stream, fault: {kind: worker-kill, before: 1s, observe: 3s, hold: 2s}}]", // sales go on after the restart
		"runs: [{stage: async-stream, fault: {kind: worker-kill, observe: 1s, hold: 2s}}]",             // no before
		"runs: [{stage: async-stream, fault: {kind: duplicate-delivery, before: 1s, observe: 3s, hold: 2s}}]",
	} {
		if _, err := ParseScenario([]byte(doc)); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
}

// TestFaultTablePublished: the text report adds the failure scenarios'
// table, with "forever" for a stage that never sold again.
func TestFaultTablePublished(t *testing.T) {
	recovery := 1004.0
	one := int64(1)
	rep := &report.Report{Stages: []report.StageRun{
		{StageID: report.StageID{Stage: "setnx"}, Fault: &report.FaultReport{Kind: plan.FaultCrash, Stuck: true, StuckMS: 2500, WindowMS: 2500, VictimAnswer: "no answer: EOF"}, Outcome: report.Outcome{Consistent: true}},
		{StageID: report.StageID{Stage: "watchdog"}, Fault: &report.FaultReport{Kind: plan.FaultCrash, StuckMS: 1004, RecoveryMS: &recovery}, MaxHolders: &one, Outcome: report.Outcome{Consistent: true}},
	}}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"failure scenarios:", "forever (no sale in 2500 ms)", "1004 ms", "no answer: EOF", "time to recover"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "<h2>Failure scenarios</h2>") {
		t.Error("report.html lacks the failure scenarios' table")
	}
}
