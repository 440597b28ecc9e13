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

// A maker is a check's constructor; it takes the check's arguments.
type maker = func(args []string) (checkFunc, error)

// checkMaker returns the constructor of a check by name. Each family
// names its checks in its own file, so a new check of a family is that
// file's change alone.
func checkMaker(name string) (maker, bool) {
	for _, family := range []func() map[string]maker{loadMakers, crashMakers, faultMakers, orderMakers, asyncMakers, asyncOutageMakers, paymentMakers, spikeMakers} {
		if mk, ok := family()[name]; ok {
			return mk, true
		}
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

// withoutArgs are checks that take no arguments, as makers.
func withoutArgs(checks map[string]checkFunc) map[string]maker {
	makers := make(map[string]maker, len(checks))
	for name, f := range checks {
		makers[name] = noArgs(f)
	}
	return makers
}

func noArgs(f checkFunc) maker {
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

// factorArg parses "<n>x", n ≥ 0.
func factorArg(arg string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(arg, "x"), 64)
	if !strings.HasSuffix(arg, "x") || err != nil || f < 0 {
		return 0, fmt.Errorf("factor %q: want a number followed by x", arg)
	}
	return f, nil
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
