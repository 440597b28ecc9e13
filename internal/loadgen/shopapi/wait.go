package shopapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// ReadyTimeout bounds the wait for a replica: to be ready (one restarting
// after a crash), or to apply new faults.
const ReadyTimeout = 20 * time.Second

// Bounds of the wait for an async stage's workers after the load.
const (
	drainBound = 60 * time.Second
	// drainStill: pending that has not moved for this long will not move
	// (async-wrong-ack's entries are never acknowledged).
	drainStill = 3 * time.Second
)

// PollEvery is how often the waits read the audit again.
const PollEvery = 100 * time.Millisecond

// auditRetryBound bounds how long an audit that fails is read again.
const auditRetryBound = 5 * time.Second

// AuditPatiently reads the stage's audit, again every PollEvery while it
// fails, for at most auditRetryBound. Right after a fault heals, on a
// loaded machine, one of the shop's reads can time out (its Redis reads
// are bounded by 300 ms): a TestAsyncOutagesScenario run lost its
// orders-down row to one audit answered 503 while the workers caught up.
// One failed read of the figures is not the run's end. An audit only
// reads: one repeated, or answered late, changes nothing.
func (c *Client) AuditPatiently(ctx context.Context, base, stage, sku string) (report.Audit, error) {
	deadline := time.Now().Add(auditRetryBound)
	for {
		a, err := c.Audit(ctx, base, stage, sku)
		if err == nil || time.Now().After(deadline) {
			return a, err
		}
		if sleep.For(ctx, PollEvery) != nil {
			return a, err
		}
	}
}

// Drain waits, after an async stage's load, until the order workers
// delivered every entry and the pending list is empty or stopped moving,
// and the sweepers gave back every cancelled order's units, and returns
// the audit then: the invariant (initial = remaining + units ordered,
// nothing pending, nothing returning) is judged after draining.
func (c *Client) Drain(ctx context.Context, base, stage, sku string, a report.Audit) (report.Audit, time.Duration, error) {
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
		case <-time.After(PollEvery):
		}
		next, err := c.AuditPatiently(ctx, base, stage, sku)
		if err != nil {
			return a, time.Since(start), fmt.Errorf("audit while draining: %w", err)
		}
		a = next
	}
	return a, time.Since(start), nil
}

// AwaitFaults waits until each of the replicas applies the faults.
func (c *Client) AwaitFaults(ctx context.Context, replicas []string, stage string, f plan.Faults) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	for _, replica := range replicas {
		for {
			stages, err := c.Stages(ctx, replica)
			if err == nil && slices.ContainsFunc(stages, func(s StageInfo) bool { return s.ID == stage && s.Faults == f }) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not apply the faults: %w", replica, errors.Join(err, ctx.Err()))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
