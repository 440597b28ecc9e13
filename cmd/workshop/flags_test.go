package main

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestUsageErrorExitsTwo: a flag the workshop does not know, or a value it
// refuses, is a usage error (2, as Go's flag package does), not a failed
// run (1); nothing is started.
func TestUsageErrorExitsTwo(t *testing.T) {
	bins := buildBinaries(t)
	for _, args := range [][]string{{"--nope"}, {"--replicas", "0"}, {"--replicas", "many"}, {"stray"}, {"--scenario", "nosuch"}} {
		// Killed after 30 s, should it run what it should refuse.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bins.workshop, args...).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("workshop %s: %v, want exit status 2:\n%s", strings.Join(args, " "), err, out)
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
