package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/sleep"
)

// WorkerKillReport is what a worker-kill step saw: the order worker killed
// with entries of its batch read and not acknowledged, the stream while it
// stayed down, and after it started again under its name.
type WorkerKillReport struct {
	Worker string `json:"worker"`
	// PendingAtKill are the worker's own pending entries when it was
	// killed: read, not acknowledged.
	PendingAtKill int64 `json:"pending_at_kill"`
	// While the worker was down, after the others drained what they could:
	// entries still pending and units sold that no order holds.
	PendingWhileDown   int64 `json:"pending_while_down"`
	UndersoldWhileDown int64 `json:"undersold_while_down"`
	// DownMS is how long the worker was down.
	DownMS float64 `json:"down_ms"`
}

// workerKill: sales go on through the proxy; once an order worker holds
// entries it read and did not acknowledge, it is killed with SIGKILL and
// kept down for hold (longer than the workers' claim bound), the sales
// ending observe after the kill. The audit then says what the workers left
// can do without it (claim its entries, or not); the worker is started
// again under its name (it finishes its own pending list), and the run is
// judged after draining.
func (st *faultState) workerKill(ctx context.Context) error {
	r, fs := st.r, st.run.Fault
	if r.rdb == nil {
		return errors.New("a worker-kill step needs the stock's Redis address, to see which worker holds entries")
	}
	if _, ok := asyncorders.ModeOf(st.run.Stage); !ok {
		return fmt.Errorf("a worker-kill step runs on an async stage, not %s", st.run.Stage)
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	sku := r.cfg.Scenario.SKU
	loadDone := st.background(ctx, fs.Before+fs.Observe, sku)
	defer loadDone()
	if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	stream := asyncorders.NewQueue(r.rdb, st.run.Stage).Stream(sku)
	worker, pending, err := st.workerMidBatch(ctx, stream)
	if err != nil {
		return err
	}
	inj := r.cfg.Injector
	st.faultAt = time.Now()
	if err := inj.KillOrderWorker(ctx, worker); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.StartOrderWorker(context.WithoutCancel(ctx), worker) })
	rep := &WorkerKillReport{Worker: worker, PendingAtKill: pending}
	st.rep.Victim, st.rep.WorkerKill = worker, rep
	st.mark(st.faultAt, "kill -9 "+worker)
	st.note("%s was killed with SIGKILL holding %d entries it had read and not acknowledged", worker, pending)
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	loadDone()
	down, err := r.shop.audit(ctx, r.cfg.Target, st.run.Stage, sku)
	if err != nil {
		return fmt.Errorf("audit while %s is down: %w", worker, err)
	}
	if down, _, err = r.drainAsync(ctx, r.cfg.Target, st.run.Stage, sku, down); err != nil {
		return fmt.Errorf("drain while %s is down: %w", worker, err)
	}
	if down.Stream != nil {
		rep.PendingWhileDown = down.Stream.Pending
	}
	if down.Orders != nil {
		rep.UndersoldWhileDown = down.Orders.Undersold
	}
	st.healAt = time.Now()
	rep.DownMS = ms(st.healAt.Sub(st.faultAt))
	st.note("%.1f s after the kill, %s still down: %d entries pending, %d units sold without an order",
		rep.DownMS/1000, worker, rep.PendingWhileDown, rep.UndersoldWhileDown)
	if err := inj.StartOrderWorker(ctx, worker); err != nil {
		return err
	}
	st.mark(st.healAt, worker+" started again")
	if err := st.conclude(ctx); err != nil {
		return err
	}
	drained, took, err := r.drainAsync(ctx, r.cfg.Target, st.run.Stage, sku, st.row.Audit)
	if err != nil {
		return fmt.Errorf("drain after %s's restart: %w", worker, err)
	}
	st.row.Audit, st.row.DrainMS = drained, ms(took)
	st.row.Oversold, st.row.Consistent = drained.Oversold, drained.Consistent
	return nil
}

// workerMidBatch finds an order worker holding an entry it read and has
// not processed, and names it with its pending count; the worker is left
// stopped (SIGSTOP) for the kill. Waiting for a worker that holds two
// entries at once was left to chance: at a few hundred sales/s a worker
// read, inserted and acknowledged each before the next came (a CI run found
// none in 10 s). Instead each worker in turn is stopped while the sales go
// on: an entry Redis delivers to its blocked read while it is stopped is
// pending and surely has no order row. A worker stopped elsewhere (in an
// insert) reads no more: it is let go on, and the next is tried.
func (st *faultState) workerMidBatch(ctx context.Context, stream string) (string, int64, error) {
	inj := st.r.cfg.Injector
	deadline := time.Now().Add(holdTimeout)
	for time.Now().Before(deadline) {
		consumers, err := st.r.rdb.XInfoConsumers(ctx, stream, asyncorders.Group).Result()
		if err != nil {
			return "", 0, fmt.Errorf("read consumers: %w", err)
		}
		for _, c := range consumers {
			if err := inj.PauseOrderWorker(ctx, c.Name, true); err != nil {
				continue // not one of this run's workers, or not running
			}
			if n, ok := st.deliveredWhilePaused(ctx, stream, c.Name, c.Pending); ok {
				return c.Name, n, nil
			}
			if err := inj.PauseOrderWorker(ctx, c.Name, false); err != nil {
				return "", 0, err
			}
		}
		if err := sleep.For(ctx, pollEvery); err != nil {
			return "", 0, err
		}
	}
	return "", 0, fmt.Errorf("no order worker was delivered an entry while stopped within %s", holdTimeout)
}

// deliveredWhilePaused waits up to a second for worker's pending count to
// grow past before, and reports the count.
func (st *faultState) deliveredWhilePaused(ctx context.Context, stream, worker string, before int64) (int64, bool) {
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if err := sleep.For(ctx, 20*time.Millisecond); err != nil {
			return 0, false
		}
		p, err := st.r.rdb.XPending(ctx, stream, asyncorders.Group).Result()
		if err != nil {
			return 0, false
		}
		if n := p.Consumers[worker]; n > before {
			return n, true
		}
	}
	return 0, false
}
