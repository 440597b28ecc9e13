package loadgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// A check is one outcome the articles predict for a stage run, written in a
// scenario's expect list, e.g. "oversells", "recovers-within 400ms",
// "faster-than watchdog 3x". Checks are evaluated after the whole scenario
// ran, because some compare runs with each other.
type check struct {
	text string
	eval checkFunc
}

type checkFunc func(run *report.StageRun, all []report.StageRun) (bool, string)

// checkMaker returns the constructor of a check by name; it takes the
// check's arguments.
func checkMaker(name string) (func(args []string) (checkFunc, error), bool) {
	switch name {
	case "oversells":
		return noArgs(checkOversells), true
	case "no-oversell":
		return noArgs(checkNoOversell), true
	case "consistent":
		return noArgs(checkConsistent), true
	case "no-foreign-unlocks":
		return noArgs(checkNoForeignUnlocks), true
	case "oversells-or-foreign-unlocks":
		return noArgs(checkOversellsOrForeign), true
	case "stuck-after-crash":
		return noArgs(checkStuck), true
	case "lock-without-ttl":
		return noArgs(checkLockWithoutTTL), true
	case "sells-after-reset":
		return noArgs(checkSellsAfterReset), true
	case "recovers-within":
		return recoversWithin, true
	case "faster-than":
		return fasterThan, true
	case "fastest":
		return noArgs(checkFastest), true
	case "inconsistent":
		return noArgs(checkInconsistent), true
	case "oversells-or-inconsistent":
		return noArgs(checkOversellsOrInconsistent), true
	case "sales-accounted":
		return noArgs(checkSalesAccounted), true
	case "no-errors":
		return noArgs(checkNoErrors), true
	case "holders-at-most":
		return holdersBound("at most", func(got, n int64) bool { return got <= n }), true
	case "holders-at-least":
		return holdersBound("at least", func(got, n int64) bool { return got >= n }), true
	case "victim-refused":
		return noArgs(checkVictimRefused), true
	case "victim-sold":
		return noArgs(checkVictimSold), true
	case "gives-up-within":
		return givesUpWithin, true
	case "stuck-at-least":
		return stuckAtLeast, true
	case "gap-at-most":
		return gapAtMost, true
	case "fails-fast":
		return failsFast, true
	case "loses-everything":
		return noArgs(checkLosesEverything), true
	case "loses-at-most":
		return losesAtMost, true
	case "orders-down-within":
		return ordersDownWithin, true
	case "undersold-said":
		return noArgs(checkUndersoldSaid), true
	case "duplicate-orders", "no-duplicate-orders", "undersells", "no-undersell", "orders-match-stock",
		"undersold-after-crash", "no-undersold-after-crash":
		return noArgs(orderChecks[name]), true
	case "drained", "pending-grows", "claimed-while-down", "missing-while-down":
		return noArgs(asyncChecks[name]), true
	case "queued-while-orders-down", "loses-unread-orders", "keeps-unread-orders":
		return noArgs(asyncOutageChecks[name]), true
	case "rows-when-killed":
		return rowsWhenKilled, true
	case "payments-settle":
		return noArgs(paymentChecks[name]), true
	}
	return nil, false
}

func parseCheck(text string) (check, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return check{}, fmt.Errorf("empty expectation")
	}
	mk, ok := checkMaker(fields[0])
	if !ok {
		return check{}, fmt.Errorf("unknown expectation %q", fields[0])
	}
	eval, err := mk(fields[1:])
	if err != nil {
		return check{}, fmt.Errorf("expectation %q: %w", text, err)
	}
	return check{text: text, eval: eval}, nil
}

// evaluateChecks fills every run's Checks from its scenario expectations.
func evaluateChecks(runs []report.StageRun, scenario *plan.Scenario) {
	for i := range runs {
		run := &runs[i]
		if run.Skipped != "" {
			continue
		}
		for _, text := range scenario.Runs[run.Index].Expect {
			c, err := parseCheck(text) // validated when the scenario was parsed
			if err != nil {
				run.Checks = append(run.Checks, report.CheckResult{Check: text, Detail: err.Error()})
				continue
			}
			ok, detail := c.eval(run, runs)
			run.Checks = append(run.Checks, report.CheckResult{Check: text, Passed: ok, Detail: detail})
		}
	}
}

func noArgs(f checkFunc) func([]string) (checkFunc, error) {
	return func(args []string) (checkFunc, error) {
		if len(args) > 0 {
			return nil, fmt.Errorf("takes no arguments")
		}
		return f, nil
	}
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

func checkStuck(r *report.StageRun, _ []report.StageRun) (bool, string) {
	switch {
	case r.Fault != nil:
		return r.Fault.Stuck, fmt.Sprintf("%d sales out of %d requests after the fault", r.Fault.Sales, r.Fault.Requests)
	case r.Crash == nil || !r.Crash.Triggered:
		return false, "no crash happened"
	}
	return r.Stuck != nil && *r.Stuck, fmt.Sprintf("%d sales out of %d requests after the crash", r.Crash.Sales, r.Crash.Requests)
}

func checkLockWithoutTTL(r *report.StageRun, _ []report.StageRun) (bool, string) {
	keys, _ := r.AfterCrash()
	if len(keys) == 0 {
		return false, "no lock key seen after the crash (is the Redis address known?)"
	}
	for _, k := range keys {
		if k.TTLMS == -1 {
			return true, fmt.Sprintf("%s has no TTL", k.Key)
		}
	}
	return false, fmt.Sprintf("every lock key expires (%s: %d ms)", keys[0].Key, keys[0].TTLMS)
}

func checkSellsAfterReset(r *report.StageRun, _ []report.StageRun) (bool, string) {
	_, sold := r.AfterCrash()
	if sold == nil {
		return false, "no reset after the crash"
	}
	return *sold, fmt.Sprintf("sale after reset: %t", *sold)
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

func holdersBound(word string, ok func(got, n int64) bool) func([]string) (checkFunc, error) {
	return func(args []string) (checkFunc, error) {
		n, err := countArg(args)
		if err != nil {
			return nil, err
		}
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			var most int64
			switch {
			case r.MaxHolders != nil:
				most = *r.MaxHolders
			case !r.Faults.TrackHolders:
				return false, "holders not counted (the track_holders fault is off)"
			} // counted, and nobody ever held the lock: 0
			return ok(most, n), fmt.Sprintf("%d holder(s) at once, want %s %d", most, word, n)
		}, nil
	}
}

// countArg is a check's one argument, a whole number.
func countArg(args []string) (int64, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("want one count")
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("count %q: want a whole number", args[0])
	}
	return n, nil
}

func checkVictimRefused(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.Fault == nil || r.Fault.VictimAnswer == "" {
		return false, "no sale held the lock when the fault struck"
	}
	return r.Fault.VictimStatus != 200, "the holder's sale answered " + r.Fault.VictimAnswer
}

func checkVictimSold(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.Fault == nil || r.Fault.VictimAnswer == "" {
		return false, "no sale held the lock when the fault struck"
	}
	return r.Fault.VictimStatus == 200, "the holder's sale answered " + r.Fault.VictimAnswer
}

// durationArg parses a check's one duration argument.
func durationArg(args []string, eval func(limit time.Duration) checkFunc) (checkFunc, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one duration")
	}
	limit, err := time.ParseDuration(args[0])
	if err != nil || limit < 0 {
		return nil, fmt.Errorf("duration %q: want a non-negative Go duration", args[0])
	}
	return eval(limit), nil
}

// givesUpWithin: the holder's sale left its critical section, unsold,
// within the limit of the fault: it learnt that it had lost its lock.
func givesUpWithin(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			f := r.Fault
			if f == nil || f.VictimAnswerMS == nil {
				return false, "no answer from the sale that held the lock"
			}
			gaveUp := f.VictimAnswerMS
			if f.VictimLeftMS != nil {
				gaveUp = f.VictimLeftMS
			}
			return f.VictimStatus != 200 && *gaveUp <= ms(limit),
				fmt.Sprintf("the holder's sale gave up %.0f ms after the fault (limit %s) and answered %s", *gaveUp, limit, f.VictimAnswer)
		}
	})
}

// stuckAtLeast: no sale went through for at least the limit after the
// fault: recovery had to wait for the lock's TTL, not less.
func stuckAtLeast(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			if r.Fault == nil {
				return false, "no fault step"
			}
			return r.Fault.StuckMS >= ms(limit), fmt.Sprintf("stuck %.0f ms (at least %s)", r.Fault.StuckMS, limit)
		}
	})
}

// failsFast: while Redis was down the shops answered, and every answer
// that failed came within the limit.
func failsFast(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			if r.Fault == nil || r.Fault.Outage == nil {
				return false, "no Redis outage"
			}
			o := r.Fault.Outage
			return o.Failures > 0 && o.MaxFailMS <= ms(limit),
				fmt.Sprintf("%d of %d answers failed while Redis was down, the slowest in %.0f ms (limit %s)", o.Failures, o.Answers, o.MaxFailMS, limit)
		}
	})
}

func checkLosesEverything(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.Fault == nil || r.Fault.Outage == nil {
		return false, "no Redis outage"
	}
	o := r.Fault.Outage
	return !o.InitialKept && o.SalesBefore > 0 && o.LostSales >= o.SalesBefore,
		fmt.Sprintf("initial stock kept %t, %d of the %d sales before the kill lost", o.InitialKept, o.LostSales, o.SalesBefore)
}

func losesAtMost(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			if r.Fault == nil || r.Fault.Outage == nil {
				return false, "no Redis outage"
			}
			o := r.Fault.Outage
			return o.InitialKept && o.SalesBefore > 0 && o.LostMS <= ms(limit),
				fmt.Sprintf("%d sales lost, %.0f ms of sales (limit %s); initial stock kept %t", o.LostSales, o.LostMS, limit, o.InitialKept)
		}
	})
}

func recoversWithin(args []string) (checkFunc, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one duration")
	}
	limit, err := time.ParseDuration(args[0])
	if err != nil {
		return nil, fmt.Errorf("duration: %w", err)
	}
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		if r.RecoveryMS == nil {
			return false, "no sale after the crash"
		}
		return *r.RecoveryMS <= float64(limit.Milliseconds()), fmt.Sprintf("first sale %.0f ms after the crash (limit %s)", *r.RecoveryMS, limit)
	}, nil
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
	if len(args) != 2 || !strings.HasSuffix(args[1], "x") {
		return nil, fmt.Errorf(`want "faster-than <stage> <factor>x"`)
	}
	factor, err := strconv.ParseFloat(strings.TrimSuffix(args[1], "x"), 64)
	if err != nil || factor <= 0 {
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
