package expect

import (
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// TestAsyncOutageChecks: each expectation of an async stage through an
// outage passes on the row its scenario predicts and fails, saying why, on
// rows that show something else.
func TestAsyncOutageChecks(t *testing.T) {
	down := func(o report.OrderOutageReport, a report.AsyncOutageReport) report.StageRun {
		return report.StageRun{Fault: &report.FaultReport{Kind: plan.FaultOrdersDown, OrderOutage: &o, AsyncOrders: &a}}
	}
	restart := func(kept bool, a report.AsyncOutageReport) report.StageRun {
		return report.StageRun{Fault: &report.FaultReport{Kind: plan.FaultRedisRestart, Outage: &report.OutageReport{InitialKept: kept}, AsyncOrders: &a}}
	}
	backlog := report.Backlog{Undelivered: 180, Pending: 20}
	queued := report.AsyncOutageReport{AtHeal: &report.Backlog{Undelivered: 500, Pending: 128}, Admitted: 900}
	lost := report.AsyncOutageReport{AtFault: backlog, Admitted: 700, AdmittedBeforeHeal: 400, WithoutOrder: 190, WithoutOrderBeforeHeal: 190, RebuyStatus: 200}
	kept := report.AsyncOutageReport{AtFault: backlog, Admitted: 700, AdmittedBeforeHeal: 400, RebuyStatus: 409}
	with := func(a report.AsyncOutageReport, f func(*report.AsyncOutageReport)) report.AsyncOutageReport {
		f(&a)
		return a
	}
	for _, tc := range []struct {
		check    string
		pass     report.StageRun
		fail     report.StageRun
		failWith string
	}{
		{"queued-while-orders-down", down(report.OrderOutageReport{Answers: 600}, queued),
			down(report.OrderOutageReport{Answers: 600, Failures: 3}, queued), "3 answered 503"},
		{"queued-while-orders-down", down(report.OrderOutageReport{Answers: 600}, queued),
			down(report.OrderOutageReport{Answers: 600}, with(queued, func(a *report.AsyncOutageReport) { a.AtHeal = &report.Backlog{} })), "0 entries unread and 0 pending"},
		{"queued-while-orders-down", down(report.OrderOutageReport{Answers: 600}, queued),
			down(report.OrderOutageReport{Answers: 600}, with(queued, func(a *report.AsyncOutageReport) { a.WithoutOrder = 2 })), "2 of 900 sales"},
		{"queued-while-orders-down", down(report.OrderOutageReport{Answers: 600}, queued),
			report.StageRun{Fault: &report.FaultReport{Kind: plan.FaultOrdersDown, OrderOutage: &report.OrderOutageReport{}}}, "no orders-down or redis-restart step on an async stage"},
		{"loses-unread-orders", restart(false, lost), restart(true, lost), "data kept true"},
		{"loses-unread-orders", restart(false, lost),
			restart(false, with(lost, func(a *report.AsyncOutageReport) { a.WithoutOrder = 0; a.WithoutOrderBeforeHeal = 0 })), "0 of 400"},
		{"loses-unread-orders", restart(false, lost), // fewer lost than were unread: a loss hidden somewhere
			restart(false, with(lost, func(a *report.AsyncOutageReport) { a.WithoutOrder = 100; a.WithoutOrderBeforeHeal = 100 })), "100 of 400"},
		{"loses-unread-orders", restart(false, lost), // a sale of after the restart lost
			restart(false, with(lost, func(a *report.AsyncOutageReport) { a.WithoutOrder = 191 })), "(1 of 300 sent after it)"},
		{"loses-unread-orders", restart(false, lost),
			restart(false, with(lost, func(a *report.AsyncOutageReport) { a.RebuyStatus = 409 })), "buying again: 409"},
		{"keeps-unread-orders", restart(true, kept), restart(false, kept), "data kept false"},
		{"keeps-unread-orders", restart(true, kept),
			restart(true, with(kept, func(a *report.AsyncOutageReport) { a.WithoutOrder = 1; a.WithoutOrderBeforeHeal = 1 })), "1 of 400"},
		{"keeps-unread-orders", restart(true, kept), // no backlog at the kill: nothing shown
			restart(true, with(kept, func(a *report.AsyncOutageReport) { a.AtFault = report.Backlog{} })), "0 entries unread and 0 pending"},
		{"keeps-unread-orders", restart(true, kept),
			restart(true, with(kept, func(a *report.AsyncOutageReport) { a.RebuyStatus = 200 })), "buying again: 200"},
	} {
		c, err := parseCheck(tc.check)
		if err != nil {
			t.Fatalf("%s: %v", tc.check, err)
		}
		if ok, detail := c.eval(&tc.pass, nil); !ok {
			t.Errorf("%s failed on the predicted row: %s", tc.check, detail)
		}
		if ok, detail := c.eval(&tc.fail, nil); ok || !strings.Contains(detail, tc.failWith) {
			t.Errorf("%s: %t, %q; want a failure saying %q", tc.check, ok, detail, tc.failWith)
		}
	}
}
