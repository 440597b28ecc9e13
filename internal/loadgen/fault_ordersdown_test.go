package loadgen

import (
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
)

// An orders-down step counts the answers to the sales sent while the
// order database was stopped: the 503s, the slowest of them, the ones
// that said their units stay taken, the unanswered; its checks judge them.
func TestOrdersDownCountsTheSalesSentWhileStopped(t *testing.T) {
	down := time.Now()
	up := down.Add(6 * time.Second)
	at := func(d time.Duration) time.Time { return down.Add(d) }
	fail := func(sent time.Duration, took time.Duration, body string) vegeta.Result {
		return vegeta.Result{Code: 503, Timestamp: at(sent), Latency: took, Body: []byte(body)}
	}
	results := []vegeta.Result{
		{Code: 200, Timestamp: at(-time.Second), Latency: time.Millisecond}, // before: not counted
		fail(0, 5*time.Second, `{"error":"orders_unavailable","message":"inventory: insert order (voided, units given back): …"}`),
		fail(time.Millisecond, 9800*time.Millisecond, `{"error":"orders_unavailable","message":"inventory: insert order (not voided: the order may still land; until it does its units count as undersold): …"}`),
		fail(2*time.Millisecond, 5100*time.Millisecond, `{"error":"orders_unavailable","message":"inventory: insert order (voided; its units stay taken, undersold): …"}`),
		{Code: 200, Timestamp: at(3 * time.Second), Latency: 3 * time.Second}, // slow, then sold
		{Code: 0, Timestamp: at(4 * time.Second), Error: "timeout"},
		fail(5*time.Second, time.Millisecond, `{"error":"redis_unavailable","message":"…"}`), // the wrong code
		fail(7*time.Second, time.Millisecond, `{"error":"redis_unavailable"}`),               // after: not counted
	}
	o := orderOutage(results, down, up)
	want := report.OrderOutageReport{DownMS: 6000, Answers: 6, Failures: 4, MaxFailMS: 9800, OtherCodes: 1, Unanswered: 1, SaidUndersold: 2}
	if *o != want {
		t.Fatalf("outage %+v, want %+v", *o, want)
	}
	within, err := ordersDownWithin([]string{"10s"})
	if err != nil {
		t.Fatal(err)
	}
	row := func(o report.OrderOutageReport, undersold int64) *report.StageRun {
		return &report.StageRun{Fault: &report.FaultReport{OrderOutage: &o}, Outcome: report.Outcome{Audit: report.Audit{Orders: &inventory.OrderCounts{Undersold: undersold}}}}
	}
	answered := want
	answered.Unanswered, answered.OtherCodes = 0, 0
	redis := answered
	redis.OtherCodes = 1
	slow := answered
	slow.MaxFailMS = 10500
	for _, tc := range []struct {
		name  string
		check checkFunc
		run   *report.StageRun
		want  bool
	}{
		{"every sale answered 503 in time", within, row(answered, 0), true},
		{"a sale unanswered", within, row(want, 0), false},
		{"a 503 that names Redis", within, row(redis, 0), false},
		{"a 503 past the deadline", within, row(slow, 0), false},
		{"no 503 at all", within, row(report.OrderOutageReport{Answers: 4}, 0), false},
		{"undersold as said", checkUndersoldSaid, row(want, 2), true},
		{"undersold beyond what was said", checkUndersoldSaid, row(want, 3), false},
		{"no outage", checkUndersoldSaid, &report.StageRun{Outcome: report.Outcome{Audit: report.Audit{Orders: &inventory.OrderCounts{}}}}, false},
	} {
		if ok, detail := tc.check(tc.run, nil); ok != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, ok, detail, tc.want)
		}
	}
}
