// Package expect judges a run's rows against what the articles predict:
// each expectation of a scenario's expect list (e.g. "oversells",
// "recovers-within 400ms", "faster-than watchdog 3x") is a check over a
// stage's record, and the rows it may compare it with. The grammar and the
// evaluation are here (expect.go); the checks, one file per family: the
// load's outcome (load.go), the crash step (crash.go), the fault steps
// (fault.go), orders (orders.go), async stages (async.go, asyncoutage.go),
// payments (payment.go), a spike with bots (spike.go).
//
// It reads records only: it must not import the rest of loadgen, vegeta,
// HTTP or Redis clients, nor the stores' packages but for the result
// types the records hold.
package expect

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
	case "bots-outbuy-headcount":
		return botsOutbuyHeadcount, true
	case "bots-admitted-per-limit":
		return botsAdmittedPerLimit, true
	case "redis-after-sold-out-at-most":
		return redisAfterSoldOutAtMost, true
	case "payments-settle":
		return noArgs(paymentChecks[name]), true
	}
	return nil, false
}

// Parse reads one expectation, so a scenario with one loadgen cannot judge
// fails before anything runs.
func Parse(text string) error {
	_, err := parseCheck(text)
	return err
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

// Evaluate fills every run's Checks from its scenario expectations.
func Evaluate(runs []report.StageRun, scenario *plan.Scenario) {
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
