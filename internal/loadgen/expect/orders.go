package expect

import (
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

func orderMakers() map[string]maker { return withoutArgs(orderChecks) }

// orderChecks are the expectations of the order stages, read from the
// audit's orders (report.go's Audit.Orders).
var orderChecks = map[string]checkFunc{
	"duplicate-orders":    orderCheck(checkDuplicateOrders),
	"no-duplicate-orders": orderCheck(checkNoDuplicateOrders),
	"undersells":          orderCheck(checkUndersells),
	"no-undersell":        orderCheck(checkNoUndersell),
	"orders-match-stock":  orderCheck(checkOrdersMatchStock),
	// The crash step on an order stage: the replica killed between the
	// deduction and the order insert took a unit no order holds, or not.
	"undersold-after-crash":    crashUndersold(true),
	"no-undersold-after-crash": crashUndersold(false),
}

func crashUndersold(want bool) checkFunc {
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		c := r.Crash
		switch {
		case c == nil || !c.Triggered:
			return false, "no crash happened"
		case c.Undersold == nil:
			return false, "the audit has no orders: not an order stage"
		}
		return (*c.Undersold > 0) == want, fmt.Sprintf("%d units taken without an order after the crash step", *c.Undersold)
	}
}

// orderCheck fails a check on a run whose audit has no orders (not an
// order stage) or that sold nothing, which proves nothing.
func orderCheck(f func(a report.Audit) (bool, string)) checkFunc {
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		switch {
		case r.Audit.Orders == nil:
			return false, "the audit has no orders: not an order stage"
		case r.Sales == 0:
			return false, "no sale at all, so nothing was shown"
		}
		return f(r.Audit)
	}
}

func duplicatesDetail(a report.Audit) string {
	o := a.Orders
	return fmt.Sprintf("%d orders of %d buyers: %d duplicate orders, %d buyers with more than one", o.Orders, o.Buyers, o.DuplicateOrders, o.DuplicateBuyers)
}

func checkDuplicateOrders(a report.Audit) (bool, string) {
	return a.Orders.DuplicateOrders > 0, duplicatesDetail(a)
}

func checkNoDuplicateOrders(a report.Audit) (bool, string) {
	return a.Orders.DuplicateOrders == 0, duplicatesDetail(a)
}

// undersold is what a run sold too little (少卖): units gone from the stock
// that no order holds (nor a cancelled order whose units are on their way
// back), or, when sales were refused for a conflict, the stock the run
// left unsold.
func undersold(a report.Audit) (bool, string) {
	o := a.Orders
	detail := fmt.Sprintf("undersold %d (initial %d - remaining %d - %d units ordered - %d returning), %d left unsold after %d conflicts",
		o.Undersold, a.Initial, a.Stock, o.Units, o.Returning, a.Stock, o.Conflicts)
	return o.Undersold > 0 || a.Stock > 0 && o.Conflicts > 0, detail
}

func checkUndersells(a report.Audit) (bool, string) { return undersold(a) }

func checkNoUndersell(a report.Audit) (bool, string) {
	under, detail := undersold(a)
	return !under, detail
}

// checkOrdersMatchStock: every unit on sale, in an order, or (async
// stages) in a cancelled order on its way back to the stock.
func checkOrdersMatchStock(a report.Audit) (bool, string) {
	o := a.Orders
	return int64(a.Initial) == int64(a.Stock)+o.Units+o.Returning,
		fmt.Sprintf("initial %d vs remaining %d + %d units ordered + %d returning", a.Initial, a.Stock, o.Units, o.Returning)
}
