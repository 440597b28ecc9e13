package loadgen

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

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
	return func(r *StageRun, _ []StageRun) (bool, string) {
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
func orderCheck(f func(a Audit) (bool, string)) checkFunc {
	return func(r *StageRun, _ []StageRun) (bool, string) {
		switch {
		case r.Audit.Orders == nil:
			return false, "the audit has no orders: not an order stage"
		case r.Sales == 0:
			return false, "no sale at all, so nothing was shown"
		}
		return f(r.Audit)
	}
}

func duplicatesDetail(a Audit) string {
	o := a.Orders
	return fmt.Sprintf("%d orders of %d buyers: %d duplicate orders, %d buyers with more than one", o.Orders, o.Buyers, o.DuplicateOrders, o.DuplicateBuyers)
}

func checkDuplicateOrders(a Audit) (bool, string) {
	return a.Orders.DuplicateOrders > 0, duplicatesDetail(a)
}

func checkNoDuplicateOrders(a Audit) (bool, string) {
	return a.Orders.DuplicateOrders == 0, duplicatesDetail(a)
}

// undersold is what a run sold too little (少卖): units gone from the stock
// that no order holds (nor a cancelled order whose units are on their way
// back), or, when sales were refused for a conflict, the stock the run
// left unsold.
func undersold(a Audit) (bool, string) {
	o := a.Orders
	detail := fmt.Sprintf("undersold %d (initial %d - remaining %d - %d units ordered - %d returning), %d left unsold after %d conflicts",
		o.Undersold, a.Initial, a.Stock, o.Units, o.Returning, a.Stock, o.Conflicts)
	return o.Undersold > 0 || a.Stock > 0 && o.Conflicts > 0, detail
}

func checkUndersells(a Audit) (bool, string) { return undersold(a) }

func checkNoUndersell(a Audit) (bool, string) {
	under, detail := undersold(a)
	return !under, detail
}

// checkOrdersMatchStock: every unit on sale, in an order, or (async
// stages) in a cancelled order on its way back to the stock.
func checkOrdersMatchStock(a Audit) (bool, string) {
	o := a.Orders
	return int64(a.Initial) == int64(a.Stock)+o.Units+o.Returning,
		fmt.Sprintf("initial %d vs remaining %d + %d units ordered + %d returning", a.Initial, a.Stock, o.Units, o.Returning)
}

// orderRow is an order stage's run as report.html's orders table shows it.
type orderRow struct {
	Label                                             string
	AlreadyBought                                     int
	Orders, Buyers, DuplicateOrders, Units, Conflicts int64
	Undersold                                         int64
	Remaining, Oversold                               int
	CrashUndersold                                    string
}

// orderRows are the runs of order stages, with their crash step's
// undersold units ("-" without one).
func (rep *Report) orderRows() []orderRow {
	var rows []orderRow
	for i := range rep.Stages {
		r := &rep.Stages[i]
		o := r.Audit.Orders
		if o == nil {
			continue
		}
		crash := "-"
		if r.Crash != nil && r.Crash.Undersold != nil {
			crash = strconv.FormatInt(*r.Crash.Undersold, 10)
		}
		rows = append(rows, orderRow{
			Label: r.label(), AlreadyBought: r.AlreadyBought, Orders: o.Orders, Buyers: o.Buyers, DuplicateOrders: o.DuplicateOrders, Units: o.Units,
			Conflicts: o.Conflicts, Undersold: o.Undersold, Remaining: r.Audit.Stock, Oversold: r.Oversold, CrashUndersold: crash,
		})
	}
	return rows
}

// writeOrderTable prints, when the scenario ran order stages, each one's
// orders beside its stock: duplicates, conflicts and undersold units.
func (rep *Report) writeOrderTable(w io.Writer) error {
	rows := rep.orderRows()
	if len(rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nOrders (%s):\n", rep.Orders); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\talready bought\torders\tbuyers\tduplicate orders\tunits\tremaining\tconflicts\tundersold\toversold\tundersold by the crash step\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Label, r.AlreadyBought, r.Orders, r.Buyers, r.DuplicateOrders, r.Units, r.Remaining, r.Conflicts, r.Undersold, r.Oversold, r.CrashUndersold)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write order table: %w", err)
	}
	return nil
}
