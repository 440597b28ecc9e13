package fault

import (
	"bytes"
	"context"
	"net/http"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// ordersDownFault: sales go on through the proxy; after before, the order
// database is stopped (SIGSTOP) for hold, then continued; sales are
// offered until observe after the stop. On an async stage the sales do not
// touch the database: the stream's backlog is read at the stop and at the
// continue, and the run is judged after the workers drained it.
type ordersDownFault struct{}

func (ordersDownFault) Run(ctx context.Context, st *Step) error {
	fs, inj := st.run.Fault, st.env.Injector
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	loadDone := st.background(ctx, fs.Before+fs.Observe, st.env.SKU)
	defer loadDone()
	if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	if err := inj.StopOrderServer(ctx); err != nil {
		return err
	}
	st.faultAt, st.rep.Victim = time.Now(), "mariadbd"
	st.undos = append(st.undos, func() { _ = inj.ContinueOrderServer() })
	st.mark(st.faultAt, "SIGSTOP mariadbd")
	var async *report.AsyncOutageReport
	if st.env.IsAsync(st.run.Stage) {
		async = &report.AsyncOutageReport{}
		st.rep.AsyncOrders = async
		var err error
		if async.AtFault, err = backlog(ctx, st); err != nil {
			return err
		}
	}
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	if async != nil {
		heal, err := backlog(ctx, st)
		if err != nil {
			return err
		}
		async.AtHeal = &heal
	}
	st.healAt = time.Now()
	if err := inj.ContinueOrderServer(); err != nil {
		return err
	}
	st.mark(st.healAt, "SIGCONT mariadbd")
	loadDone()
	st.mu.Lock()
	st.rep.OrderOutage = orderOutage(st.results, st.faultAt, st.healAt)
	st.mu.Unlock()
	if async != nil {
		return ordersDownAsync(ctx, st, async)
	}
	o := st.rep.OrderOutage
	st.note("MariaDB stopped for %.0f ms: %d sales caught by it, %d answered 503 (%d neither orders_unavailable nor may_have_sold; the slowest after %.0f ms), %d said their units stay taken without an order, %d got no answer",
		o.DownMS, o.Answers, o.Failures, o.OtherCodes, o.MaxFailMS, o.SaidUndersold, o.Unanswered)
	return st.conclude(ctx)
}

// orderOutage sums up the answers to the sales the stop caught: sent
// before up and not yet answered at down. A sale sent a moment before the
// stop whose insert is on the wire when it comes is caught as surely as
// one sent after it; with the group commit it is often the only one that
// fails (its batch's read times out, and the sales queued behind it wait
// and sell once the database continues), so counting from down alone
// found no failure whenever a batch was on the wire at the stop.
func orderOutage(results []vegeta.Result, down, up time.Time) *report.OrderOutageReport {
	o := &report.OrderOutageReport{DownMS: report.MS(up.Sub(down))}
	for i := range results {
		res := &results[i]
		answered := res.Timestamp.Add(res.Latency)
		if answered.Before(down) || !res.Timestamp.Before(up) {
			continue
		}
		o.Answers++
		switch {
		case res.Code == 0:
			o.Unanswered++
		case res.Code == http.StatusServiceUnavailable:
			o.Failures++
			o.MaxFailMS = max(o.MaxFailMS, report.MS(res.Latency))
			// orders_unavailable: the order never lands; may_have_sold: the
			// database could not even be told to void it, the shop resolves it.
			if !bytes.Contains(res.Body, []byte(`"orders_unavailable"`)) && !bytes.Contains(res.Body, []byte(`"may_have_sold"`)) {
				o.OtherCodes++
			}
			if bytes.Contains(res.Body, []byte("undersold")) {
				o.SaidUndersold++
			}
		}
	}
	return o
}
