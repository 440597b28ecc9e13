package expect

import (
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

func asyncMakers() map[string]maker {
	makers := withoutArgs(asyncChecks)
	makers["rows-when-killed"] = rowsWhenKilled
	return makers
}

// asyncChecks are the expectations of the async stages, read from the
// audit's stream after draining.
var asyncChecks = map[string]checkFunc{
	"drained":       streamCheck(func(a report.Audit) bool { return a.Stream.Drained() && a.Returning() == 0 }),
	"pending-grows": streamCheck(func(a report.Audit) bool { return a.Stream.Undelivered == 0 && a.Stream.Pending > 0 }),
	// A worker-kill or duplicate-delivery step: while the dead worker was
	// down, the others claimed its entries and wrote their orders — or did
	// not.
	"claimed-while-down": workerKillCheck(func(w *report.WorkerKillReport) bool { return w.PendingWhileDown == 0 && w.UndersoldWhileDown == 0 }),
	"missing-while-down": workerKillCheck(func(w *report.WorkerKillReport) bool { return w.PendingWhileDown > 0 && w.UndersoldWhileDown > 0 }),
}

// rowsWhenKilled: of the entries the dead worker held, exactly n had their
// order row (worker-kill: 0), or every one, "all" (duplicate-delivery: its
// batch written and none acknowledged, each delivered again with its row).
func rowsWhenKilled(args []string) (checkFunc, error) {
	if len(args) == 1 && args[0] == "all" {
		return workerKillCheck(func(w *report.WorkerKillReport) bool { return w.RowsAtKill == w.PendingAtKill }), nil
	}
	n, err := countArg(args)
	if err != nil {
		return nil, err
	}
	return workerKillCheck(func(w *report.WorkerKillReport) bool { return w.RowsAtKill == n }), nil
}

func workerKillCheck(f func(w *report.WorkerKillReport) bool) checkFunc {
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		if r.Fault == nil || r.Fault.WorkerKill == nil {
			return false, "no worker-kill or duplicate-delivery step ran"
		}
		w := r.Fault.WorkerKill
		if w.PendingAtKill == 0 {
			return false, w.Worker + " held no entry when it died, so nothing was shown"
		}
		return f(w), fmt.Sprintf("%s died %s holding %d entries, %d with their order row; %.1fs later, still down: %d pending, %d units sold without an order",
			w.Worker, w.At, w.PendingAtKill, w.RowsAtKill, w.DownMS/1000, w.PendingWhileDown, w.UndersoldWhileDown)
	}
}

func streamCheck(f func(a report.Audit) bool) checkFunc {
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		if r.Audit.Stream == nil {
			return false, "the audit has no stream: not an async stage"
		}
		s := r.Audit.Stream
		return f(r.Audit), fmt.Sprintf("after draining %.1fs: %d undelivered, %d pending (oldest %.1fs), %d dead letters, %d cancelled units not yet back on sale",
			r.DrainMS/1000, s.Undelivered, s.Pending, s.OldestPending.Seconds(), s.DeadLetters, r.Audit.Returning())
	}
}
