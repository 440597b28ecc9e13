// Package loadgen drives the shop's stages with vegeta and reports, for
// each, how many units were oversold and how many sales per second it held.
//
// It is split by responsibility, like vegeta's lib and k6's packages:
//   - plan (internal/loadgen/plan) is the scenario model and its own
//     validation, no I/O; ParseScenario here adds the checks plan cannot
//     know (the expectations' grammar, which stages are async);
//   - expect (internal/loadgen/expect) judges the rows: each expectation a
//     check over a stage's record, one file per family;
//   - report (internal/loadgen/report) holds the records a run fills
//     (Report, its StageRun rows and what each part of a run saw) and the
//     writers: report.json, report.html with its SVG, the terminal tables;
//   - attack (internal/loadgen/attack) sends the sales with vegeta
//     (targets, buyers, pacing) and hands each result to its observers
//     (attack.Observer) after its own Tally;
//   - shopapi (internal/loadgen/shopapi) is the shop's HTTP API: the
//     client, the patient audit, the drain, the wait for faults;
//   - fault (internal/loadgen/fault) carries out the fault steps, one kind
//     per file, through the Injector and the Stores the workshop provides;
//   - the observers with a record of their own: timeline
//     (report.Timeline) and shards (report.ShardLoad);
//   - this package walks the scenario (run.go: reset → faults → attack →
//     audit → drain → payment or crash step) and follows the attacks with
//     the other observers and pollers (progress, trace, stream figures,
//     payers, the live page).
//
// loadgen speaks HTTP to the shops. It does not import the stores'
// packages (inventory, orders, asyncorders, segments) for anything but the
// result types the shop's HTTP API returns, nor a Redis client: what it
// reads in the stores' servers it asks Config.Stores for
// (internal/storeview), what it does to the processes Config.Injector.
// Left over: which stages are async (asyncorders.ModeOf).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/expect"
	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shards"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/loadgen/timeline"
)

// Config is what Run needs to know about the set-up.
type Config struct {
	// Target is the base URL the stages are attacked through (the proxy).
	Target string
	// ReplicaURLs are the replicas' own base URLs. Optional; with them the
	// run waits for every replica before a stage and can run "one-replica"
	// stages.
	ReplicaURLs []string
	AdminToken  string
	// Stores, optional, reads what the shops keep in Redis (the workshop's
	// storeview.View): the crash step's lock keys, each Cluster master's
	// load, and what the fault steps look at. Without it those are left
	// out, and runs with a fault step are skipped.
	Stores Stores
	// Redis and Proxy describe the set-up for the report; when empty they
	// are asked from Redis (INFO) and from the target's Server header.
	Redis, Proxy report.Component
	// Orders, optional, says where the order stages keep their orders
	// (MariaDB, or the embedded SQLite fallback), for the report.
	Orders       string
	Scenario     *plan.Scenario
	ScenarioFile string
	// Progress receives live progress; nil shows none. Interactive redraws
	// one line (a terminal) instead of printing a line a second.
	Progress    io.Writer
	Interactive bool
	// Processes, optional, returns the PIDs of each component (shop, nginx,
	// redis) so the report can say how many cores each used.
	Processes func() map[string][]int
	// Injector, optional, carries out the fault steps (the workshop's);
	// without it runs with a fault step are skipped. They also need the
	// replicas' URLs and a Redis address.
	Injector fault.Injector
	// GrafanaURL, optional, is where each stage run is annotated (a region
	// tagged lockstep and the stage); a user in it is sent as basic auth,
	// GrafanaToken, if set, as a bearer token instead. A failed annotation
	// is a warning, never a failed run.
	GrafanaURL   string
	GrafanaToken string
	// Watch, optional, follows the run live (see Watcher).
	Watch Watcher
	// TraceSales asks the first replica to trace one sale of each stage
	// run (its Redis commands: StageRun.Trace).
	TraceSales bool
	Logger     *slog.Logger
}

// ErrUnknownStage is Run's error for a scenario naming a stage the shop
// does not have; nothing has run when it is returned.
var ErrUnknownStage = errors.New("unknown stage")

// afterLoadTimeout bounds the reads after a load phase (the audit, each
// master's figures), which run even when the run was interrupted.
const afterLoadTimeout = 10 * time.Second

type runner struct {
	cfg      Config
	shop     *shopapi.Client
	progress *progress
	log      *slog.Logger
	info     map[string]shopapi.StageInfo
	names    []string   // the replicas' names, as ReplicaURLs
	live     *LiveStage // the running stage's, for cfg.Watch; nil without
}

// Run walks the scenario and returns the report. When ctx ends it stops
// between (or inside) attacks and returns what was measured so far together
// with ctx's error.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if cfg.Target == "" || cfg.Scenario == nil {
		return nil, errors.New("loadgen: target and scenario are required")
	}
	r := &runner{
		cfg:      cfg,
		shop:     shopapi.New(cfg.AdminToken),
		progress: newProgress(cfg.Progress, cfg.Interactive),
		log:      cfg.Logger,
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	grafana, err := newAnnotator(cfg.GrafanaURL, cfg.GrafanaToken)
	if err != nil {
		return nil, err
	}
	if err := r.waitAllReady(ctx); err != nil {
		return nil, err
	}
	for _, u := range cfg.ReplicaURLs {
		name, err := r.shop.ReplicaName(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("replica name: %w", err)
		}
		r.names = append(r.names, name)
	}
	stages, err := r.shop.Stages(ctx, cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("list stages: %w", err)
	}
	r.info = map[string]shopapi.StageInfo{}
	ids := make([]string, len(stages))
	for i, s := range stages {
		r.info[s.ID], ids[i] = s, s.ID
	}
	if err := CheckStages(cfg.Scenario, ids); err != nil {
		return nil, err
	}

	rep := &report.Report{
		Scenario:     cfg.Scenario.Name,
		ScenarioFile: cfg.ScenarioFile,
		StartedAt:    time.Now(),
		Params: report.Params{
			Target:      cfg.Target,
			ReplicaURLs: cfg.ReplicaURLs,
			Replicas:    len(cfg.ReplicaURLs),
			SKU:         cfg.Scenario.SKU,
			Scenario:    *cfg.Scenario,
		},
		Machine: DescribeMachine(),
		Redis:   r.describeRedis(ctx),
		Proxy:   r.describeProxy(ctx),
		Orders:  cfg.Orders,
	}
	var runErr error
	for i, run := range cfg.Scenario.Runs {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		start := time.Now()
		row := r.runStage(ctx, i, run)
		if grafana != nil && row.Skipped == "" {
			if err := grafana.annotate(ctx, &row, start, time.Now()); err != nil {
				r.log.Warn("grafana annotation", "stage", run.Stage, "err", err)
			}
		}
		rep.Stages = append(rep.Stages, row)
		r.progress.note("%s", row.SummaryLine())
		if cfg.Watch != nil {
			cfg.Watch.StageDone(row)
		}
	}
	if runErr == nil {
		runErr = ctx.Err()
	}
	rep.FinishedAt = time.Now()
	rep.WallSeconds = rep.FinishedAt.Sub(rep.StartedAt).Seconds()
	expect.Evaluate(rep.Stages, cfg.Scenario)
	rep.ExpectationsMet = runErr == nil && (rep.Judged() || !cfg.Scenario.Expects())
	for i := range rep.Stages {
		if rep.Stages[i].Error != "" || !rep.Stages[i].Passed() {
			rep.ExpectationsMet = false
		}
	}
	return rep, runErr
}

// CheckStages refuses a scenario naming a stage that is not one of ids,
// with ErrUnknownStage naming it and ids: a misspelt stage would otherwise
// become a skipped row. Run checks the shop's stages before any runs.
func CheckStages(sc *plan.Scenario, ids []string) error {
	var unknown []string
	for _, run := range sc.Runs {
		if !slices.Contains(ids, run.Stage) && !slices.Contains(unknown, run.Stage) {
			unknown = append(unknown, run.Stage)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("%w %q in the scenario; the shop's stages are %s", ErrUnknownStage, unknown, strings.Join(ids, ", "))
}

// runStage runs one stage run; setup failures end up in the row's Error.
func (r *runner) runStage(ctx context.Context, index int, run plan.RunSpec) (row report.StageRun) {
	sku := r.cfg.Scenario.SKU
	row = report.StageRun{
		StageID: report.StageID{Index: index, Label: run.Label, Stage: run.Stage, Via: run.Via},
		Load:    report.Load{Rate: run.AttackRate().String(), Workers: run.Workers, Faults: run.Faults},
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
		if err := r.cfg.Watch.StageStarting(ctx, r.stageStart(index, run, &row), r.live); err != nil {
			return fail(err)
		}
	}
	tracer := r.traceSales(ctx, run.Stage, r.live)
	defer func() { row.Trace = tracer.stop() }()
	if err := r.waitAllReady(ctx); err != nil {
		return fail(err)
	}
	if run.Fault != nil {
		start := time.Now()
		tl := timeline.New(start)
		r.live.follow(tl)
		r.live.setPhase(run.Fault.Kind + " step")
		r.progress.phase(fmt.Sprintf("[%d/%d] %s: %s", index+1, len(r.cfg.Scenario.Runs), row.Name(), run.Fault.Kind), run.Fault.Window())
		peak := streamPeak(run.Stage)
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
		if letWorkersGo, err = r.holdWorkers(ctx); err != nil {
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
	r.progress.phase(fmt.Sprintf("[%d/%d] %s via %s", index+1, len(r.cfg.Scenario.Runs), run.Stage, run.Via), run.Duration.D())
	cpu := startCPUSampler(r.cfg.Processes)
	var shardReader shards.Reader
	if r.cfg.Stores != nil {
		shardReader = r.cfg.Stores
	}
	sampler := shards.Start(ctx, shardReader, run.Stage, sku, run.Segments)
	peak := streamPeak(run.Stage)
	stopPolling := r.pollLoad(ctx, base, run.Stage, sku, tl, sampler, peak)
	var payers *loadPayers
	observers := []attack.Observer{tl, r.progress}
	if run.Payment != nil && run.Payment.DuringLoad {
		// The payers end with the run, whichever way it ends.
		payCtx, cancelPayers := context.WithCancel(ctx)
		payers = newLoadPayers(payCtx, r.shop, base, *run.Payment)
		defer func() { cancelPayers(); payers.wait() }()
		observers = append(observers, attack.ObserverFunc(func(res attack.Result) { payers.onSale(res.Result) }))
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
	}, observers...)
	if payers != nil {
		payers.loadDone()
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
		if row.Payment, err = r.paymentStep(ctx, run, base, sku, payers); err != nil {
			row.Timeline = tl.Build()
			return fail(fmt.Errorf("payment step: %w", err))
		}
	}
	if run.Crash != nil && ctx.Err() == nil {
		if err := r.crashStep(ctx, run, base, &row, tl); err != nil {
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

// crashStep makes a replica exit while holding the stage's lock and watches
// whether, and when, sales resume. See CrashStep.
func (r *runner) crashStep(ctx context.Context, run plan.RunSpec, base string, row *report.StageRun, tl *timeline.Builder) error {
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
	r.progress.phase(fmt.Sprintf("      %s after the crash", run.Stage), run.Crash.Observe.D())
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
func (r *runner) undersoldAfterCrash(ctx context.Context, base, stage string, crash *report.CrashReport) error {
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
func (r *runner) triggerCrash(ctx context.Context, base string, run plan.RunSpec, sku string) (int, error) {
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

// applyFaults sets the stage's faults and, when the replicas' URLs are
// known, waits until every replica applies them: the shop stores faults in
// Redis and replicas hear of a change over pub/sub, a moment later.
func (r *runner) applyFaults(ctx context.Context, base, stage string, f plan.Faults) error {
	if err := r.shop.SetFaults(ctx, base, stage, f); err != nil {
		return err
	}
	return r.shop.AwaitFaults(ctx, r.cfg.ReplicaURLs, stage, f)
}

// pollLoad keeps the progress line's "oversold so far" and the live
// page's fresh from the audit, samples it on the timeline, and gives the
// live page each master's load every second (on a cluster), keeps in peak
// (an async stage's, else nil) the most its stream reached, until the
// returned stop function is called.
func (r *runner) pollLoad(ctx context.Context, base, stage, sku string, tl *timeline.Builder, sampler *shards.Sampler, peak *report.StreamView) (stop func()) {
	if r.cfg.Progress == nil && r.cfg.Watch == nil && peak == nil {
		return func() {}
	}
	live := r.live
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if a, err := r.shop.Audit(ctx, base, stage, sku); err == nil {
					r.progress.oversold.Store(int64(a.Oversold))
					live.audited(a)
					peak.Most(a.Stream)
					tl.SampleOversold(time.Now(), a.Oversold)
				}
				if live != nil && n%4 == 1 { // once a second
					live.sharded(sampler.SoFar(ctx))
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// waitAllReady waits for every replica (or the target when their URLs are
// unknown), e.g. for one restarting after the previous crash step.
func (r *runner) waitAllReady(ctx context.Context) error {
	bases := r.cfg.ReplicaURLs
	if len(bases) == 0 {
		bases = []string{r.cfg.Target}
	}
	for _, b := range bases {
		if err := r.shop.WaitReady(ctx, b, shopapi.ReadyTimeout); err != nil {
			return err
		}
	}
	r.waitRouted(ctx)
	return nil
}

// routeTimeout bounds the wait for the proxy to route to every replica:
// nginx skips a replica that failed for its fail_timeout (1s in nginx/).
const routeTimeout = 5 * time.Second

// waitRouted waits until the target routes to every ready replica. One
// back from a crash is ready before the proxy stops skipping it, and a
// short stage started then runs on the others alone. A proxy that never
// spreads the load (sticky sessions) is not an error: the row's replica
// count shows it, and a warning says why.
func (r *runner) waitRouted(ctx context.Context) {
	if len(r.names) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, routeTimeout)
	defer cancel()
	for {
		seen := map[string]bool{}
		for range 2 * len(r.names) {
			if name, err := r.shop.ReplicaName(ctx, r.cfg.Target); err == nil {
				seen[name] = true
			}
		}
		missing := slices.DeleteFunc(slices.Clone(r.names), func(n string) bool { return seen[n] })
		if len(missing) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			r.log.Warn("the proxy does not route to every replica; the stage runs on the others", "target", r.cfg.Target, "missing", missing)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *runner) describeRedis(ctx context.Context) report.Component {
	if r.cfg.Redis.Kind != "" {
		return r.cfg.Redis
	}
	if r.cfg.Stores == nil {
		return report.Component{Kind: "unknown", Note: "no Redis address given"}
	}
	return r.cfg.Stores.Describe(ctx)
}

func (r *runner) describeProxy(ctx context.Context) report.Component {
	if r.cfg.Proxy.Kind != "" {
		return r.cfg.Proxy
	}
	server := r.shop.ServerHeader(ctx, r.cfg.Target)
	if server == "" {
		return report.Component{Kind: "unknown", Addr: r.cfg.Target}
	}
	kind, version, _ := strings.Cut(server, "/")
	return report.Component{Kind: kind, Version: version, Addr: r.cfg.Target}
}
