package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
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
// and the sweepers gave back every cancelled order's units, and returns
// the audit then: the invariant (initial = remaining + units ordered,
// nothing pending, nothing returning) is judged after draining.
func (r *runner) drainAsync(ctx context.Context, base, stage, sku string, a report.Audit) (report.Audit, time.Duration, error) {
	if a.Stream == nil {
		return a, 0, nil
	}
	start := time.Now()
	lastPending, still := a.Stream.Pending, time.Now()
	for time.Since(start) < drainBound {
		s := a.Stream
		if s.Undelivered == 0 && (s.Pending == 0 || time.Since(still) >= drainStill) && a.Returning() == 0 {
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
		next, err := r.auditPatiently(ctx, base, stage, sku)
		if err != nil {
			return a, time.Since(start), fmt.Errorf("audit while draining: %w", err)
		}
		a = next
	}
	return a, time.Since(start), nil
}

// streamPeak is where a run of stage keeps its stream's most-seen figures
// while it runs; nil for a stage without a stream.
func streamPeak(stage string) *report.StreamView {
	if isAsync(stage) {
		return &report.StreamView{}
	}
	return nil
}

// isAsync reports whether stage is an async stage, with order workers.
func isAsync(stage string) bool {
	_, ok := asyncorders.ModeOf(stage)
	return ok
}

// holdWorkers stops every order worker (SIGSTOP) until the function it
// returns lets them go on (SIGCONT); that function may run more than once.
// A worker Redis delivers entries to while it is stopped handles them once
// it goes on, as a worker whose batch was slow would.
func (r *runner) holdWorkers(ctx context.Context) (func() error, error) {
	inj := r.cfg.Injector
	var held []string
	letGo := func() error {
		var errs []error
		for _, name := range held {
			errs = append(errs, inj.PauseOrderWorker(context.WithoutCancel(ctx), name, false))
		}
		held = nil
		return errors.Join(errs...)
	}
	for _, name := range inj.OrderWorkers() {
		if err := inj.PauseOrderWorker(ctx, name, true); err != nil {
			return nil, errors.Join(fmt.Errorf("hold order worker %s: %w", name, err), letGo())
		}
		held = append(held, name)
	}
	return letGo, nil
}

// drainRate is the orders written between two audits of an async stage, a
// drain of took apart, per second; 0 for another stage.
func drainRate(before, after report.Audit, took time.Duration) float64 {
	if before.Stream == nil || before.Orders == nil || after.Orders == nil || took <= 0 {
		return 0
	}
	return float64(after.Orders.Orders-before.Orders.Orders) / took.Seconds()
}
