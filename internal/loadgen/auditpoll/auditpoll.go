// Package auditpoll is the poller that reads a stage's audit while its
// load runs and hands each reading to its observers, as the attack hands
// its answers to its own: the progress line's oversold so far, the
// timeline's oversold line, an async stage's stream peak, the live page.
// It keeps no record; its observers do. It speaks the shop's HTTP API
// through an Auditor (shopapi.Client) and imports no store and no Redis
// client.
package auditpoll

import (
	"context"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// Every is how often the audit is read.
const Every = 250 * time.Millisecond

// Auditor reads a stage's audit (shopapi.Client.Audit).
type Auditor interface {
	Audit(ctx context.Context, base, stage, sku string) (report.Audit, error)
}

// Observer takes each poll: its number (from 1), when, and the audit
// read then; audit is nil when that read failed (a Redis outage of a fault
// step), so an observer that also paces other reads by the polls keeps
// its pace.
type Observer interface {
	Polled(n int, at time.Time, audit *report.Audit)
}

// Func is an Observer of one function.
type Func func(n int, at time.Time, audit *report.Audit)

// Polled calls f.
func (f Func) Polled(n int, at time.Time, audit *report.Audit) { f(n, at, audit) }

// Start reads stage's audit at base Every, handing each reading to the
// observers in order, until the returned stop function is called; stop
// returns once no observer is called any more.
func Start(ctx context.Context, shop Auditor, base, stage, sku string, observers ...Observer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(Every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				var audit *report.Audit
				if a, err := shop.Audit(ctx, base, stage, sku); err == nil {
					audit = &a
				}
				at := time.Now()
				for _, o := range observers {
					o.Polled(n, at, audit)
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}
