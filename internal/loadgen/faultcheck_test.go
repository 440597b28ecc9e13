package loadgen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// TestFaultStepsParse: the fault steps' defaults, and what they refuse.
func TestFaultStepsParse(t *testing.T) {
	sc, err := ParseScenario([]byte("runs: [{stage: atomic, fault: {kind: redis-restart, before: 1s, hold: 1s, observe: 1s}}, {stage: watchdog, fault: {kind: failover}}]"), shoprules.Shop())
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
		if _, err := ParseScenario([]byte(doc), shoprules.Shop()); err == nil {
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
