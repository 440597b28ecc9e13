package loadgen

import (
	"context"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// auditRetryBound bounds how long an audit that fails is read again.
const auditRetryBound = 5 * time.Second

// auditPatiently reads the stage's audit, again every drainPoll while it
// fails, for at most auditRetryBound. Right after a fault heals, on a
// loaded machine, one of the shop's reads can time out (its Redis reads
// are bounded by 300 ms): a TestAsyncOutagesScenario run lost its
// orders-down row to one audit answered 503 while the workers caught up.
// One failed read of the figures is not the run's end. An audit only
// reads: one repeated, or answered late, changes nothing.
func (r *runner) auditPatiently(ctx context.Context, base, stage, sku string) (report.Audit, error) {
	deadline := time.Now().Add(auditRetryBound)
	for {
		a, err := r.shop.audit(ctx, base, stage, sku)
		if err == nil || time.Now().After(deadline) {
			return a, err
		}
		if sleep.For(ctx, drainPoll) != nil {
			return a, err
		}
	}
}
