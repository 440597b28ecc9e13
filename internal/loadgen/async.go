package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// streamPeak is where a run of stage keeps its stream's most-seen figures
// while it runs; nil for a stage without a stream.
func streamPeak(shop plan.Shop, stage string) *report.StreamView {
	if shop.IsAsync(stage) {
		return &report.StreamView{}
	}
	return nil
}

// holdWorkers stops every order worker (SIGSTOP) until the function it
// returns lets them go on (SIGCONT); that function may run more than once.
// A worker Redis delivers entries to while it is stopped handles them once
// it goes on, as a worker whose batch was slow would.
func holdWorkers(ctx context.Context, inj fault.Injector) (func() error, error) {
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
