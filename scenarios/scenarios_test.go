package scenarios

import (
	"slices"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// TestDefaultShowsEverySpecExpectation checks that the built-in scenario
// asks for every line of the SPEC's "What the default workshop run must
// show" table, so a trimmed scenario cannot pass for the workshop.
func TestDefaultShowsEverySpecExpectation(t *testing.T) {
	sc, name, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if name != DefaultName {
		t.Errorf("name %q", name)
	}
	find := func(stage, via string) *loadgen.RunSpec {
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
		{"naive", loadgen.ViaProxy, false, []string{"oversells"}},
		{"synchronized", loadgen.ViaOneReplica, false, []string{"no-oversell"}},
		{"synchronized", loadgen.ViaProxy, false, []string{"oversells"}},
		{"setnx", loadgen.ViaProxy, true, []string{"no-oversell", "stuck-after-crash", "lock-without-ttl", "sells-after-reset"}},
		{"setnx-expire", loadgen.ViaProxy, true, []string{"oversells-or-foreign-unlocks", "recovers-within 500ms"}},
		{"uuid-lua", loadgen.ViaProxy, false, []string{"oversells", "no-foreign-unlocks"}},
		{"watchdog", loadgen.ViaProxy, true, []string{"no-oversell", "recovers-within 500ms"}},
		{"segmented", loadgen.ViaProxy, false, []string{"no-oversell", "faster-than watchdog 3x"}},
		{"atomic", loadgen.ViaProxy, false, []string{"no-oversell", "fastest"}},
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
	if f := find("watchdog", loadgen.ViaProxy).Faults; f != find("uuid-lua", loadgen.ViaProxy).Faults || f.Slow <= f.LockTTL {
		t.Errorf("watchdog faults %+v: want uuid-lua's, with slow requests longer than the lock TTL", f)
	}
}

func TestShippedScenariosParse(t *testing.T) {
	for _, path := range []string{"default.yaml", "max-rate.yaml"} {
		if _, _, err := Load(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
