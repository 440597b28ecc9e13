package loadgen

import (
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/shoprules"
)

func TestParseScenarioFillsDefaults(t *testing.T) {
	sc, err := ParseScenario([]byte(`
defaults: {stock: 100, workers: 4, rate: 50}
runs:
  - stage: naive
  - stage: atomic
    rate: max
    stock: 7
    crash: {observe: 1s}
`), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	naive, atomic := sc.Runs[0], sc.Runs[1]
	if sc.SKU != "sku-1" || naive.Via != plan.ViaProxy || naive.Stock != 100 || naive.Workers != 4 || naive.AttackRate() != 50 {
		t.Errorf("naive got %+v (sku %q)", naive, sc.SKU)
	}
	if naive.Duration.D() != 5*time.Second || naive.Timeout.D() != 10*time.Second || naive.StopsWhenSoldOut() {
		t.Errorf("naive built-in defaults: duration %s timeout %s until sold out %t", naive.Duration, naive.Timeout, naive.StopsWhenSoldOut())
	}
	if atomic.AttackRate() != plan.MaxRate || atomic.Stock != 7 {
		t.Errorf("atomic: rate %s stock %d; its own values must win", atomic.AttackRate(), atomic.Stock)
	}
	if atomic.Crash.Rate != 200 || atomic.Crash.Workers != 8 {
		t.Errorf("crash step defaults: %+v", atomic.Crash)
	}
}

func TestParseScenarioAcceptsJSON(t *testing.T) {
	sc, err := ParseScenario([]byte(`{"name": "j", "runs": [{"stage": "atomic", "rate": 100, "faults": {"work": "2ms", "slow_ratio": 0.5, "slow": "1s"}}]}`), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	f := sc.Runs[0].Faults
	if sc.Name != "j" || sc.Runs[0].AttackRate() != 100 || f.Work.D() != 2*time.Millisecond || f.Slow.D() != time.Second || f.SlowRatio != 0.5 {
		t.Errorf("got %+v", sc.Runs[0])
	}
}

func TestParseScenarioRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"no runs", "name: x", "no runs"},
		{"unknown field", "runs: [{stage: naive, stok: 3}]", "stok"},
		{"missing stage", "runs: [{stock: 3}]", "stage is required"},
		{"bad via", "runs: [{stage: naive, via: direct}]", "via"},
		{"negative stock", "runs: [{stage: naive, stock: -1}]", "stock"},
		{"no stock", "runs: [{stage: naive, stock: 0}]", "stock"},
		{"no stock by default", "defaults: {stock: 0}\nruns: [{stage: naive}]", "stock"},
		{"bad rate", "runs: [{stage: naive, rate: fast}]", "rate"},
		{"bad duration", "runs: [{stage: naive, duration: 5}]", "duration"},
		{"slow ratio", "runs: [{stage: naive, faults: {slow_ratio: 2}}]", "slow_ratio"},
		{"stock over the shop's limit", "runs: [{stage: naive, stock: 1000000001}]", "stock"},
		{"negative segments", "runs: [{stage: segmented, segments: -2}]", "segments"},
		{"segments over the shop's limit", "runs: [{stage: segmented, segments: 100000}]", "segments must be within 0..1024"},
		{"work_max below work", "runs: [{stage: naive, faults: {work: 5ms, work_max: 2ms}}]", "work_max"},
		{"fault longer than the shop allows", "runs: [{stage: naive, faults: {slow: 2h}}]", "slow"},
		{"lock_ttl below 1ms", "runs: [{stage: watchdog, faults: {lock_ttl: 10us}}]", "lock_ttl"},
		{"negative crash workers", "runs: [{stage: setnx, crash: {observe: 1s, workers: -3}}]", "crash.workers"},
		{"crash in load faults", "runs: [{stage: naive, faults: {crash_holding_lock: true}}]", "crash step"},
		{"crash without observe", "runs: [{stage: setnx, crash: {rate: 10}}]", "observe"},
		{"payment share over 1", "runs: [{stage: async-stream, payment: {pay_within: 2s, share: 1.5}}]", "share"},
		{"payment without pay_within", "runs: [{stage: async-stream, payment: {share: 0.5}}]", "pay_within"},
		{"hold_workers on a lock stage", "runs: [{stage: atomic, hold_workers: true}]", "hold_workers holds the order workers of an async stage"},
		{"hold_workers with a payment step", "runs: [{stage: async-stream, hold_workers: true, payment: {pay_within: 2s}}]", "without a fault, crash or payment step"},
		{"hold_workers with a crash step", "runs: [{stage: async-two-steps, hold_workers: true, crash: {observe: 1s, workers: 1}}]", "without a fault, crash or payment step"},
		{"unknown check", "runs: [{stage: naive, expect: [sells-fast]}]", "unknown expectation"},
		{"bad check argument", "runs: [{stage: naive, expect: [faster-than watchdog three]}]", "factor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(tc.doc), shoprules.Shop())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
