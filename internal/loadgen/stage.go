package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/auditpoll"
	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/payers"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/saletrace"
	"github.com/lockstep/lockstep/internal/loadgen/shards"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/loadgen/spike"
	"github.com/lockstep/lockstep/internal/loadgen/timeline"
)

// runStage runs one stage run; setup failures end up in the row's Error.
func (r *runner) runStage(ctx context.Context, index int, run plan.RunSpec) (row report.StageRun) {
	sku := r.cfg.Scenario.SKU
	row = report.StageRun{
		StageID: report.StageID{Index: index, Label: run.Label, Stage: run.Stage, Via: run.Via},
		Load:    report.Load{Rate: run.AttackRate().String(), Workers: run.Workers, Faults: run.Faults, FrontDoor: run.FrontDoor},
	}
	info := r.info[run.Stage]
	row.Title, row.Article, row.Mechanism, row.Defect = info.Title, info.Article, info.Mechanism, info.Defect
	base := r.cfg.Target
	switch {
	case !info.Available: // every stage is known: Run checked
		row.Skipped = "unavailable: " + info.Reason
		return row
	case run.Via == plan.ViaOneReplica && len(r.cfg.ReplicaURLs) == 0:
		row.Skipped = "one-replica runs need the replicas' own URLs"
		return row
	case run.Via == plan.ViaOneReplica:
		base = r.cfg.ReplicaURLs[0]
	case run.Fault != nil && (r.cfg.Injector == nil || len(r.cfg.ReplicaURLs) < 2 || r.cfg.Stores == nil):
		row.Skipped = "a fault step needs the workshop (go run ./cmd/workshop): it kills, stops and cuts off its processes"
		return row
	case run.HoldWorkers && (r.cfg.Injector == nil || len(r.cfg.Injector.OrderWorkers()) == 0):
		row.Skipped = "hold_workers needs the workshop's order workers (go run ./cmd/workshop): it stops and continues them"
		return row
	case run.FrontDoor != nil && r.cfg.FrontDoors == nil:
		row.Skipped = "a front_door needs the workshop (go run ./cmd/workshop): it restarts the replicas behind that limiter and mark"
		return row
	case run.Fault != nil && run.Fault.Kind == plan.FaultOrdersDown && !r.cfg.Injector.HasOrderServer():
		row.Skipped = "an orders-down step needs the orders in MariaDB (the embedded SQLite file is the shops' own, nothing to stop)"
		return row
	}
	fail := func(err error) report.StageRun {
		row.Error = err.Error()
		r.log.Error("stage run failed", "stage", run.Stage, "err", err)
		return row
	}
	r.live = nil
	if r.cfg.Watch != nil {
		r.live = &LiveStage{phase: "waiting to start"}
		if err := r.cfg.Watch.StageStarting(ctx, stageStart(len(r.cfg.Scenario.Runs), index, run, &row), r.live); err != nil {
			return fail(err)
		}
	}
	if r.cfg.FrontDoors != nil {
		r.live.setPhase("front door")
		if err := r.cfg.FrontDoors.Use(ctx, run.FrontDoor); err != nil {
			return fail(fmt.Errorf("front door: %w", err))
		}
	}
	var tracer *saletrace.Tracer
	if r.cfg.TraceSales && len(r.cfg.ReplicaURLs) > 0 {
		tracer = saletrace.Start(ctx, r.shop, r.cfg.ReplicaURLs[0], run.Stage, saletrace.Func(r.live.traced))
	}
	defer func() { row.Trace = tracer.Stop() }()
	if err := r.waitAllReady(ctx); err != nil {
		return fail(err)
	}
	if run.Fault != nil {
		start := time.Now()
		tl := timeline.New(start)
		r.live.follow(tl)
		r.live.setPhase(run.Fault.Kind + " step")
		r.progress.Phase(fmt.Sprintf("[%d/%d] %s: %s", index+1, len(r.cfg.Scenario.Runs), row.Name(), run.Fault.Kind), run.Fault.Window())
		peak := streamPeak(r.cfg.Shop, run.Stage)
		stopPolling := r.pollLoad(ctx, base, run.Stage, sku, tl, nil, peak)
		t, err := fault.Run(ctx, r.faultEnv(), run, &row, tl)
		if t != nil {
			fillFromTally(&row, t)
		}
		judgeConsistency(&row)
		stopPolling()
		row.StreamWhileRunning = peak
		row.Timeline = tl.Build()
		if err != nil {
			return fail(fmt.Errorf("%s step: %w", run.Fault.Kind, err))
		}
		return row
	}
	r.live.setPhase("reset")
	if err := r.shop.Reset(ctx, base, run.Stage, sku, run.Stock, run.Segments); err != nil {
		return fail(fmt.Errorf("reset: %w", err))
	}
	if err := r.applyFaults(ctx, base, run.Stage, run.Faults); err != nil {
		return fail(fmt.Errorf("faults: %w", err))
	}
	letWorkersGo := func() error { return nil }
	if run.HoldWorkers {
		var err error
		if letWorkersGo, err = holdWorkers(ctx, r.cfg.Injector); err != nil {
			return fail(err)
		}
		// On every way out; after the load it already ran, and runs again
		// as a no-op.
		defer func() { _ = letWorkersGo() }()
		row.WorkersHeld = true
	}
	start := time.Now()
	tl := timeline.New(start)
	r.live.follow(tl)
	r.live.setPhase("load")
	r.progress.Phase(fmt.Sprintf("[%d/%d] %s via %s", index+1, len(r.cfg.Scenario.Runs), run.Stage, run.Via), run.Duration.D())
	cpu := startCPUSampler(r.cfg.Processes)
	var shardReader shards.Reader
	if r.cfg.Stores != nil {
		shardReader = r.cfg.Stores
	}
	sampler := shards.Start(ctx, shardReader, run.Stage, sku, run.Segments)
	peak := streamPeak(r.cfg.Shop, run.Stage)
	stopPolling := r.pollLoad(ctx, base, run.Stage, sku, tl, sampler, peak)
	var payersOfLoad *payers.Payers
	observers := []attack.Observer{tl, r.progress}
	if run.Payment != nil && run.Payment.DuringLoad {
		// The payers end with the run, whichever way it ends.
		payCtx, cancelPayers := context.WithCancel(ctx)
		payersOfLoad = payers.Start(payCtx, r.shop, base, *run.Payment)
		defer func() { cancelPayers(); payersOfLoad.Wait() }()
		observers = append(observers, payersOfLoad)
	}
	var bots *spike.Observer
	if run.Bots != nil {
		limiter := plan.LimitNone
		if run.FrontDoor != nil {
			limiter = run.FrontDoor.Limiter
		}
		bots = spike.New(limiter)
		observers = append(observers, bots)
	}
	t := attack.Run(ctx, attack.Spec{
		Name:          run.Stage,
		URL:           shopapi.DeductURL(base, run.Stage, sku),
		Rate:          run.AttackRate(),
		Workers:       run.Workers,
		Duration:      run.Duration.D(),
		StopAtSoldOut: run.StopsWhenSoldOut(),
		Timeout:       run.Timeout.D(),
		Buyers:        run.Buyers,
		Bots:          run.Bots,
	}, observers...)
	if bots != nil {
		row.Spike = bots.Record()
	}
	if payersOfLoad != nil {
		payersOfLoad.LoadDone()
	}
	row.Interrupted = ctx.Err() != nil
	// What the load did is read even when the run was interrupted (Ctrl-C):
	// on a context of its own, bounded, so the figures are kept.
	after, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterLoadTimeout)
	defer cancel()
	row.CPU = cpu.stop()
	row.Shards = sampler.Stop(after)
	stopPolling()
	row.StreamWhileRunning = peak
	fillFromTally(&row, t)

	audit, err := r.shop.Audit(after, base, run.Stage, sku)
	if err != nil {
		return fail(fmt.Errorf("audit: %w", err))
	}
	if err := letWorkersGo(); err != nil {
		return fail(err)
	}
	if ctx.Err() == nil { // an interrupted run keeps the figures it has
		var drained time.Duration
		atLoadEnd := audit
		audit, drained, err = r.shop.Drain(ctx, base, run.Stage, sku, audit)
		row.DrainMS = float64(drained.Microseconds()) / 1000
		if err != nil {
			return fail(fmt.Errorf("drain: %w", err))
		}
		if atLoadEnd.Stream != nil && atLoadEnd.Orders != nil {
			row.OrdersAtLoadEnd = atLoadEnd.Orders.Orders
		}
		row.DrainOrdersPerSec = drainRate(atLoadEnd, audit, drained)
	}
	row.Audit, row.Oversold, row.Consistent, row.ForeignUnlocks = audit, audit.Oversold, audit.Consistent, audit.ForeignUnlocks
	row.MaxHolders = audit.MaxHolders
	judgeConsistency(&row)
	if run.Payment != nil && ctx.Err() == nil {
		if row.Payment, err = (payments{r}).step(ctx, run, base, sku, payersOfLoad); err != nil {
			row.Timeline = tl.Build()
			return fail(fmt.Errorf("payment step: %w", err))
		}
	}
	if run.Crash != nil && ctx.Err() == nil {
		if err := (crashStep{r}).run(ctx, run, base, &row, tl); err != nil {
			row.Timeline = tl.Build()
			return fail(fmt.Errorf("crash step: %w", err))
		}
	}
	row.Timeline = tl.Build()
	return row
}

// fillFromTally fills the row from the records the attack's tally owns.
func fillFromTally(row *report.StageRun, t *attack.Tally) {
	row.Replicas = t.Replicas()
	row.Answers, row.Latency = t.Answers(), t.Latency()
}

// applyFaults sets the stage's faults and, when the replicas' URLs are
// known, waits until every replica applies them: the shop stores faults in
// Redis and replicas hear of a change over pub/sub, a moment later.
func (r *runner) applyFaults(ctx context.Context, base, stage string, f plan.Faults) error {
	if err := r.shop.SetFaults(ctx, base, stage, f); err != nil {
		return err
	}
	return r.shop.AwaitFaults(ctx, r.cfg.ReplicaURLs, stage, f)
}

// pollLoad follows the audit while the load runs (auditpoll): it keeps
// the progress line's "oversold so far" and the live page's figures
// fresh, samples oversold on the timeline, keeps in peak (an async
// stage's, else nil) the most its stream reached, and gives the live page
// each master's load every fourth poll, once a second (on a cluster),
// until the returned stop function is called.
func (r *runner) pollLoad(ctx context.Context, base, stage, sku string, tl *timeline.Builder, sampler *shards.Sampler, peak *report.StreamView) (stop func()) {
	if r.cfg.Progress == nil && r.cfg.Watch == nil && peak == nil {
		return func() {}
	}
	live := r.live
	observers := []auditpoll.Observer{auditpoll.Func(func(_ int, at time.Time, a *report.Audit) {
		if a != nil {
			r.progress.Oversold(a.Oversold)
			peak.Most(a.Stream)
			tl.SampleOversold(at, a.Oversold)
		}
	})}
	if live != nil {
		observers = append(observers, live.feed(ctx, sampler))
	}
	return auditpoll.Start(ctx, r.shop, base, stage, sku, observers...)
}

// faultEnv is what this run's fault steps work with.
func (r *runner) faultEnv() *fault.Env {
	return &fault.Env{
		Shop: r.shop, Target: r.cfg.Target, Names: r.names, URLs: r.cfg.ReplicaURLs,
		SKU: r.cfg.Scenario.SKU, Injector: r.cfg.Injector, Stores: r.cfg.Stores,
		Progress: r.progress, WaitAllReady: r.waitAllReady, IsAsync: r.cfg.Shop.IsAsync,
	}
}
