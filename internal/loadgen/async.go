package loadgen

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Bounds of the wait for an async stage's workers after the load.
const (
	drainBound = 60 * time.Second
	// drainStill: pending that has not moved for this long will not move
	// (async-wrong-ack's entries are never acknowledged).
	drainStill = 3 * time.Second
	drainPoll  = 100 * time.Millisecond
)

// drainAsync waits, after an async stage's load, until the order workers
// delivered every entry and the pending list is empty or stopped moving,
// and returns the audit then: the invariant (initial = remaining + units
// ordered, nothing pending) is judged after draining, never mid-flight.
func (r *runner) drainAsync(ctx context.Context, base, stage, sku string, a Audit) (Audit, time.Duration, error) {
	if a.Stream == nil {
		return a, 0, nil
	}
	start := time.Now()
	lastPending, still := a.Stream.Pending, time.Now()
	for time.Since(start) < drainBound {
		s := a.Stream
		if s.Undelivered == 0 && (s.Pending == 0 || time.Since(still) >= drainStill) {
			break
		}
		if s.Pending != lastPending {
			lastPending, still = s.Pending, time.Now()
		}
		select {
		case <-ctx.Done():
			return a, time.Since(start), ctx.Err()
		case <-time.After(drainPoll):
		}
		next, err := r.shop.audit(ctx, base, stage, sku)
		if err != nil {
			return a, time.Since(start), fmt.Errorf("audit while draining: %w", err)
		}
		a = next
	}
	return a, time.Since(start), nil
}

// asyncChecks are the expectations of the async stages, read from the
// audit's stream after draining.
var asyncChecks = map[string]checkFunc{
	"drained":       streamCheck(func(a Audit) bool { return a.Stream.Drained() }),
	"pending-grows": streamCheck(func(a Audit) bool { return a.Stream.Undelivered == 0 && a.Stream.Pending > 0 }),
	// A worker-kill step: while the killed worker was down, the others
	// claimed its entries and wrote their orders — or did not.
	"claimed-while-down": workerKillCheck(func(w *WorkerKillReport) bool { return w.PendingWhileDown == 0 && w.UndersoldWhileDown == 0 }),
	"missing-while-down": workerKillCheck(func(w *WorkerKillReport) bool { return w.PendingWhileDown > 0 && w.UndersoldWhileDown > 0 }),
}

func workerKillCheck(f func(w *WorkerKillReport) bool) checkFunc {
	return func(r *StageRun, _ []StageRun) (bool, string) {
		if r.Fault == nil || r.Fault.WorkerKill == nil {
			return false, "no worker-kill step ran"
		}
		w := r.Fault.WorkerKill
		if w.PendingAtKill == 0 {
			return false, w.Worker + " held no entry when it was killed, so nothing was shown"
		}
		return f(w), fmt.Sprintf("%s killed holding %d entries; %.1fs later, still down: %d pending, %d units sold without an order",
			w.Worker, w.PendingAtKill, w.DownMS/1000, w.PendingWhileDown, w.UndersoldWhileDown)
	}
}

func streamCheck(f func(a Audit) bool) checkFunc {
	return func(r *StageRun, _ []StageRun) (bool, string) {
		if r.Audit.Stream == nil {
			return false, "the audit has no stream: not an async stage"
		}
		s := r.Audit.Stream
		return f(r.Audit), fmt.Sprintf("after draining %.1fs: %d undelivered, %d pending (oldest %.1fs), %d dead letters",
			r.DrainMS/1000, s.Undelivered, s.Pending, s.OldestPending.Seconds(), s.DeadLetters)
	}
}

// writeStreamTable prints, when the scenario ran async stages, each one's
// stream after draining: what is left, the dead letters, and the lag from
// the sale's answer to its order row.
func (rep *Report) writeStreamTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for i := range rep.Stages {
		r := &rep.Stages[i]
		s := r.Audit.Stream
		if s == nil {
			continue
		}
		if !header {
			if _, err := fmt.Fprintln(w, "\nOrder streams (after draining):"); err != nil {
				return err
			}
			fmt.Fprintln(tw, "stage\tdrain s\tlength\tundelivered\tpending\toldest pending s\tdead letters\tlag p50 ms\tlag p99 ms\t")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%.1f\t%d\t%.1f\t%.1f\t\n", r.label(), r.DrainMS/1000, s.Length, s.Undelivered, s.Pending,
			s.OldestPending.Seconds(), s.DeadLetters, float64(s.LagP50.Microseconds())/1000, float64(s.LagP99.Microseconds())/1000)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stream table: %w", err)
	}
	return nil
}
