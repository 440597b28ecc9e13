package expect

import (
	"fmt"
	"net/http"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

func asyncOutageMakers() map[string]maker { return withoutArgs(asyncOutageChecks) }

// asyncOutageChecks judge an async stage's orders through an orders-down
// or redis-restart step (fault/async.go), after draining.
var asyncOutageChecks = map[string]checkFunc{
	// The order database stopped: the sales went on without it (no 503,
	// none unanswered), their entries waited in the stream, and once it
	// continued the workers wrote every one of them.
	"queued-while-orders-down": asyncOutageCheck(func(r *report.StageRun, a *report.AsyncOutageReport) (bool, string) {
		o, h := r.Fault.OrderOutage, a.AtHeal
		if o == nil || h == nil {
			return false, "no order database outage"
		}
		return o.Answers > 0 && o.Failures == 0 && o.Unanswered == 0 && h.Entries() > 0 && a.Admitted > 0 && a.WithoutOrder == 0,
			fmt.Sprintf("%d sales caught by MariaDB's stop of %.1f s: %d answered 503, %d unanswered; at SIGCONT %d entries unread and %d pending (the oldest %.1f s); after draining (%.1f s) %d of %d sales answered 200 have no order",
				o.Answers, o.DownMS/1000, o.Failures, o.Unanswered, h.Undelivered, h.Pending, h.OldestPendingMS/1000, r.DrainMS/1000, a.WithoutOrder, a.Admitted)
	}),
	// Redis restarted without persistence: the entries the kill found
	// unwritten are sales answered 200 that never become orders — at least
	// those no worker had read at the last look before the kill (the
	// workers were held: no one read any after), none sent after the
	// restart (a buyer of before drawn again after it is not counted: the
	// order table refuses that second order by design) — and the stock and
	// the buyers went with them (the SKU started again, a buyer of before
	// bought again).
	"loses-unread-orders": asyncOutageCheck(func(r *report.StageRun, a *report.AsyncOutageReport) (bool, string) {
		o, b := r.Fault.Outage, a.AtFault
		ok := o != nil && !o.InitialKept && b.Entries() > 0 && a.WithoutOrder > 0 && a.WithoutOrder == a.WithoutOrderBeforeHeal &&
			int64(a.WithoutOrder) >= b.Undelivered && a.RebuyStatus == http.StatusOK
		return ok, restartDetail(r, a)
	}),
	// With an append-only file the stream, its group and the buyers come
	// back: every sale answered 200 becomes an order.
	"keeps-unread-orders": asyncOutageCheck(func(r *report.StageRun, a *report.AsyncOutageReport) (bool, string) {
		o, b := r.Fault.Outage, a.AtFault
		ok := o != nil && o.InitialKept && b.Entries() > 0 && a.Admitted > 0 && a.WithoutOrder == 0 && a.RebuyStatus == http.StatusConflict
		return ok, restartDetail(r, a)
	}),
}

func asyncOutageCheck(f func(r *report.StageRun, a *report.AsyncOutageReport) (bool, string)) checkFunc {
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		if r.Fault == nil || r.Fault.AsyncOrders == nil {
			return false, "no orders-down or redis-restart step on an async stage"
		}
		return f(r, r.Fault.AsyncOrders)
	}
}

func restartDetail(r *report.StageRun, a *report.AsyncOutageReport) string {
	kept := r.Fault.Outage != nil && r.Fault.Outage.InitialKept
	return fmt.Sprintf("just before the kill %d entries unread and %d pending; after draining %d of %d sales answered 200 and sent before the restart have no order (%d of %d sent after it); data kept %t; a buyer of before the kill buying again: %d",
		a.AtFault.Undelivered, a.AtFault.Pending, a.WithoutOrderBeforeHeal, a.AdmittedBeforeHeal, a.WithoutOrder-a.WithoutOrderBeforeHeal, a.Admitted-a.AdmittedBeforeHeal, kept, a.RebuyStatus)
}
