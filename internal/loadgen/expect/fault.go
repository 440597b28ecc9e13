package expect

import (
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// faultMakers are the checks of the fault steps.
func faultMakers() map[string]maker {
	makers := withoutArgs(map[string]checkFunc{
		"victim-refused": checkVictimRefused, "victim-sold": checkVictimSold,
		"loses-everything": checkLosesEverything, "undersold-said": checkUndersoldSaid,
	})
	for name, mk := range map[string]maker{
		"holders-at-most":    holdersBound("at most", func(got, n int64) bool { return got <= n }),
		"holders-at-least":   holdersBound("at least", func(got, n int64) bool { return got >= n }),
		"gives-up-within":    givesUpWithin,
		"stuck-at-least":     stuckAtLeast,
		"gap-at-most":        gapAtMost,
		"fails-fast":         failsFast,
		"loses-at-most":      losesAtMost,
		"orders-down-within": ordersDownWithin,
	} {
		makers[name] = mk
	}
	return makers
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
			return f.VictimStatus != 200 && *gaveUp <= report.MS(limit),
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
			return r.Fault.StuckMS >= report.MS(limit), fmt.Sprintf("stuck %.0f ms (at least %s)", r.Fault.StuckMS, limit)
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
			return o.Failures > 0 && o.MaxFailMS <= report.MS(limit),
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
			return o.InitialKept && o.SalesBefore > 0 && o.LostMS <= report.MS(limit),
				fmt.Sprintf("%d sales lost, %.0f ms of sales (limit %s); initial stock kept %t", o.LostSales, o.LostMS, limit, o.InitialKept)
		}
	})
}

// gapAtMost: from the fault to its end, sales went on with no gap between
// two of them longer than the limit.
func gapAtMost(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			if r.Fault == nil || r.Fault.LongestGapMS == nil {
				return false, "no gap measured (a reshard-halfway step measures it)"
			}
			gap := *r.Fault.LongestGapMS
			return gap <= float64(limit.Milliseconds()), fmt.Sprintf("longest gap between sales %.0f ms during the fault (limit %s)", gap, limit)
		}
	})
}

// ordersDownWithin: sales the order database's stop caught (sent before
// it continued, unanswered when it stopped) answered 503 orders_unavailable (or may_have_sold, when not even the
// void could be sent) within limit (the sale's deadline),
// every one of them answered.
func ordersDownWithin(args []string) (checkFunc, error) {
	return durationArg(args, func(limit time.Duration) checkFunc {
		return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
			if r.Fault == nil || r.Fault.OrderOutage == nil {
				return false, "no order database outage"
			}
			o := r.Fault.OrderOutage
			return o.Failures > 0 && o.OtherCodes == 0 && o.Unanswered == 0 && o.MaxFailMS <= report.MS(limit),
				fmt.Sprintf("%d of %d sales the stop of MariaDB caught answered 503 (%d neither orders_unavailable nor may_have_sold), the slowest in %.0f ms (limit %s), %d unanswered",
					o.Failures, o.Answers, o.OtherCodes, o.MaxFailMS, limit, o.Unanswered)
		}
	})
}

// checkUndersoldSaid: every unit taken without an order after the outage
// was announced by a 503 saying so; none went silently.
func checkUndersoldSaid(r *report.StageRun, _ []report.StageRun) (bool, string) {
	if r.Fault == nil || r.Fault.OrderOutage == nil || r.Audit.Orders == nil {
		return false, "no order database outage"
	}
	u, said := r.Audit.Orders.Undersold, r.Fault.OrderOutage.SaidUndersold
	return u <= int64(said), fmt.Sprintf("%d units taken without an order; %d answers said their units stay taken", u, said)
}
