package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// redisRestartFault: sales go on through the proxy; the stock's redis-server is
// killed with SIGKILL, stays down for hold, and starts again on its data
// directory with the step's persistence; the audit then says what survived.
// On an async stage the order workers are held (SIGSTOP) from halfway
// through before until Redis answers again, so that the kill finds entries
// no worker has read, as it does whenever sales outrun the workers; the run
// is then judged after draining (async.go).
type redisRestartFault struct{}

func (redisRestartFault) Run(ctx context.Context, st *Step) error {
	fs := st.run.Fault
	inj := st.env.Injector
	if err := inj.SetPersistence(ctx, 0, fs.Persistence); err != nil {
		return err
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	// What the kill takes is told by a key written before it, not by the
	// audit's figures: a wiped SKU restarts at the shop's default stock,
	// which may be the run's own. It is written before the load, in the
	// file when the server keeps one: the kill may take the last moment's
	// writes (the outage's LostSales), not the data kept.
	probe, err := st.env.Stores.WriteProbe(ctx)
	if err != nil {
		return fmt.Errorf("write the probe key: %w", err)
	}
	loadDone := st.background(ctx, fs.Before+fs.Hold+fs.Observe, st.env.SKU)
	defer loadDone()
	var async *report.AsyncOutageReport
	var releaseWorkers func() error
	if st.env.IsAsync(st.run.Stage) {
		async = &report.AsyncOutageReport{}
		st.rep.AsyncOrders = async
		var err error
		if releaseWorkers, err = sleepHoldingWorkers(ctx, st, fs.Before.D(), async); err != nil {
			return err
		}
	} else if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	if async != nil {
		var err error
		if async.AtFault, err = backlog(ctx, st); err != nil {
			return err
		}
	}
	st.faultAt = time.Now()
	if err := inj.KillRedis(ctx, 0); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.StartRedis(context.WithoutCancel(ctx), 0, fs.Persistence) })
	st.rep.Victim = "redis-server (" + fs.Persistence + ")"
	st.mark(st.faultAt, "redis-server killed")
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	// The fault heals when redis-server is started again; the recovery
	// clock starts there, its own start-up included.
	st.healAt = time.Now()
	st.mark(st.healAt, "redis-server started")
	if err := inj.StartRedis(ctx, 0, fs.Persistence); err != nil {
		return err
	}
	st.mark(time.Now(), "redis-server answers")
	loadDone()
	if err := st.conclude(ctx); err != nil {
		return err
	}
	kept, err := st.env.Stores.ProbeKept(ctx, probe)
	if err != nil {
		return fmt.Errorf("read the probe key: %w", err)
	}
	st.rep.Outage = outage(st, kept)
	if async != nil {
		return restartAsync(ctx, st, async, releaseWorkers)
	}
	st.note("%s", st.rep.Outage.Why)
	return nil
}

// outage says what a redis-restart step lost, and why.
func outage(st *Step, dataKept bool) *report.OutageReport {
	fs, a := st.run.Fault, st.row.Audit
	o := &report.OutageReport{Persistence: fs.Persistence, DownMS: report.MS(st.healAt.Sub(st.faultAt)), AuditSold: a.Sold, AuditInitial: a.Initial}
	st.mu.Lock()
	for _, res := range st.results {
		if attack.Classify(res.Code) == attack.Sale {
			o.SalesAcked++
		}
		if !res.Timestamp.Before(st.faultAt) && res.Timestamp.Before(st.healAt) {
			o.Answers++
			if attack.Classify(res.Code) != attack.Sale {
				o.Failures++
				o.MaxFailMS = max(o.MaxFailMS, report.MS(res.Latency))
			}
		}
		if attack.Classify(res.Code) == attack.Sale && res.End().Before(st.faultAt) {
			o.SalesBefore++
		}
	}
	first := st.faultAt
	for _, res := range st.results {
		if res.Timestamp.Before(first) {
			first = res.Timestamp
		}
	}
	st.mu.Unlock()
	if span := st.faultAt.Sub(first); span > 0 {
		o.SalesPerSecBefore = float64(o.SalesBefore) / span.Seconds()
	}
	o.InitialKept = dataKept
	o.LostSales = max(0, o.SalesAcked-a.Sold)
	if o.SalesPerSecBefore > 0 {
		o.LostMS = float64(o.LostSales) / o.SalesPerSecBefore * 1000
	}
	extra := a.Sold - o.SalesAcked
	switch {
	case !o.InitialKept:
		o.Why = fmt.Sprintf("redis-server kept its data in memory only (persistence %s): the kill emptied it, so the "+
			"stock of %d and the %d sales acknowledged before the kill are gone; the first sale after the restart "+
			"found no stock and started the SKU again from the shop's default stock (%d)",
			fs.Persistence, st.run.Stock, o.SalesBefore, a.Initial)
	case o.LostSales > 0:
		o.Why = fmt.Sprintf("the append-only file (%s) lacked the last %d acknowledged sales, about %.0f ms of sales "+
			"at %.0f/s: while the last second's fsync still runs, Redis answers writes before it writes them to the file, "+
			"so a killed process loses them", fs.Persistence, o.LostSales, o.LostMS, o.SalesPerSecBefore)
	default:
		o.Why = fmt.Sprintf("the append-only file (%s) held every acknowledged sale: Redis writes it before it "+
			"answers, and a killed process leaves what it wrote to the kernel (unless an fsync still runs: then "+
			"everysec answers before it writes, for up to 2 s); its second without fsync is lost when the machine "+
			"itself goes down", fs.Persistence)
	}
	if extra > 0 {
		o.Why += fmt.Sprintf("; %d sale(s) were written but their answers were lost with the connection (the shop said 503)", extra)
	}
	return o
}
