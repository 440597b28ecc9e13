package fault

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
	"github.com/lockstep/lockstep/orders"
)

// The order worker's crash hook points the worker-kill and
// duplicate-delivery steps arm, named as cmd/orderworker names them.
const (
	hookAfterRead   = "after-read"
	hookAfterInsert = "after-insert"
)

// workerKillFault kills an order worker at its crash hook (worker-kill:
// after-read; duplicate-delivery: after-insert); see workerCrash.
type workerKillFault struct{ hook string }

func (k workerKillFault) Run(ctx context.Context, st *Step) error {
	return workerCrash(ctx, st, k.hook)
}

// workerCrash: sales go on through the proxy; after before, an order
// worker's crash hook is armed at at, and the worker kills itself with
// SIGKILL when its next batch reaches that point. The step reads what it
// left pending and which of those entries already have their order row,
// keeps it down for hold (longer than the workers' claim bound; the sales
// end observe after the death), and reads the audit: what the workers left
// could do without it (claim its entries, or not). The worker is started
// again under its name (it finishes its own pending list), and the run is
// judged after draining.
func workerCrash(ctx context.Context, st *Step, at string) error {
	fs := st.run.Fault
	if !st.env.IsAsync(st.run.Stage) {
		return fmt.Errorf("a %s step runs on an async stage, not %s", fs.Kind, st.run.Stage)
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	sku := st.env.SKU
	loadDone := st.background(ctx, fs.Before+fs.Observe, sku)
	defer loadDone()
	if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	inj := st.env.Injector
	worker, err := inj.CrashOrderWorker(ctx, at)
	if err != nil {
		return fmt.Errorf("crash an order worker %s: %w", at, err)
	}
	st.faultAt = time.Now()
	st.undos = append(st.undos, func() { _ = inj.StartOrderWorker(context.WithoutCancel(ctx), worker) })
	rep := &report.WorkerKillReport{Worker: worker, At: at}
	st.rep.Victim, st.rep.WorkerKill = worker, rep
	st.mark(st.faultAt, "kill -9 "+worker+" "+at)
	if rep.PendingAtKill, rep.RowsAtKill, err = heldRows(ctx, st, sku, worker); err != nil {
		return err
	}
	st.note("%s killed itself with SIGKILL %s, holding %d entries it had read and not acknowledged, %d of them with their order row",
		worker, at, rep.PendingAtKill, rep.RowsAtKill)
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	loadDone()
	down, err := st.env.Shop.Audit(ctx, st.env.Target, st.run.Stage, sku)
	if err != nil {
		return fmt.Errorf("audit while %s is down: %w", worker, err)
	}
	if down, _, err = st.env.Shop.Drain(ctx, st.env.Target, st.run.Stage, sku, down); err != nil {
		return fmt.Errorf("drain while %s is down: %w", worker, err)
	}
	if down.Stream != nil {
		rep.PendingWhileDown = down.Stream.Pending
	}
	if down.Orders != nil {
		rep.UndersoldWhileDown = down.Orders.Undersold
	}
	st.healAt = time.Now()
	rep.DownMS = report.MS(st.healAt.Sub(st.faultAt))
	st.note("%.1f s after its death, %s still down: %d entries pending, %d units sold without an order",
		rep.DownMS/1000, worker, rep.PendingWhileDown, rep.UndersoldWhileDown)
	if err := inj.StartOrderWorker(ctx, worker); err != nil {
		return err
	}
	st.mark(st.healAt, worker+" started again")
	if err := st.conclude(ctx); err != nil {
		return err
	}
	drained, took, err := st.env.Shop.Drain(ctx, st.env.Target, st.run.Stage, sku, st.row.Audit)
	if err != nil {
		return fmt.Errorf("drain after %s's restart: %w", worker, err)
	}
	st.row.Audit, st.row.DrainMS = drained, report.MS(took)
	st.row.Oversold, st.row.Consistent = drained.Oversold, drained.Consistent
	return nil
}

// heldRows reads the entries the dead worker holds, and how many of them
// have their order row in the shop's order table. The rows are listed
// between two reads of what it holds: the same entries, each delivered as
// often, so no other worker took one meanwhile and every row counted is
// one the dead worker wrote.
func heldRows(ctx context.Context, st *Step, sku, worker string) (held, rows int64, err error) {
	inj := st.env.Injector
	before, err := inj.HeldEntries(ctx, st.run.Stage, sku, worker)
	if err != nil {
		return 0, 0, err
	}
	written, err := st.env.Shop.Orders(ctx, st.env.Target, st.run.Stage, sku)
	if err != nil {
		return 0, 0, fmt.Errorf("list the orders %s held entries of: %w", worker, err)
	}
	after, err := inj.HeldEntries(ctx, st.run.Stage, sku, worker)
	if err != nil {
		return 0, 0, err
	}
	if !slices.Equal(before, after) {
		return 0, 0, fmt.Errorf("%s's pending entries changed while its rows were read (%d, then %d): another worker took them", worker, len(before), len(after))
	}
	for _, h := range before {
		if slices.ContainsFunc(written, func(o orders.Order) bool { return o.ID == h.OrderID }) {
			rows++
		}
	}
	return int64(len(before)), rows, nil
}
