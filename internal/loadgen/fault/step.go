package fault

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/loadgen/timeline"
	"github.com/lockstep/lockstep/internal/sleep"
)

// Bounds of the waits inside a fault step.
const (
	// holdTimeout: for a victim sale to hold its lock, or a replica to stop.
	holdTimeout = 10 * time.Second
	// secondHolderWait: after the pause, for another holder to be inside
	// before the stopped one is continued.
	secondHolderWait = 2 * time.Second
	// readBeforeContinue lets a second holder that just took the lock read
	// the stock before the stopped holder is continued.
	readBeforeContinue = 50 * time.Millisecond
	// secondSaleWait is how long a second sale is given to take a lock
	// that a stopped holder should still have (redlock).
	secondSaleWait = 500 * time.Millisecond
	// pollEvery is how often the step looks at Redis or the processes.
	pollEvery = 2 * time.Millisecond
	// retryUnavailable spaces the sales that wait for a replica to see the
	// new master.
	retryUnavailable = 100 * time.Millisecond
)

// Step is one fault step in progress.
type Step struct {
	env *Env
	run plan.RunSpec
	row *report.StageRun
	tl  *timeline.Builder
	rep *report.FaultReport

	faultAt, healAt time.Time

	mu      sync.Mutex
	results []vegeta.Result // every answer of the step, sales offered and victims
	// elsewhere are the answers of sales of another SKU (failover's load):
	// they time the fault, and stay out of the row's figures and audit.
	elsewhere []vegeta.Result
	undos     []func() // what puts the set-up back if the step stops half-way
}

// Run runs run's fault step with env, fills row's fault report and the
// columns the step decides (stuck, recovery), and returns the tally of
// the step's answers, from which the caller fills the answers' columns.
func Run(ctx context.Context, env *Env, run plan.RunSpec, row *report.StageRun, tl *timeline.Builder) (*attack.Tally, error) {
	st := &Step{env: env, run: run, row: row, tl: tl, rep: &report.FaultReport{Kind: run.Fault.Kind}}
	row.Fault = st.rep
	defer st.undo()
	kind := kindOf(run.Fault)
	if kind == nil {
		return nil, fmt.Errorf("fault kind %q: no step runs it", run.Fault.Kind)
	}
	err := kind.Run(ctx, st)
	return st.fillRow(), err
}

// lockState says who is inside the critical section and how long the
// stage's lock has left, for the notes.
func (st *Step) lockState(ctx context.Context) string {
	inside, err := st.holders(ctx)
	if err != nil {
		return "holders unknown: " + err.Error()
	}
	state := fmt.Sprintf("inside: %v", inside)
	if ttl, err := st.env.Stores.TTL(ctx, st.lockKey()); err == nil && ttl > 0 {
		state += fmt.Sprintf(", lock expires in %d ms", ttl.Milliseconds())
	}
	return state
}

// resetWith resets the stage's stock and sets faults on every replica.
func (st *Step) resetWith(ctx context.Context, f plan.Faults) error {
	if err := st.env.Shop.Reset(ctx, st.env.Target, st.run.Stage, st.env.SKU, st.run.Stock, st.run.Segments); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := st.applyFaults(ctx, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

// setFaults sets faults through, and waits for, the named replicas only:
// another may be dead or stopped.
func (st *Step) setFaults(ctx context.Context, f plan.Faults, names []string) error {
	urls := st.env.urlsOf(names)
	if err := st.env.Shop.SetFaults(ctx, urls[0], st.run.Stage, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if err := st.env.Shop.AwaitFaults(ctx, urls, st.run.Stage, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

// victim sends one sale to the named replica; its answer is recorded and
// lands in the returned channel.
func (st *Step) victim(ctx context.Context, name string) <-chan shopapi.Answer {
	url := st.env.urlsOf([]string{name})[0]
	out := make(chan shopapi.Answer, 1)
	go func() {
		a := st.env.Shop.Sale(ctx, url, st.run.Stage, st.env.SKU)
		res := a.Result()
		st.record(res)
		st.tl.Add(a.End, attack.Classify(res.Code) == attack.Sale)
		out <- a
	}()
	return out
}

// slowVictimHolding resets the stage with the victim's long work, starts
// the victim sale on the first replica and waits until it holds the lock.
func (st *Step) slowVictimHolding(ctx context.Context) (string, <-chan shopapi.Answer, error) {
	victim := st.env.Names[0]
	slow := st.run.Faults
	slow.Work, slow.WorkMax = st.run.Fault.VictimWork, 0
	if err := st.resetWith(ctx, slow); err != nil {
		return "", nil, err
	}
	answer := st.victim(ctx, victim)
	return victim, answer, st.waitHolding(ctx, victim, answer)
}

// continueVictim sends SIGCONT to the stopped replica name and waits for
// its sale's answer; it returns when the signal was sent.
func (st *Step) continueVictim(name string, answer <-chan shopapi.Answer) (time.Time, error) {
	at := time.Now()
	if err := st.env.Injector.ContinueReplica(name); err != nil {
		return at, err
	}
	st.mark(at, "SIGCONT "+name)
	st.victimAnswered(<-answer)
	return at, nil
}

// saleOnceUp sends sales to the named replica until one is not refused
// with 503 (the replica may not have seen the new master yet), for at most
// holdTimeout; every answer is recorded, the last lands in the channel.
func (st *Step) saleOnceUp(ctx context.Context, name string) <-chan shopapi.Answer {
	url := st.env.urlsOf([]string{name})[0]
	out := make(chan shopapi.Answer, 1)
	go func() {
		deadline := time.Now().Add(holdTimeout)
		for {
			a := st.env.Shop.Sale(ctx, url, st.run.Stage, st.env.SKU)
			res := a.Result()
			st.record(res)
			st.tl.Add(a.End, attack.Classify(res.Code) == attack.Sale)
			if a.Status != http.StatusServiceUnavailable || time.Now().After(deadline) || sleep.For(ctx, retryUnavailable) != nil {
				out <- a
				return
			}
		}
	}()
	return out
}

func (st *Step) victimAnswered(a shopapi.Answer) {
	st.rep.VictimAnswer, st.rep.VictimStatus = a.String(), a.Status
	if !st.faultAt.IsZero() {
		after := report.MS(a.End.Sub(st.faultAt))
		st.rep.VictimAnswerMS = &after
	}
}

// background offers sales of sku for d at the step's rate, through the
// proxy or, when replicas are named, to those replicas in turn; the
// returned function waits for the last answer (calling it again is fine).
func (st *Step) background(ctx context.Context, d plan.Duration, sku string, replicas ...string) func() {
	fs := st.run.Fault
	urls := []string{st.env.Target}
	if len(replicas) > 0 {
		urls = st.env.urlsOf(replicas)
	}
	for i, u := range urls {
		urls[i] = shopapi.DeductURL(u, st.run.Stage, sku)
	}
	record := st.record
	if sku != st.env.SKU {
		record = st.recordElsewhere
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		attack.Run(ctx, attack.Spec{
			Name: st.run.Stage + "-" + fs.Kind, URL: urls[0], Also: urls[1:],
			Rate: fs.Rate, Workers: fs.Workers, Duration: d.D(),
			Timeout: st.run.Timeout.D(), Buyers: st.run.Buyers,
		}, attack.ObserverFunc(func(res attack.Result) { record(res.Result) }), st.tl, st.env.Progress)
	}()
	return func() { <-done }
}

func (st *Step) record(res *vegeta.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.results = append(st.results, *res)
}

func (st *Step) recordElsewhere(res *vegeta.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.elsewhere = append(st.elsewhere, *res)
}

func (st *Step) mark(at time.Time, label string) { st.tl.Mark(at, label) }

func (st *Step) note(format string, args ...any) {
	st.rep.Notes = append(st.rep.Notes, fmt.Sprintf(format, args...))
}

func (st *Step) undo() {
	for _, u := range slices.Backward(st.undos) {
		u()
	}
}

// conclude measures the step from its answers and reads the audit.
func (st *Step) conclude(ctx context.Context) error {
	st.measure()
	audit, err := st.env.Shop.AuditPatiently(ctx, st.env.Target, st.run.Stage, st.env.SKU)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	row := st.row
	row.Audit, row.Oversold, row.Consistent, row.ForeignUnlocks = audit, audit.Oversold, audit.Consistent, audit.ForeignUnlocks
	row.MaxHolders = audit.MaxHolders
	return nil
}

// measure times the fault's effect on the sales: how long none went through
// — from the last sale before the fault to the first one after it — and how
// soon one did after the fault healed.
func (st *Step) measure() {
	rep, tl := st.rep, st.tl
	rep.AtMS, rep.HealedAtMS = tl.Since(st.faultAt), tl.Since(st.healAt)
	st.mu.Lock()
	defer st.mu.Unlock()
	var last, lastSaleBefore time.Time
	var firstAfterFault, firstAfterHeal time.Time
	for _, res := range slices.Concat(st.results, st.elsewhere) {
		end := res.End()
		if end.After(last) {
			last = end
		}
		if attack.Classify(res.Code) == attack.Sale && !end.After(st.faultAt) && end.After(lastSaleBefore) {
			lastSaleBefore = end
		}
		if res.Timestamp.Before(st.faultAt) {
			continue
		}
		rep.Requests++
		switch attack.Classify(res.Code) {
		case attack.Sale:
			rep.Sales++
			if firstAfterFault.IsZero() || end.Before(firstAfterFault) {
				firstAfterFault = end
			}
			if !res.Timestamp.Before(st.healAt) && (firstAfterHeal.IsZero() || end.Before(firstAfterHeal)) {
				firstAfterHeal = end
			}
		case attack.Busy:
			rep.Busy++
		case attack.Error:
			rep.Errors++
		}
	}
	stuckFrom := st.faultAt
	if !lastSaleBefore.IsZero() {
		stuckFrom = lastSaleBefore
	}
	rep.WindowMS = report.MS(last.Sub(st.faultAt))
	rep.Stuck = firstAfterFault.IsZero()
	rep.StuckMS = report.MS(last.Sub(stuckFrom))
	if !rep.Stuck {
		rep.StuckMS = report.MS(firstAfterFault.Sub(stuckFrom))
		tl.Mark(firstAfterFault, "first sale")
	}
	if !firstAfterHeal.IsZero() {
		recovery := report.MS(firstAfterHeal.Sub(st.healAt))
		rep.RecoveryMS = &recovery
	}
}

// fillRow puts the step's stuck and recovery in the row's columns and
// returns the tally of its answers.
func (st *Step) fillRow() *attack.Tally {
	st.mu.Lock()
	results := slices.Clone(st.results)
	st.mu.Unlock()
	t := attack.NewTally(time.Time{}, 0)
	for i := range results {
		if t.Started.IsZero() || results[i].Timestamp.Before(t.Started) {
			t.Started = results[i].Timestamp
		}
		t.Add(&results[i])
	}
	t.Done()
	stuck := st.rep.Stuck
	st.row.Stuck, st.row.RecoveryMS = &stuck, st.rep.RecoveryMS
	return t
}

// lockKey is the key of the lock the victim sale takes (on segmented, its
// first segment's: the one a stock of a single unit fills, as the
// scenarios give it, so that the victim and the sales after it meet on
// one lock).
func (st *Step) lockKey() string {
	return st.env.Stores.LockKey(st.run.Stage, st.env.SKU, st.run.Segments)
}

// holders counts the sales inside the victim lock's critical section, by
// replica.
func (st *Step) holders(ctx context.Context) (map[string]int64, error) {
	return st.env.Stores.Holders(ctx, st.run.Stage, st.env.SKU, st.run.Segments)
}

// forgetHolder drops a killed replica's count among the victim lock's
// holders (see the shop's track_holders).
func (st *Step) forgetHolder(ctx context.Context, replica string) error {
	if err := st.env.Stores.ForgetHolder(ctx, st.run.Stage, st.env.SKU, st.run.Segments, replica); err != nil {
		return fmt.Errorf("forget %s's holders: %w", replica, err)
	}
	return nil
}

// applyFaults sets the stage's faults through the target and waits until
// every replica applies them.
func (st *Step) applyFaults(ctx context.Context, f plan.Faults) error {
	env := st.env
	if err := env.Shop.SetFaults(ctx, env.Target, st.run.Stage, f); err != nil {
		return err
	}
	return env.Shop.AwaitFaults(ctx, env.URLs, st.run.Stage, f)
}
