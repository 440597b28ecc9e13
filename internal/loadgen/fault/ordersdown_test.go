package fault

import (
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// An orders-down step counts the answers to the sales the order
// database's stop caught, sent before it continued and unanswered when it
// stopped: the 503s, the slowest of them, the ones that said their units
// stay taken, the unanswered; its checks judge them. A sale sent a moment
// before the stop whose insert hung in it is caught: with the group
// commit it may be the only one to fail (its batch times out, the sales
// queued behind it sell once the database continues).
func TestOrdersDownCountsTheSalesTheStopCaught(t *testing.T) {
	down := time.Now()
	up := down.Add(6 * time.Second)
	at := func(d time.Duration) time.Time { return down.Add(d) }
	fail := func(sent time.Duration, took time.Duration, body string) vegeta.Result {
		return vegeta.Result{Code: 503, Timestamp: at(sent), Latency: took, Body: []byte(body)}
	}
	results := []vegeta.Result{
		{Code: 200, Timestamp: at(-time.Second), Latency: time.Millisecond},                                                                          // answered before: not counted
		{Code: 200, Timestamp: at(-10 * time.Millisecond), Latency: 9 * time.Millisecond},                                                            // answered before: not counted
		fail(-5*time.Millisecond, 5*time.Second, `{"error":"orders_unavailable","message":"inventory: insert order (voided, units given back): …"}`), // on the wire at the stop: caught
		fail(0, 5*time.Second, `{"error":"orders_unavailable","message":"inventory: insert order (voided, units given back): …"}`),
		fail(time.Millisecond, 9800*time.Millisecond, `{"error":"may_have_sold","message":"inventory: insert order (not voided: the order may still land; until it does its units count as undersold): …"}`),
		fail(2*time.Millisecond, 5100*time.Millisecond, `{"error":"orders_unavailable","message":"inventory: insert order (voided; its units stay taken, undersold): …"}`),
		{Code: 200, Timestamp: at(3 * time.Second), Latency: 3 * time.Second}, // slow, then sold
		{Code: 0, Timestamp: at(4 * time.Second), Error: "timeout"},
		fail(5*time.Second, time.Millisecond, `{"error":"redis_unavailable","message":"…"}`), // the wrong code
		fail(7*time.Second, time.Millisecond, `{"error":"redis_unavailable"}`),               // after: not counted
	}
	o := orderOutage(results, down, up)
	want := report.OrderOutageReport{DownMS: 6000, Answers: 7, Failures: 5, MaxFailMS: 9800, OtherCodes: 1, Unanswered: 1, SaidUndersold: 2}
	if *o != want {
		t.Fatalf("outage %+v, want %+v", *o, want)
	}
}
