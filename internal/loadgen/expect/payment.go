package expect

import (
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

func paymentMakers() map[string]maker { return withoutArgs(paymentChecks) }

// paymentChecks judge the payment step: every payer answered paid or
// cancelled; the live units are exactly the paid orders' (no order both
// paid and cancelled, no unpaid one left past its deadline), so the stock
// left is the run's less the paid units (every cancelled unit back once);
// every unit given back sold again. A step during the load must have sent
// payments while it ran.
var paymentChecks = map[string]checkFunc{
	"payments-settle": func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		p := r.Payment
		if p == nil {
			return false, "no payment step ran"
		}
		detail := fmt.Sprintf("%d orders, %d payers: %d paid, %d refused (cancelled), %d failed; %d units live, %d back on sale, %d resold",
			p.Orders, p.Payers, p.Paid, p.Refused, p.Failed, p.LiveUnits, p.Remaining, p.Resold)
		ok := p.Failed == 0 && p.Paid+p.Refused == p.Payers && p.LiveUnits == int64(p.Paid) &&
			p.Remaining == p.Stock-p.Paid && p.Resold == p.Remaining && p.Remaining > 0 && p.Paid > 0
		if p.DuringLoad {
			detail += fmt.Sprintf("; during the load: %d payers sent before its end, %d late past pay_within, %d 404s retried", p.SentDuringLoad, p.Late, p.Retried404)
			ok = ok && p.SentDuringLoad > 0 && p.Late > 0
		}
		return ok, detail
	},
}
