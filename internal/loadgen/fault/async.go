package fault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/sleep"
)

// backlog reads the stage's stream through the injector, from Redis: the shop's audit
// counts the orders too, which waits on a stopped order database.
func backlog(ctx context.Context, st *Step) (report.Backlog, error) {
	s, err := st.env.Injector.OrderStream(ctx, st.run.Stage, st.env.SKU)
	if err != nil {
		return report.Backlog{}, fmt.Errorf("read the order stream: %w", err)
	}
	return report.Backlog{Undelivered: s.Undelivered, Pending: s.Pending, OldestPendingMS: report.MS(s.OldestPending)}, nil
}

// holdWorkers stops every order worker (SIGSTOP) until the returned
// function continues them (calling it again is fine; the step's undo
// calls it too).
func holdWorkers(ctx context.Context, st *Step) (func() error, error) {
	inj := st.env.Injector
	names := inj.OrderWorkers()
	if len(names) == 0 {
		return nil, errors.New("no order worker to hold: the step runs on the workshop's async set-up")
	}
	held := false
	release := func() error {
		if !held {
			return nil
		}
		held = false
		var errs []error
		for _, n := range names {
			errs = append(errs, inj.PauseOrderWorker(context.WithoutCancel(ctx), n, false))
		}
		return errors.Join(errs...)
	}
	held = true
	st.undos = append(st.undos, func() { _ = release() })
	for _, n := range names {
		if err := inj.PauseOrderWorker(ctx, n, true); err != nil {
			return nil, errors.Join(err, release())
		}
	}
	st.mark(time.Now(), "order workers stopped")
	return release, nil
}

// admittedSale is a sale answered 200 naming an order: its buyer, and
// whether it was sent before the fault healed.
type admittedSale struct {
	user       string
	beforeHeal bool
}

// admitted are the step's sales answered 200 naming an order, by order id.
// Sent before the fault healed, not answered before the fault: a sale the
// killed Redis admitted may be answered a moment after the step's clock
// says it killed it.
func admitted(st *Step) map[string]admittedSale {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := map[string]admittedSale{}
	for i := range st.results {
		res := &st.results[i]
		if res.Code != http.StatusOK {
			continue
		}
		var sale struct {
			Order string `json:"order"`
			User  string `json:"user"`
		}
		if json.Unmarshal(res.Body, &sale) == nil && sale.Order != "" {
			ids[sale.Order] = admittedSale{user: sale.User, beforeHeal: res.Timestamp.Before(st.healAt)}
		}
	}
	return ids
}

// drainAndCount waits for the workers to drain the stream, makes the
// drained audit the row's, and counts in rep the admitted sales whose
// order no row holds.
func drainAndCount(ctx context.Context, st *Step, rep *report.AsyncOutageReport) error {
	drained, took, err := st.env.Shop.Drain(ctx, st.env.Target, st.run.Stage, st.env.SKU, st.row.Audit)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	st.row.Audit, st.row.DrainMS = drained, report.MS(took)
	st.row.Oversold, st.row.Consistent = drained.Oversold, drained.Consistent
	list, err := st.env.Shop.Orders(ctx, st.env.Target, st.run.Stage, st.env.SKU)
	if err != nil {
		return fmt.Errorf("list the orders: %w", err)
	}
	if len(list) >= shopapi.MaxOrders {
		return fmt.Errorf("%d orders or more: too many to tell which sales have one", shopapi.MaxOrders)
	}
	rows := make(map[string]bool, len(list))
	buyers := make(map[string]bool, len(list))
	for _, o := range list {
		rows[o.ID], buyers[o.User] = true, true
	}
	countWithoutOrder(rep, admitted(st), rows, buyers)
	return nil
}

// countWithoutOrder counts in rep the sales of admitted whose order id is
// not among rows (the order table's, after draining). A sale after the
// heal by one of buyers (who have a row) is left out: a buyer of before a
// kill that wiped Redis, drawn again, whose second order the order table's
// unique buyer refuses (dead-lettered, its unit given back) — what rebuy
// shows on purpose, not a sale lost.
func countWithoutOrder(rep *report.AsyncOutageReport, admitted map[string]admittedSale, rows, buyers map[string]bool) {
	for id, sale := range admitted {
		if !rows[id] && !sale.beforeHeal && buyers[sale.user] {
			continue
		}
		rep.Admitted++
		if sale.beforeHeal {
			rep.AdmittedBeforeHeal++
		}
		if !rows[id] {
			rep.WithoutOrder++
			if sale.beforeHeal {
				rep.WithoutOrderBeforeHeal++
			}
		}
	}
}

// rebuy sells again to a buyer whose order was written before the fault,
// and records the answer: whether Redis still knows the buyer.
func rebuy(ctx context.Context, st *Step, rep *report.AsyncOutageReport) error {
	list, err := st.env.Shop.Orders(ctx, st.env.Target, st.run.Stage, st.env.SKU)
	if err != nil {
		return fmt.Errorf("list the orders: %w", err)
	}
	if len(list) == 0 {
		return nil // no order before the fault: the check says so
	}
	rep.Rebuyer = list[0].User
	if rep.RebuyStatus, err = st.env.Shop.Buy(ctx, st.env.Target, st.run.Stage, st.env.SKU, rep.Rebuyer); err != nil {
		return fmt.Errorf("buy again as %s: %w", rep.Rebuyer, err)
	}
	return nil
}

// ordersDownAsync ends an orders-down step on an async stage: the sales
// never waited for the database, the workers did; the run is judged after
// they drained the stream.
func ordersDownAsync(ctx context.Context, st *Step, rep *report.AsyncOutageReport) error {
	if err := st.conclude(ctx); err != nil {
		return err
	}
	if err := drainAndCount(ctx, st, rep); err != nil {
		return err
	}
	o, h := st.rep.OrderOutage, rep.AtHeal
	st.note("MariaDB stopped for %.0f ms: %d sales caught by it, %d answered 503; at SIGCONT the stream held %d entries no worker had read and %d pending (the oldest %.1f s); drained %.1f s after the load, %d of %d sales answered 200 without an order",
		o.DownMS, o.Answers, o.Failures, h.Undelivered, h.Pending, h.OldestPendingMS/1000, st.row.DrainMS/1000, rep.WithoutOrder, rep.Admitted)
	return nil
}

// restartAsync ends a redis-restart step on an async stage, the workers
// held since before the kill and Redis answering again: a buyer of before
// the kill buys again, the workers go on, and what the restart lost is
// counted after they drained the stream.
func restartAsync(ctx context.Context, st *Step, rep *report.AsyncOutageReport, releaseWorkers func() error) error {
	if err := rebuy(ctx, st, rep); err != nil {
		return err
	}
	if err := releaseWorkers(); err != nil {
		return err
	}
	st.mark(time.Now(), "order workers continued")
	if err := drainAndCount(ctx, st, rep); err != nil {
		return err
	}
	a := st.row.Audit
	st.note("%s: just before the kill the stream held %d entries no worker had read and %d pending; after draining, %d of the %d sales answered 200 and sent before the restart have no order (%d of %d sent after it); a buyer with an order of before the kill (%s) buying again was answered %d; initial stock %d (the run's %d), undersold %d",
		st.run.Fault.Persistence, rep.AtFault.Undelivered, rep.AtFault.Pending, rep.WithoutOrderBeforeHeal, rep.AdmittedBeforeHeal,
		rep.WithoutOrder-rep.WithoutOrderBeforeHeal, rep.Admitted-rep.AdmittedBeforeHeal, rep.Rebuyer, rep.RebuyStatus, a.Initial, st.run.Stock, undersoldOf(a))
	return nil
}

// sleepHoldingWorkers sleeps before, the order workers held (stopped) for
// its second half, so that the stream holds a backlog when the fault
// strikes.
func sleepHoldingWorkers(ctx context.Context, st *Step, before time.Duration, rep *report.AsyncOutageReport) (func() error, error) {
	if err := sleep.For(ctx, before/2); err != nil {
		return nil, err
	}
	release, err := holdWorkers(ctx, st)
	if err != nil {
		return nil, err
	}
	rep.WorkersHeld = true
	return release, sleep.For(ctx, before-before/2)
}

func undersoldOf(a report.Audit) int64 {
	if a.Orders == nil {
		return 0
	}
	return a.Orders.Undersold
}
