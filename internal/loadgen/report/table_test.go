package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// The results tables keep within 100 columns whatever their texts: a
// skipped stage's reason, a failure, the checks that missed and a fault
// step's answer go below the table, whole (wrapped), instead of widening
// every row to the longest of them, and each master of a cluster has a
// line of its own.
func TestTableFitsTheTerminal(t *testing.T) {
	reason := "unavailable: the mysql stage needs --mysql-dsn (LOCKSTEP_MYSQL_DSN), and no MariaDB or MySQL server was found on PATH to start one for the workshop (install mariadb-server)"
	failure := "reset: POST http://127.0.0.1:8080/api/stages/etcd/reset: shop answered 503 redis_unavailable: inventory: redis unavailable: acquire lock: context deadline exceeded"
	victim := "503 redis_unavailable: inventory: redis unavailable: acquire lock: lock lockstep:watchdog:{sku-1}:lock: acquisition failed on the new master after the failover"
	recovery := 1004.0
	rep := &Report{Stages: []StageRun{
		{
			StageID: StageID{Stage: "synchronized", Via: plan.ViaOneReplica},
			Load:    Load{Replicas: 1},
			Answers: Answers{Requests: 1234567, Sales: 500, SoldOut: 1234067, SalesPerSec: 123456},
			Latency: Latency{P50MS: 1234.5, P99MS: 99999.9},
			Outcome: Outcome{Oversold: 12345, Consistent: true},
			Checks:  []CheckResult{{Check: "oversells-or-foreign-unlocks"}, {Check: "faster-than watchdog 3x"}, {Check: "no-errors"}},
			Shards:  []ShardLoad{{Addr: "127.0.0.1:30001", Commands: 1234567, Cores: 0.95, Segments: make([]int, 16)}, {Addr: "127.0.0.1:30002", Commands: 234567, Cores: 0.25}, {Addr: "127.0.0.1:30003", Commands: 34567, Cores: 0.05}},
		},
		{StageID: StageID{Stage: "mysql"}, Status: Status{Skipped: reason}},
		{StageID: StageID{Stage: "etcd"}, Status: Status{Error: failure}},
		{StageID: StageID{Stage: "watchdog", Label: "watchdog, AOF everysec"}, Fault: &FaultReport{Kind: plan.FaultFailover, StuckMS: 1004, RecoveryMS: &recovery, VictimAnswer: victim}, Outcome: Outcome{Consistent: true}},
	}}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a line of %d columns:\n%s", n, line)
		}
	}
	flat := strings.Join(strings.Fields(out.String()), " ")
	for _, whole := range []string{reason, failure, victim, "oversells-or-foreign-unlocks, faster-than watchdog 3x, no-errors", "1234567", "123456", "12345", "synchronized (one replica)", "watchdog, AOF everysec", "127.0.0.1:30003"} {
		if !strings.Contains(flat, whole) {
			t.Errorf("the table lacks %q:\n%s", whole, out.String())
		}
	}
	if t.Failed() {
		t.Logf("table:\n%s", out.String())
	}
}
