package scenarios

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// Every built-in scenario's tables keep within 100 columns, with its own
// row labels and figures as wide as a long run makes them: each row given
// every table's record (results, crash and fault steps, orders, order
// streams, shards), so that no table is left out.
func TestEveryScenariosTablesFitTheTerminal(t *testing.T) {
	recovery, undersold := 12345.6, int64(12345)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			sc, _, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			rep := &report.Report{Orders: "MariaDB at 127.0.0.1:33061", Stages: make([]report.StageRun, len(sc.Runs))}
			for i, run := range sc.Runs {
				r := &rep.Stages[i]
				r.Index, r.Stage, r.Label, r.Via = i, run.Stage, run.Label, run.Via
				r.Replicas, r.Requests, r.Sales, r.SoldOut, r.Busy, r.AlreadyBought, r.Errors = 3, 9999999, 999999, 9999999, 999999, 999999, 99999
				r.SalesPerSec, r.P50MS, r.P99MS = 123456, 12345.6, 123456.7
				r.Oversold, r.Consistent = 99999, true
				r.Audit.Orders = &inventory.OrderCounts{Counts: orders.Counts{Orders: 999999, Units: 999999, Buyers: 999999}, DuplicateOrders: 999999, Undersold: 99999, Conflicts: 999999}
				r.Audit.Stream = &asyncorders.Stats{Length: 9999999, Undelivered: 999999, Pending: 999999, OldestPending: 999 * time.Second, DeadLetters: 99999, LagP50: 99 * time.Second, LagP99: 999 * time.Second}
				r.DrainMS, r.DrainOrdersPerSec = 999999, 99999
				r.Crash = &report.CrashReport{Undersold: &undersold}
				r.RecoveryMS = &recovery
				if run.Fault != nil {
					r.Fault = &report.FaultReport{Kind: run.Fault.Kind, StuckMS: 99999, RecoveryMS: &recovery, VictimAnswer: "503 redis_unavailable: inventory: redis unavailable: a long answer"}
				}
				for _, c := range run.Expect {
					r.Checks = append(r.Checks, report.CheckResult{Check: c})
				}
				r.FrontDoor = run.FrontDoor
				if run.Bots != nil {
					r.Spike = &report.Spike{HonestUnits: 99999, BotUnits: 99999, RedisPerUnit: 99999.9, HonestP99MS: 12345.6, SoldOutMS: 99999, RateLimited: 9999999}
				}
				r.Shards = []report.ShardLoad{{Addr: "127.0.0.1:30001", Commands: 9999999, Cores: 1.23, Segments: make([]int, 16)}}
			}
			var out strings.Builder
			if err := rep.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if n := utf8.RuneCountInString(line); n > 100 {
					t.Errorf("a line of %d columns:\n%s", n, line)
				}
			}
			if t.Failed() {
				t.Logf("tables:\n%s", out.String())
			}
		})
	}
}
