package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

const fakeScenario = `
name: fake
defaults:
  stock: 60
  workers: 16
  duration: 2s
  until_sold_out: true
runs:
  - stage: racy
    faults: {work: 2ms}
    expect: [oversells, oversells-or-foreign-unlocks]
  - stage: atomic
    via: one-replica
    expect: [no-oversell, consistent, no-foreign-unlocks, faster-than racy 0.01x]
  - stage: stuck
    crash: {observe: 300ms, rate: 100}
    expect: [no-oversell, stuck-after-crash, sells-after-reset]
  - stage: expiring
    faults: {lock_ttl: 150ms}
    crash: {observe: 600ms, rate: 100}
    expect: [recovers-within 400ms]
  - stage: absent
  - stage: atomic
    rate: 200
    duration: 500ms
    until_sold_out: false
    stock: 1000
    expect: [oversells]
`

func TestRunAgainstFakeShop(t *testing.T) {
	fake := startFakeShop(t, 2)
	sc, err := ParseScenario([]byte(fakeScenario), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	var progressOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Target:      fake.proxy,
		ReplicaURLs: fake.replicas,
		Scenario:    sc,
		Progress:    &progressOut,
		Processes:   func() map[string][]int { return map[string][]int{"self-again": {os.Getpid()}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 6 {
		t.Fatalf("got %d stage runs, want 6", len(rep.Stages))
	}
	racy, oneReplica, stuck, expiring, absent, paced := &rep.Stages[0], &rep.Stages[1], &rep.Stages[2], &rep.Stages[3], &rep.Stages[4], &rep.Stages[5]

	if racy.Oversold == 0 || racy.Consistent || racy.Replicas != 2 {
		t.Errorf("racy: oversold %d consistent %t replicas %d; want oversold, inconsistent, 2 replicas", racy.Oversold, racy.Consistent, racy.Replicas)
	}
	if racy.Sales != racy.Audit.Sold {
		t.Errorf("racy: %d answers of 200 but the audit counts %d sold", racy.Sales, racy.Audit.Sold)
	}
	if racy.ForeignUnlocks == nil || *racy.ForeignUnlocks != racy.Audit.Sold/10 {
		t.Errorf("racy: foreign unlocks %v, want %d from the audit", racy.ForeignUnlocks, racy.Audit.Sold/10)
	}
	if racy.SoldOut == 0 || racy.Requests != racy.Sales+racy.SoldOut+racy.Busy+racy.Errors {
		t.Errorf("racy: requests %d != sales %d + sold-out %d + busy %d + errors %d", racy.Requests, racy.Sales, racy.SoldOut, racy.Busy, racy.Errors)
	}
	if racy.SalesPerSec <= 0 || racy.P50MS < 2 || racy.P99MS < racy.P50MS {
		t.Errorf("racy: sales/s %.0f p50 %.2f p99 %.2f; work is 2ms", racy.SalesPerSec, racy.P50MS, racy.P99MS)
	}
	if racy.CPU["loadgen"] <= 0 || racy.CPU["self-again"] <= 0 {
		t.Errorf("racy: cpu %v, want the loadgen's and the sampled process's share", racy.CPU)
	}

	if oneReplica.Replicas != 1 || oneReplica.Oversold != 0 || oneReplica.Sales != 60 || !oneReplica.Consistent {
		t.Errorf("atomic on one replica: replicas %d oversold %d sales %d consistent %t", oneReplica.Replicas, oneReplica.Oversold, oneReplica.Sales, oneReplica.Consistent)
	}

	if stuck.Crash == nil || !stuck.Crash.Triggered || stuck.Stuck == nil || !*stuck.Stuck || stuck.RecoveryMS != nil {
		t.Errorf("stuck: crash %+v stuck %v recovery %v; want a crash and no sale after it", stuck.Crash, stuck.Stuck, stuck.RecoveryMS)
	} else if stuck.Crash.Busy == 0 || stuck.Crash.SaleAfterReset == nil || !*stuck.Crash.SaleAfterReset {
		t.Errorf("stuck: busy %d after the crash, sale after reset %v", stuck.Crash.Busy, stuck.Crash.SaleAfterReset)
	}

	if expiring.RecoveryMS == nil || *expiring.RecoveryMS < 150 || *expiring.RecoveryMS > 400 {
		t.Errorf("expiring: recovery %v ms, want about the 150ms lock ttl", expiring.RecoveryMS)
	}
	if !hasEvent(expiring.Timeline, "crash") || !hasEvent(expiring.Timeline, "first sale") {
		t.Errorf("expiring: timeline events %+v, want crash and first sale", expiring.Timeline.Events)
	}

	if absent.Skipped == "" || !strings.Contains(absent.Skipped, "three Redis masters") {
		t.Errorf("absent: skipped %q, want the shop's reason", absent.Skipped)
	}

	// 200/s for 0.5s: about 100 requests, paced rather than as fast as possible.
	if paced.Requests < 80 || paced.Requests > 120 || paced.SoldOut != 0 {
		t.Errorf("paced atomic: %d requests, %d sold out; want ~100 and none", paced.Requests, paced.SoldOut)
	}

	for _, row := range rep.Stages[:4] {
		if !row.Passed() || len(row.Checks) == 0 {
			t.Errorf("%s: checks %+v", row.Stage, row.Checks)
		}
	}
	if paced.Passed() {
		t.Errorf("the paced atomic run expected an oversell it cannot have, yet passed: %+v", paced.Checks)
	}
	if rep.ExpectationsMet {
		t.Error("report says every expectation met despite a failed check")
	}
	if rep.Proxy.Kind != "fakeproxy" || rep.Proxy.Version != "1.0" {
		t.Errorf("proxy %+v, want it named from the Server header", rep.Proxy)
	}
	if !strings.Contains(progressOut.String(), "oversold so far") || !strings.Contains(progressOut.String(), "racy") {
		t.Errorf("progress output lacks status lines:\n%s", progressOut.String())
	}

	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Stages []map[string]any `json:"stages"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"stage", "replicas", "requests", "sales", "sold_out", "busy", "errors", "sales_per_sec", "p50_ms", "p99_ms", "oversold", "consistent", "foreign_unlocks"} {
		if _, ok := decoded.Stages[0][field]; !ok {
			t.Errorf("report.json stage lacks %q", field)
		}
	}
	for _, field := range []string{"stuck", "recovery_ms"} {
		if _, ok := decoded.Stages[3][field]; !ok {
			t.Errorf("report.json crash stage lacks %q", field)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"atomic (one replica)", "stuck", "skipped: unavailable", "NO: oversells"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func hasEvent(tl report.Timeline, label string) bool {
	for _, e := range tl.Events {
		if e.Label == label {
			return true
		}
	}
	return false
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: atomic\n    rate: 50\n    duration: 1m\n  - stage: racy\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, Config{Target: fake.proxy, Scenario: sc})
	if err == nil || rep == nil {
		t.Fatalf("err %v report %v; want the context's error and a partial report", err, rep)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s to stop", took)
	}
	if len(rep.Stages) != 1 || rep.Stages[0].Requests == 0 || rep.ExpectationsMet {
		t.Errorf("partial report: %+v", rep.Stages)
	}
}

// TestStageWaitsUntilTheProxyRoutesToEveryReplica: a replica back from a
// crash is ready before the proxy stops skipping it; a short stage started
// then would run on the other replicas alone.
func TestStageWaitsUntilTheProxyRoutesToEveryReplica(t *testing.T) {
	fake := startFakeShop(t, 3)
	fake.skip.Store(1)
	const skipped = time.Second
	time.AfterFunc(skipped, func() { fake.skip.Store(0) })
	sc, err := ParseScenario([]byte("runs:\n  - stage: atomic\n    stock: 30\n    until_sold_out: true\n    duration: 2s\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := Run(t.Context(), Config{Target: fake.proxy, ReplicaURLs: fake.replicas, Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	if row := rep.Stages[0]; row.Replicas != 3 {
		t.Errorf("the stage ran on %d replicas, want 3 once the proxy routes to all", row.Replicas)
	}
	if took := time.Since(start); took < skipped {
		t.Errorf("the run ended after %s, while the proxy still skipped a replica", took)
	}
}
