package expect

import (
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// loadMakers are the checks of the load's outcome.
func loadMakers() map[string]maker {
	makers := withoutArgs(map[string]checkFunc{
		"oversells": checkOversells, "no-oversell": checkNoOversell, "consistent": checkConsistent,
		"no-foreign-unlocks": checkNoForeignUnlocks, "oversells-or-foreign-unlocks": checkOversellsOrForeign,
		"fastest": checkFastest, "inconsistent": checkInconsistent, "oversells-or-inconsistent": checkOversellsOrInconsistent,
		"sales-accounted": checkSalesAccounted, "no-errors": checkNoErrors,
	})
	makers["faster-than"] = fasterThan
	return makers
}

func checkOversells(r *report.StageRun, _ []report.StageRun) (bool, string) {
	return r.Oversold > 0, fmt.Sprintf("oversold %d", r.Oversold)
}

func checkConsistent(r *report.StageRun, _ []report.StageRun) (bool, string) {
	return r.Consistent, consistencyDetail(r)
}

// checkNoOversell needs sales: a run that sold nothing proves nothing.
func checkNoOversell(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.Sales == 0 {
		return false, "no sale at all, so nothing was shown"
	}
	return r.Oversold == 0, fmt.Sprintf("oversold %d after %d sales", r.Oversold, r.Sales)
}

func checkNoForeignUnlocks(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.ForeignUnlocks == nil {
		return false, "foreign unlocks unknown: the shop's audit does not report them"
	}
	return *r.ForeignUnlocks == 0, fmt.Sprintf("foreign unlocks %d", *r.ForeignUnlocks)
}

func checkOversellsOrForeign(r *report.StageRun, _ []report.StageRun) (bool, string) {
	foreign := 0
	if r.ForeignUnlocks != nil {
		foreign = *r.ForeignUnlocks
	}
	return r.Oversold > 0 || foreign > 0, fmt.Sprintf("oversold %d, foreign unlocks %d", r.Oversold, foreign)
}

func checkInconsistent(r *report.StageRun, _ []report.StageRun) (bool, string) {
	ok, detail := checkConsistent(r, nil)
	return !ok, detail
}

func checkOversellsOrInconsistent(r *report.StageRun, _ []report.StageRun) (bool, string) {
	return r.Oversold > 0 || !r.Consistent, fmt.Sprintf("oversold %d, consistent %t", r.Oversold, r.Consistent)
}

// checkSalesAccounted: the audit counts every sale answered 200, and no
// more than those and the answers whose outcome is unknown (a 5xx or a
// lost connection: the write may have happened): no unit sold twice, none
// counted that no request can account for.
func checkSalesAccounted(r *report.StageRun, _ []report.StageRun) (bool, string) {
	sold := r.Audit.Sold
	return sold >= r.Sales && sold <= r.Sales+r.Errors,
		fmt.Sprintf("the audit counts %d sold; %d sales were answered 200 and %d answers left the outcome unknown", sold, r.Sales, r.Errors)
}

// checkNoErrors: every answer was a sale, sold out or busy; none failed.
func checkNoErrors(r *report.StageRun, _ []report.StageRun) (bool, string) {
	return r.Errors == 0, fmt.Sprintf("%d of %d answers were errors %v", r.Errors, r.Requests, r.ErrorSamples)
}

// comparable reports whether o is a row another may be compared with: one
// that ran to its end, under plain load (no fault step), through the proxy.
func comparable(o *report.StageRun) bool {
	return o.Skipped == "" && o.Error == "" && o.Fault == nil && o.Via == plan.ViaProxy
}

// findRow is the row another one's check names: the row labelled name, or
// else the plain row of stage name nearest before r (after it, if none).
func findRow(r *report.StageRun, all []report.StageRun, name string) *report.StageRun {
	var before, after *report.StageRun
	for i := range all {
		o := &all[i]
		switch {
		case o == r || o.Skipped != "" || o.Error != "":
		case o.Label == name:
			return o
		case o.Label == "" && o.Stage == name && comparable(o) && o.Index < r.Index:
			before = o
		case o.Label == "" && o.Stage == name && comparable(o) && after == nil:
			after = o
		}
	}
	if before != nil {
		return before
	}
	return after
}

// fasterThan compares with another row: by label, or the nearest plain run
// of a stage through the proxy.
func fasterThan(args []string) (checkFunc, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf(`want "faster-than <stage> <factor>x"`)
	}
	factor, err := factorArg(args[1])
	if err != nil {
		return nil, err
	}
	if factor == 0 {
		return nil, fmt.Errorf("factor %q: want a positive number followed by x", args[1])
	}
	other := args[0]
	return func(r *report.StageRun, all []report.StageRun) (bool, string) {
		o := findRow(r, all, other)
		switch {
		case o == nil:
			return false, fmt.Sprintf("no %s run to compare with", other)
		case o.SalesPerSec == 0:
			return false, fmt.Sprintf("%s sold nothing", other)
		}
		ratio := r.SalesPerSec / o.SalesPerSec
		return ratio >= factor, fmt.Sprintf("%.1fx %s (%.0f vs %.0f sales/s)", ratio, o.Name(), r.SalesPerSec, o.SalesPerSec)
	}, nil
}

// checkFastest: no other plain run through the proxy sold faster (a fault
// step's row, a failed or a one-replica run measures something else).
func checkFastest(r *report.StageRun, all []report.StageRun) (bool, string) {
	for i := range all {
		o := &all[i]
		if o != r && comparable(o) && o.SalesPerSec > r.SalesPerSec {
			return false, fmt.Sprintf("%s sold faster (%.0f vs %.0f sales/s)", o.Name(), o.SalesPerSec, r.SalesPerSec)
		}
	}
	return true, fmt.Sprintf("%.0f sales/s, the highest", r.SalesPerSec)
}

// consistencyDetail says what Consistent was judged from.
func consistencyDetail(r *report.StageRun) string {
	return fmt.Sprintf("stock %d + sold %d vs initial %d; sold %d vs %d answered 200 + %d errors whose outcome is unknown",
		r.Audit.Stock, r.Audit.Sold, r.Audit.Initial, r.Audit.Sold, r.Sales, r.Errors)
}
