package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/loadgen/timeline"
)

// crashStep runs a stage run's crash step (plan.CrashStep) with the
// runner's shop, faults and progress.
type crashStep struct{ *runner }

// run makes a replica exit while holding the stage's lock and watches
// whether, and when, sales resume. See plan.CrashStep.
func (r crashStep) run(ctx context.Context, run plan.RunSpec, base string, row *report.StageRun, tl *timeline.Builder) error {
	sku := r.cfg.Scenario.SKU
	r.live.setPhase("crash step")
	if err := r.waitAllReady(ctx); err != nil {
		return err
	}
	if err := r.shop.Reset(ctx, base, run.Stage, sku, run.Stock, run.Segments); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	faults := run.Faults
	faults.SlowRatio, faults.Slow = 0, 0
	faults.CrashHoldingLock = true
	if err := r.applyFaults(ctx, base, run.Stage, faults); err != nil {
		return fmt.Errorf("arm crash: %w", err)
	}
	crash := &report.CrashReport{}
	row.Crash = crash
	status, err := r.triggerCrash(ctx, base, run, sku)
	crashAt := time.Now()
	switch {
	case err != nil:
		crash.Triggered, crash.TriggerAnswer = true, err.Error()
	case status >= 500:
		crash.Triggered, crash.TriggerAnswer = true, fmt.Sprintf("status %d", status)
	default:
		crash.TriggerAnswer = fmt.Sprintf("status %d: the replica did not crash", status)
	}
	// The replica that crashed disarmed the fault in Redis; this also
	// clears it when nothing crashed, and tells every replica. It goes
	// through the target, which routes around the crashed replica, and is
	// not awaited: that replica is restarting, and waiting for it would
	// delay the observation.
	faults.CrashHoldingLock = false
	if err := r.shop.SetFaults(ctx, r.cfg.Target, run.Stage, faults); err != nil {
		return fmt.Errorf("disarm crash: %w", err)
	}
	if !crash.Triggered {
		return nil
	}
	crash.AtMS = tl.Since(crashAt)
	tl.Mark(crashAt, "crash")

	r.live.setPhase("after the crash")
	r.progress.Phase(fmt.Sprintf("      %s after the crash", run.Stage), run.Crash.Observe.D())
	t := attack.Run(ctx, attack.Spec{
		Name:     run.Stage + "-after-crash",
		URL:      shopapi.DeductURL(base, run.Stage, sku),
		Rate:     run.Crash.Rate,
		Workers:  run.Crash.Workers,
		Duration: run.Crash.Observe.D(),
		Timeout:  run.Timeout.D(),
		Buyers:   run.Buyers,
	}, tl, r.progress)
	crash.Requests, crash.Sales, crash.Busy, crash.AlreadyBought, crash.Errors = t.Requests, t.Sales, t.Busy, t.AlreadyBought, t.Errors
	crash.ObserveMS = report.MS(t.Elapsed())
	stuck := t.Requests > 0 && t.Sales == 0
	row.Stuck = &stuck
	if t.Sales > 0 {
		recovery := report.MS(t.FirstSale.Sub(crashAt))
		row.RecoveryMS = &recovery
		tl.Mark(t.FirstSale, "first sale")
	}
	if err := r.undersoldAfterCrash(ctx, base, run.Stage, crash); err != nil {
		return err
	}
	if r.cfg.Stores != nil {
		keys, err := r.cfg.Stores.LockKeys(ctx, run.Stage)
		if err != nil {
			return fmt.Errorf("inspect lock keys: %w", err)
		}
		crash.LockKeys = keys
	}
	if !stuck {
		return nil
	}
	// Stuck: show that only a reset (which drops the lock) lets sales resume.
	if err := r.shop.Reset(ctx, base, run.Stage, sku, run.Stock, run.Segments); err != nil {
		return fmt.Errorf("reset after crash: %w", err)
	}
	tl.Mark(time.Now(), "reset")
	status, err = r.shop.Deduct(ctx, base, run.Stage, sku, crashBuyer(run, 0))
	sold := err == nil && attack.Classify(uint16(status)) == attack.Sale
	crash.SaleAfterReset = &sold
	tl.Add(time.Now(), sold)
	return nil
}

// triggerCrashAttempts bounds the sales sent to trigger an armed crash:
// without the replicas' URLs the loadgen cannot wait for every replica to
// hear of the fault, and one that has not yet just sells.
const triggerCrashAttempts = 10

// undersoldAfterCrash records, for an order stage, the units the crash
// step's sales took that no order holds: the crash between the deduction
// and the order insert loses them.
func (r crashStep) undersoldAfterCrash(ctx context.Context, base, stage string, crash *report.CrashReport) error {
	audit, err := r.shop.Audit(ctx, base, stage, r.cfg.Scenario.SKU)
	if err != nil {
		return fmt.Errorf("audit after the crash: %w", err)
	}
	if audit.Orders != nil {
		crash.Undersold = &audit.Orders.Undersold
	}
	return nil
}

// crashBuyer names the buyer of the crash step's n-th own sale when the run
// names buyers (a one-per-user stage refuses a sale without one): a buyer
// of its own, outside the load's population.
func crashBuyer(run plan.RunSpec, n int) string {
	if run.Buyers == nil {
		return ""
	}
	return "crash-step-" + strconv.Itoa(n)
}

// triggerCrash sends sale attempts until one does not sell: the crash (a
// transport error, or a 502 from the proxy) or an unexpected answer.
func (r crashStep) triggerCrash(ctx context.Context, base string, run plan.RunSpec, sku string) (int, error) {
	for attempt := 1; ; attempt++ {
		status, err := r.shop.Deduct(ctx, base, run.Stage, sku, crashBuyer(run, attempt))
		if err != nil || attack.Classify(uint16(status)) != attack.Sale || attempt == triggerCrashAttempts {
			return status, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
