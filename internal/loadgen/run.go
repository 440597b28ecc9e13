// Package loadgen drives the shop's stages with vegeta and reports, for
// each, how many units were oversold and how many sales per second it held.
//
// It is split by responsibility, like vegeta's lib and k6's packages:
//   - plan (internal/loadgen/plan) is the scenario model and its own
//     validation, no I/O; ParseScenario here adds the checks plan cannot
//     know (the expectations' grammar; which stages are async, from the
//     plan.Shop its caller gives);
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
//   - the observers in packages of their own: timeline (its record
//     report.Timeline), shards (report.ShardLoad), payers
//     (report.PaymentReport), saletrace (report.SaleTrace), progress (the
//     line), and auditpoll, which reads the audit while the load runs
//     and hands each reading to its observers;
//   - this package walks the scenario (run.go: reset → faults → attack →
//     audit → drain → payment or crash step), starts the observers, and
//     feeds the live page (watch.go) from the timeline, the tracer and
//     the audit poller.
//
// loadgen speaks HTTP to the shops. It does not import the stores'
// packages (inventory, orders, asyncorders, segments) for anything but the
// result types the shop's HTTP API returns, nor a Redis client: what it
// reads in the stores' servers it asks Config.Stores for
// (internal/storeview), what it does to the processes Config.Injector,
// which stages are async Config.Shop.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockstep/lockstep/internal/loadgen/progress"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/expect"
	"github.com/lockstep/lockstep/internal/loadgen/fault"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
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
	Orders string
	// Shop is what the shop's code decides (which stages are async), the
	// one the scenario was parsed against (shoprules.Shop). Its zero
	// value has no async stage: no stream is followed.
	Shop         plan.Shop
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
	// FrontDoors, optional, puts each run's front door before the stages
	// (the workshop's); without it runs with a front_door are skipped.
	FrontDoors FrontDoors
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
	progress *progress.Line
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
		progress: progress.New(cfg.Progress, cfg.Interactive),
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
		r.progress.Note("%s", row.SummaryLine())
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
