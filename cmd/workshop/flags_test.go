package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

// TestUsageErrorExitsTwo: a flag the workshop does not know, a value it
// refuses, a stray argument or a scenario that names a stage no shop has
// is a usage error (2, as Go's flag package does), not a failed run (1),
// and nothing is started.
func TestUsageErrorExitsTwo(t *testing.T) {
	bins := buildBinaries(t)
	misspelt := filepath.Join(t.TempDir(), "misspelt.yaml")
	if err := os.WriteFile(misspelt, []byte("runs:\n  - stage: atomik\n    expect: [no-oversell]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		mentions string
	}{
		{[]string{"--nope"}, "nope"},
		{[]string{"--replicas", "0"}, "--replicas"},
		{[]string{"--replicas", "many"}, "many"},
		{[]string{"stray"}, "stray"},
		{[]string{"--scenario", "nosuch"}, "nosuch"},
		{[]string{"--scenario", misspelt}, `"atomik"`},
		{[]string{"--redis-masters", "0"}, "--redis-masters"},
		{[]string{"--proxy", "foo"}, "--proxy"},
		{[]string{"--redis", "foo"}, "--redis"},
		{[]string{"--lock-servers", "maybe"}, "--lock-servers"},
		{[]string{"--live-addr", "0.0.0.0:18555"}, "--live-room"},
		{[]string{"--live-addr", "nowhere"}, "--live-addr"},
		{[]string{"--shop-bin", t.TempDir()}, "--shop-bin"},
		{[]string{"--shop-bin", misspelt}, "--shop-bin"},
		{[]string{"--step=maybe"}, "maybe"},
		{[]string{"--keep=maybe"}, "maybe"},
		{[]string{"--scenario", "reshard", "--redis", "server"}, "--redis cluster"},
		{[]string{"--proxy", "go", "--limiter", "limit-nginx", "--limit-buyer", "5"}, "limit-nginx"},
		{[]string{"--limit-global", "-1"}, "--limit-buyer"},
		{[]string{"--limiter", "limit-everything"}, "--limiter"},
		{[]string{"--limiter", "limit-redis"}, "--limit-buyer or --limit-global"},
		{[]string{"--limit-buyer-burst", "0"}, "--limit-buyer-burst"},
		{[]string{"--soldout-mark-ttl", "-1s"}, "--soldout-mark-ttl"},
		{[]string{"--soldout-mark-ttl", "soon"}, "soon"},
		{[]string{"--scenario", "spike-bots", "--proxy", "go"}, "limit-nginx"},
	} {
		// Killed after 30 s, should it run what it should refuse.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bins.workshop, tc.args...).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.mentions) || strings.Contains(string(out), "workshop: live page:") {
			t.Errorf("workshop %s: %v, want exit status 2 before anything starts, saying %s:\n%s", strings.Join(tc.args, " "), err, tc.mentions, out)
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
