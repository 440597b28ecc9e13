package loadgen

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// A stage the shop does not have is an error before any stage runs,
// naming it and the shop's stages: a misspelt stage used to become a
// skipped row, and a scenario of it alone "met every expectation".
func TestUnknownStageFailsBeforeAnyRun(t *testing.T) {
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: atomic\n    duration: 300ms\n  - stage: atomik\n    expect: [no-oversell]\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Config{Target: fake.proxy, Scenario: sc})
	if !errors.Is(err, ErrUnknownStage) || rep != nil {
		t.Fatalf("Run = %v, %v; want ErrUnknownStage and no report", rep, err)
	}
	for _, want := range []string{`"atomik"`, "atomic", "racy", "absent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
	fake.shop.mu.Lock()
	defer fake.shop.mu.Unlock()
	if s := fake.shop.stage("atomic"); s.initial != 0 || s.sold != 0 {
		t.Errorf("atomic ran before the unknown stage was reported: %+v", s)
	}
}

// A run whose expectations were never judged — every run that had some
// was skipped — has not met them.
func TestNothingJudgedIsNotMet(t *testing.T) {
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: absent\n    expect: [no-oversell]\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), Config{Target: fake.proxy, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	verdict := rep.Verdict()
	if rep.ExpectationsMet || !errors.Is(verdict, report.ErrExpectationsNotMet) || !strings.Contains(verdict.Error(), "judged") {
		t.Fatalf("only a skipped stage: expectations met %t, verdict %v; want not met, saying nothing was judged", rep.ExpectationsMet, verdict)
	}
}

// Ctrl-C during a stage keeps what it measured: the final audit is read
// on a fresh context, the row has its figures and is marked interrupted,
// and the table shows them.
func TestInterruptedStageKeepsItsFigures(t *testing.T) {
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: atomic\n    stock: 100000\n    rate: 200\n    duration: 1m\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	rep, err := Run(ctx, Config{Target: fake.proxy, Scenario: sc})
	if !errors.Is(err, context.Canceled) || rep == nil || len(rep.Stages) != 1 {
		t.Fatalf("Run = %v; want context.Canceled and the row", err)
	}
	row := rep.Stages[0]
	if row.Error != "" || !row.Interrupted || row.Sales == 0 || row.Audit.Sold != row.Sales || row.Audit.Initial != 100000 || !row.Consistent {
		t.Fatalf("interrupted row: error %q interrupted %t sales %d audit %+v consistent %t; want the figures and the audit kept",
			row.Error, row.Interrupted, row.Sales, row.Audit, row.Consistent)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "interrupted") || strings.Contains(table.String(), "FAILED") {
		t.Errorf("the table does not show the interrupted row's figures:\n%s", table.String())
	}
}
