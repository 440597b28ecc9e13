package loadgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/expect"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// FuzzParseScenario: any bytes as a scenario file. ParseScenario never
// panics; what it accepts satisfies every rule a run relies on (so a bad
// file fails before anything is attacked), and survives the trip through
// report.json: the JSON of an accepted scenario parses back to the same
// scenario. The repository's scenario files are seeds, besides
// testdata/fuzz/FuzzParseScenario. By hand:
//
//	go test -run '^$' -fuzz '^FuzzParseScenario$' -fuzztime 10m ./internal/loadgen/
func FuzzParseScenario(f *testing.F) {
	for _, pattern := range []string{"../../scenarios/*.yaml", "../../cmd/workshop/testdata/*.yaml", "../../deploy/testdata/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, doc := range []string{
		"runs: [{stage: naive}]",
		`{"runs": [{"stage": "atomic", "rate": "max", "duration": "1s", "until_sold_out": true}]}`,
		"runs: [{stage: setnx, crash: {observe: 1s, workers: -3, rate: 5}}]",
		"runs: [{stage: segmented, segments: -2}]",
		"runs: [{stage: watchdog, faults: {work: 5ms, work_max: 2ms, lock_ttl: 10us}}]",
		"runs: [{stage: naive, faults: {slow: 2h}}]",
		"runs: [{stage: naive, rate: -1}]",
		"runs: [{stage: naive, expect: [faster-than]}]",
		"name: &a x\nruns: [{stage: *a}]",
		"runs: [{stage: naive, timeout: 0s, duration: 1ns}]",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data, shoprules.Shop())
		if err != nil {
			if sc != nil {
				t.Fatalf("ParseScenario returned a scenario with the error %v", err)
			}
			return
		}
		checkScenarioRules(t, sc)
		encoded, err := json.Marshal(sc)
		if err != nil {
			t.Fatalf("encode accepted scenario: %v", err)
		}
		again, err := ParseScenario(encoded, shoprules.Shop())
		if err != nil {
			t.Fatalf("the JSON of an accepted scenario is refused: %v\n%s", err, encoded)
		}
		if !reflect.DeepEqual(again, sc) {
			t.Fatalf("JSON round trip changed the scenario:\n%s\nparsed back as\n%+v", encoded, again)
		}
	})
}

// checkScenarioRules asserts what the runner takes for granted of a parsed
// scenario.
func checkScenarioRules(t *testing.T, sc *plan.Scenario) {
	t.Helper()
	if sc.SKU == "" || len(sc.Runs) == 0 {
		t.Fatalf("accepted a scenario without SKU or runs: %+v", sc)
	}
	for i, run := range sc.Runs {
		f := run.Faults
		broken := map[string]bool{
			"no stage":                   run.Stage == "",
			"unknown via":                run.Via != plan.ViaProxy && run.Via != plan.ViaOneReplica,
			"stock < 1":                  run.Stock < 1,
			"segments < 0":               run.Segments < 0,
			"workers < 1":                run.Workers < 1,
			"rate < 0":                   run.AttackRate() < 0,
			"duration <= 0":              run.Duration <= 0,
			"timeout <= 0":               run.Timeout <= 0,
			"fault duration < 0":         f.Work < 0 || f.WorkMax < 0 || f.Slow < 0 || f.LockTTL < 0,
			"slow_ratio out of 0..1":     !(f.SlowRatio >= 0 && f.SlowRatio <= 1),
			"crash fault in load":        f.CrashHoldingLock,
			"crash observe <= 0":         run.Crash != nil && run.Crash.Observe <= 0,
			"crash workers < 1":          run.Crash != nil && run.Crash.Workers < 1,
			"crash rate not fixed":       run.Crash != nil && run.Crash.Rate <= 0,
			"expectation does not parse": !expectationsParse(run.Expect),
		}
		for rule, bad := range broken {
			if bad {
				t.Fatalf("runs[%d] accepted with %s: %+v", i, rule, run)
			}
		}
	}
}

func expectationsParse(texts []string) bool {
	for _, e := range texts {
		if err := expect.Parse(e); err != nil {
			return false
		}
	}
	return true
}
