package loadgen

import (
	"context"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/auditpoll"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shards"
	"github.com/lockstep/lockstep/internal/loadgen/timeline"
	"github.com/lockstep/lockstep/inventory"
)

// Watcher follows a run as it happens: the workshop's live page. Run calls
// it from its own goroutine, in the scenario's order.
type Watcher interface {
	// StageStarting is called before each stage run that is going to run
	// (not for skipped ones), before its reset. It may block (the
	// workshop's step mode waits there for a click); its error ends the
	// run. live has the stage run's figures while it runs.
	StageStarting(ctx context.Context, s StageStart, live *LiveStage) error
	// StageDone is called with every row once it is final, skipped ones
	// included.
	StageDone(row report.StageRun)
}

// StageStart is what a Watcher learns of a stage run before it starts.
type StageStart struct {
	Index, Runs int
	Label       string
	Stage, Via  string
	// Fault is the fault step's kind; "" for a plain load.
	Fault                             string
	Title, Article, Mechanism, Defect string
	// Planned is how long the load (or the fault step's window) runs.
	Planned time.Duration
}

// LiveStage is a stage run's figures so far; safe for concurrent use.
type LiveStage struct {
	mu       sync.Mutex
	phase    string
	tl       *timeline.Builder
	maxHeld  *int64
	oversold int
	stock    *int
	trace    *report.SaleTrace
	shards   []report.ShardLoad
	orders   *inventory.OrderCounts
	stream   *report.StreamView
}

// LiveSnapshot is a copy of a LiveStage's figures at one moment.
type LiveSnapshot struct {
	// Phase says what the run does now: "reset", "load", "after the
	// crash", the fault step's kind...
	Phase    string
	Timeline report.Timeline
	// The attacks' answers by outcome so far.
	Requests, Sales, SoldOut, Busy, AlreadyBought, RateLimited, Errors int
	// Oversold is the latest audit's figure; MaxHolders its most sales
	// seen inside the critical section at once (the track_holders fault).
	Oversold   int
	MaxHolders *int64
	// Stock is the stock left at the latest audit; nil before the first.
	Stock *int
	// Trace is the best sale traced so far (Config.TraceSales).
	Trace *report.SaleTrace
	// Shards is what each master of a Redis Cluster did in the load phase
	// so far, busiest first; nil off a cluster.
	Shards []report.ShardLoad
	// Orders are an order stage's orders at the latest audit; nil for
	// other stages.
	Orders *inventory.OrderCounts
	// Stream is an async stage's order stream at the latest audit; nil for
	// other stages.
	Stream *report.StreamView
}

// Snapshot copies the figures so far.
func (l *LiveStage) Snapshot() LiveSnapshot {
	l.mu.Lock()
	s := LiveSnapshot{Phase: l.phase, Oversold: l.oversold, MaxHolders: l.maxHeld, Trace: l.trace, Stock: l.stock, Shards: l.shards, Orders: l.orders, Stream: l.stream}
	tl := l.tl
	l.mu.Unlock()
	if tl == nil {
		return s
	}
	var byOutcome [attack.NumOutcomes]int
	s.Timeline, byOutcome = tl.Snapshot()
	s.Sales, s.SoldOut, s.Busy, s.AlreadyBought, s.RateLimited, s.Errors = byOutcome[attack.Sale], byOutcome[attack.SoldOut], byOutcome[attack.Busy], byOutcome[attack.AlreadyBought], byOutcome[attack.RateLimited], byOutcome[attack.Error]
	s.Requests = s.Sales + s.SoldOut + s.Busy + s.AlreadyBought + s.RateLimited + s.Errors
	return s
}

// The runner's side; a nil *LiveStage (no Watcher) ignores them.

func (l *LiveStage) setPhase(phase string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = phase
}

func (l *LiveStage) follow(tl *timeline.Builder) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tl = tl
}

// feed is the live page's observer of the audit poller: each audit read,
// and each master's load (sampler's so far) every fourth poll, once a
// second.
func (l *LiveStage) feed(ctx context.Context, sampler *shards.Sampler) auditpoll.Observer {
	return auditpoll.Func(func(n int, _ time.Time, a *report.Audit) {
		if a != nil {
			l.audited(*a)
		}
		if n%4 == 1 {
			l.sharded(sampler.SoFar(ctx))
		}
	})
}

func (l *LiveStage) audited(a report.Audit) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stock := a.Stock
	l.oversold, l.maxHeld, l.stock, l.orders, l.stream = a.Oversold, a.MaxHolders, &stock, a.Orders, report.StreamViewOf(a.Stream)
}

func (l *LiveStage) sharded(shards []report.ShardLoad) {
	if l == nil || shards == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shards = shards
}

func (l *LiveStage) traced(t *report.SaleTrace) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trace = t
}

// stageStart describes a stage run about to start.
func stageStart(runs, index int, run plan.RunSpec, row *report.StageRun) StageStart {
	s := StageStart{
		Index: index, Runs: runs, Label: row.Name(), Stage: run.Stage, Via: run.Via,
		Title: row.Title, Article: row.Article, Mechanism: row.Mechanism, Defect: row.Defect,
		Planned: run.Duration.D(),
	}
	if run.Fault != nil {
		s.Fault, s.Planned = run.Fault.Kind, run.Fault.Window()
	}
	return s
}
