package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestHelpExitsZero: asking for the usage is no failure.
func TestHelpExitsZero(t *testing.T) {
	bins := buildBinaries(t)
	out, err := exec.Command(bins.workshop, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("workshop --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"-step", "-only", "-live-addr"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("the usage does not mention %s:\n%s", flag, out)
		}
	}
}

// TestOnlyKeepsSomeStages: --only keeps the runs of the stages named, in
// the scenario's order, and refuses a list that keeps none.
func TestOnlyKeepsSomeStages(t *testing.T) {
	o, err := parseFlags([]string{"--only", "segmented,watchdog"})
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := loadScenario(o)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, run := range sc.Runs {
		stages = append(stages, run.Stage)
	}
	if !slices.Equal(stages, []string{"watchdog", "segmented"}) {
		t.Errorf("--only segmented,watchdog runs %v, want watchdog then segmented", stages)
	}
	if o, _ := parseFlags([]string{"--only", "nosuch"}); o.only != "nosuch" {
		t.Fatal("--only not parsed")
	} else if _, _, err := loadScenario(o); err == nil {
		t.Error("--only nosuch: no error")
	}
}
