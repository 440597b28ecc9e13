package scenarios

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// TestDefaultShowsEverySpecExpectation checks that the built-in scenario
// asks for every line of the SPEC's "What the default workshop run must
// show" table (and fenced's row), so a trimmed scenario cannot pass for
// the workshop.
func TestDefaultShowsEverySpecExpectation(t *testing.T) {
	sc, name, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if name != DefaultName {
		t.Errorf("name %q", name)
	}
	find := func(stage, via string) *plan.RunSpec {
		for i := range sc.Runs {
			if sc.Runs[i].Stage == stage && sc.Runs[i].Via == via {
				return &sc.Runs[i]
			}
		}
		t.Fatalf("no %s run via %s", stage, via)
		return nil
	}
	for _, tc := range []struct {
		stage, via string
		crash      bool
		expect     []string
	}{
		{"naive", plan.ViaProxy, false, []string{"oversells"}},
		{"synchronized", plan.ViaOneReplica, false, []string{"no-oversell"}},
		{"synchronized", plan.ViaProxy, false, []string{"oversells"}},
		{"setnx", plan.ViaProxy, true, []string{"no-oversell", "stuck-after-crash", "lock-without-ttl", "sells-after-reset"}},
		{"setnx-expire", plan.ViaProxy, true, []string{"oversells-or-foreign-unlocks", "recovers-within 500ms"}},
		{"uuid-lua", plan.ViaProxy, false, []string{"oversells", "no-foreign-unlocks"}},
		{"watchdog", plan.ViaProxy, true, []string{"no-oversell", "recovers-within 500ms"}},
		{"segmented", plan.ViaProxy, false, []string{"no-oversell", "faster-than watchdog 3x"}},
		{"atomic", plan.ViaProxy, false, []string{"no-oversell", "fastest"}},
		{"fenced", plan.ViaProxy, true, []string{"no-oversell", "consistent", "recovers-within 500ms"}},
		{"mysql", plan.ViaProxy, true, []string{"no-oversell", "stuck-after-crash", "sells-after-reset"}},
		{"etcd", plan.ViaProxy, true, []string{"no-oversell", "consistent", "recovers-within 3500ms"}},
		{"zookeeper", plan.ViaProxy, true, []string{"no-oversell", "consistent", "recovers-within 2500ms"}},
	} {
		run := find(tc.stage, tc.via)
		if (run.Crash != nil) != tc.crash {
			t.Errorf("%s via %s: crash step %v, want %t", tc.stage, tc.via, run.Crash, tc.crash)
		}
		for _, e := range tc.expect {
			if !slices.Contains(run.Expect, e) {
				t.Errorf("%s via %s: expect %v lacks %q", tc.stage, tc.via, run.Expect, e)
			}
		}
	}
	// The same slow requests for the expiry stages and the watchdog.
	if f := find("watchdog", plan.ViaProxy).Faults; f != find("uuid-lua", plan.ViaProxy).Faults || f.Slow <= f.LockTTL {
		t.Errorf("watchdog faults %+v: want uuid-lua's, with slow requests longer than the lock TTL", f)
	}
}

func TestShippedScenariosParse(t *testing.T) {
	names := Names()
	for _, want := range []string{"default", "max-rate", "crash", "pause", "redis-restart", "failover", "partition", "lock-servers", "shards", "reshard"} {
		if !slices.Contains(names, want) {
			t.Errorf("built-in scenarios %v lack %s", names, want)
		}
	}
	for _, name := range names {
		if _, _, err := Load(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, _, err := Load(name + ".yaml"); err != nil { // the file, from this directory
			t.Errorf("%s.yaml: %v", name, err)
		}
	}
}

// TestFailureScenariosAskForIssueSix checks that each failure scenario runs
// its fault on the stages issue 6 names and asks for what they must show.
func TestFailureScenariosAskForIssueSix(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		want     map[string][]string // row label: expectations it must carry
	}{
		{"crash", map[string][]string{
			"setnx":        {"stuck-after-crash", "lock-without-ttl", "sells-after-reset"},
			"setnx-expire": {"recovers-within 2s", "sales-accounted", "holders-at-most 1"},
			"uuid-lua":     {"recovers-within 2s", "sales-accounted", "holders-at-most 1"},
			"watchdog":     {"recovers-within 2s", "sales-accounted", "holders-at-most 1"},
			"fenced":       {"recovers-within 2s", "sales-accounted", "holders-at-most 1"},
		}},
		{"pause", map[string][]string{
			"uuid-lua":        {"oversells", "inconsistent", "holders-at-least 2"},
			"watchdog":        {"oversells", "inconsistent", "holders-at-least 2"},
			"fenced":          {"no-oversell", "consistent", "holders-at-least 2"},
			"etcd":            {"oversells", "inconsistent", "holders-at-least 2"},
			"zookeeper":       {"oversells", "inconsistent", "holders-at-least 2"},
			"etcd+fence":      {"victim-refused", "no-oversell", "consistent", "holders-at-least 2"},
			"zookeeper+fence": {"victim-refused", "no-oversell", "consistent", "holders-at-least 2"},
		}},
		{"redis-restart", map[string][]string{
			"atomic, no persistence": {"fails-fast 1s", "loses-everything"},
			"atomic, AOF everysec":   {"fails-fast 1s", "loses-at-most 1s"},
		}},
		{"failover", map[string][]string{
			"watchdog":      {"holders-at-least 2"},
			"watchdog+WAIT": {"holders-at-most 1", "consistent"},
			"fenced":        {"holders-at-least 2", "no-oversell", "consistent"},
			"redlock":       {"holders-at-most 1", "consistent"},
			"etcd":          {"holders-at-most 1", "victim-sold", "consistent"},
			"zookeeper":     {"holders-at-most 1", "victim-sold", "consistent"},
		}},
		{"partition", map[string][]string{
			"watchdog": {"gives-up-within 3s", "no-oversell"},
			"fenced":   {"victim-refused", "no-oversell"},
		}},
	} {
		sc, _, err := Load(tc.scenario)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]plan.RunSpec{}
		for _, run := range sc.Runs {
			label := run.Stage
			if run.Label != "" {
				label = run.Label
			}
			if run.Fault == nil || run.Fault.Kind != tc.scenario || !run.Faults.TrackHolders && tc.scenario != "redis-restart" {
				t.Errorf("%s/%s: fault %+v, faults %+v; want a %s step counting holders", tc.scenario, label, run.Fault, run.Faults, tc.scenario)
			}
			got[label] = run
		}
		for label, expect := range tc.want {
			run, ok := got[label]
			if !ok {
				t.Errorf("%s has no %s run", tc.scenario, label)
				continue
			}
			for _, e := range expect {
				if !slices.Contains(run.Expect, e) {
					t.Errorf("%s/%s: expect %v lacks %q", tc.scenario, label, run.Expect, e)
				}
			}
		}
	}
}

func TestLoadNamesAndLists(t *testing.T) {
	sc, name, err := Load("crash, pause")
	if err != nil {
		t.Fatal(err)
	}
	crash, _, _ := Load("crash")
	pause, _, _ := Load("pause")
	if len(sc.Runs) != len(crash.Runs)+len(pause.Runs) || sc.Name != "crash+pause" || !strings.Contains(name, "scenarios/pause.yaml (built in)") {
		t.Errorf("crash, pause: %d runs named %q (%s)", len(sc.Runs), sc.Name, name)
	}
	if _, _, err := Load("no-such-scenario"); err == nil || !strings.Contains(err.Error(), "failover") {
		t.Errorf("an unknown name: %v, want the built-in names listed", err)
	}
	if _, _, err := Load("missing.yaml"); err == nil {
		t.Error("a missing file was accepted")
	}
	other := filepath.Join(t.TempDir(), "other-sku.yaml")
	if err := os.WriteFile(other, []byte("sku: sku-2\nruns: [{stage: naive}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load("crash," + other); err == nil {
		t.Error("scenarios of two SKUs were merged")
	}
}

// A directory named as a built-in scenario (the repository's orders/
// package, when run from its root) does not hide the scenario.
func TestADirectoryDoesNotHideABuiltInScenario(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("orders", 0o755); err != nil {
		t.Fatal(err)
	}
	if sc, _, err := Load("orders"); err != nil || sc.Name != "orders" {
		t.Fatalf("orders beside a directory orders/: %v", err)
	}
}
