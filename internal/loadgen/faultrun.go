package loadgen

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"
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

// faultState is one fault step in progress.
type faultState struct {
	r   *runner
	run RunSpec
	row *StageRun
	tl  *timelineBuilder
	rep *FaultReport

	faultAt, healAt time.Time

	mu      sync.Mutex
	results []vegeta.Result // every answer of the step, sales offered and victims
	// elsewhere are the answers of sales of another SKU (failover's load):
	// they time the fault, and stay out of the row's figures and audit.
	elsewhere []vegeta.Result
	undos   []func()        // what puts the set-up back if the step stops half-way
}

// faultStep runs run's fault step and fills row; see the Fault* kinds.
func (r *runner) faultStep(ctx context.Context, run RunSpec, row *StageRun, tl *timelineBuilder) error {
	st := &faultState{r: r, run: run, row: row, tl: tl, rep: &FaultReport{Kind: run.Fault.Kind}}
	row.Fault = st.rep
	defer st.undo()
	var err error
	switch {
	case run.Fault.Kind == FaultCrash:
		err = st.crash(ctx)
	case run.Fault.Kind == FaultPause:
		err = st.pause(ctx)
	case run.Fault.Kind == FaultRedisRestart:
		err = st.redisRestart(ctx)
	case run.Fault.Kind == FaultFailover && run.Fault.Target == FailoverMaster:
		err = st.failover(ctx)
	case run.Fault.Kind == FaultFailover:
		err = st.redlockMasterLoss(ctx)
	case run.Fault.Kind == FaultPartition:
		err = st.partition(ctx)
	}
	st.fillRow()
	return err
}

// crash: the victim sale takes the lock on the first replica and works
// long; that replica is killed with SIGKILL while it holds the lock; sales
// are offered through the proxy to see when, if ever, they go through again.
func (st *faultState) crash(ctx context.Context) error {
	r, fs := st.r, st.run.Fault
	victim, answer, err := st.slowVictimHolding(ctx)
	if err != nil {
		return err
	}
	st.faultAt = time.Now()
	if err := r.cfg.Injector.KillReplica(ctx, victim); err != nil {
		return err
	}
	st.healAt = st.faultAt
	st.rep.Victim = victim
	st.mark(st.faultAt, "kill -9 "+victim)
	st.note("%s was killed with SIGKILL while holding the lock", victim)
	// A killed process holds nothing: its count must not make the next
	// holder look like a second one.
	if err := r.forgetHolder(ctx, st.run.Stage, r.cfg.Scenario.SKU, victim); err != nil {
		return err
	}
	if err := st.setFaults(ctx, st.run.Faults, namesBut(r.names, victim)); err != nil {
		return err
	}
	st.background(ctx, fs.Observe, st.r.cfg.Scenario.SKU)()
	st.victimAnswered(<-answer)
	if err := st.conclude(ctx); err != nil {
		return err
	}
	if !st.rep.Stuck {
		return nil
	}
	// Stuck: show the lock that never expires, and that only a reset
	// (which deletes it) lets sales through again.
	if r.rdb != nil {
		keys, err := r.lockKeys(ctx, st.run.Stage)
		if err != nil {
			return fmt.Errorf("inspect lock keys: %w", err)
		}
		st.rep.LockKeys = keys
	}
	if err := r.shop.reset(ctx, r.cfg.Target, st.run.Stage, r.cfg.Scenario.SKU, st.run.Stock, st.run.Segments); err != nil {
		return fmt.Errorf("reset after the crash: %w", err)
	}
	st.mark(time.Now(), "reset")
	a := r.shop.sale(ctx, r.cfg.Target, st.run.Stage, r.cfg.Scenario.SKU)
	sold := a.err == nil && classify(uint16(a.status)) == outcomeSale
	st.rep.SaleAfterReset = &sold
	st.tl.add(a.end, sold)
	return nil
}

// pause: a sale on the first replica stops its process right before its
// stock write (pause_before_write), holding what it read; sales go on
// through the proxy; after hold, once another holder is inside, it is
// continued and writes what it read before the pause.
func (st *faultState) pause(ctx context.Context) error {
	r, fs := st.r, st.run.Fault
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := st.resetWith(ctx, armed); err != nil {
		return err
	}
	victim := r.names[0]
	answer := st.victim(ctx, victim)
	if _, err := st.waitStopped(ctx, answer); err != nil {
		return err
	}
	st.faultAt, st.rep.Victim = time.Now(), victim
	st.mark(st.faultAt, "SIGSTOP "+victim)
	st.note("%s stopped itself right before its stock write, holding what it had read (%s)", victim, st.lockState(ctx))
	// The sales go to the other replicas, for the whole window: the stopped
	// one would only pile up requests that all run at once when continued.
	loadDone := st.background(ctx, fs.Observe, st.r.cfg.Scenario.SKU, namesBut(r.names, victim)...)
	defer loadDone()
	if err := sleepCtx(ctx, fs.Hold.D()); err != nil {
		return err
	}
	if st.waitOtherHolder(ctx, victim) {
		st.note("another holder was inside its critical section when %s was continued", victim)
	} else {
		st.note("no other holder was seen inside within %s of the end of the pause", secondHolderWait)
	}
	var err error
	if st.healAt, err = st.continueVictim(victim, answer); err != nil {
		return err
	}
	loadDone()
	return st.conclude(ctx)
}

// redisRestart: sales go on through the proxy; the stock's redis-server is
// killed with SIGKILL, stays down for hold, and starts again on its data
// directory with the step's persistence; the audit then says what survived.
func (st *faultState) redisRestart(ctx context.Context) error {
	r, fs := st.r, st.run.Fault
	inj := r.cfg.Injector
	if err := inj.SetPersistence(ctx, 0, fs.Persistence); err != nil {
		return err
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	loadDone := st.background(ctx, fs.Before+fs.Hold+fs.Observe, st.r.cfg.Scenario.SKU)
	defer loadDone()
	if err := sleepCtx(ctx, fs.Before.D()); err != nil {
		return err
	}
	// What the kill takes is told by a key written before it, not by the
	// audit's figures: a wiped SKU restarts at the shop's default stock,
	// which may be the run's own.
	if r.rdb == nil {
		return errors.New("a redis-restart step needs the stock's Redis address, to tell what the kill took")
	}
	probe := "lockstep:loadgen:probe:{" + rand.Text() + "}"
	if err := r.rdb.Set(ctx, probe, 1, time.Hour).Err(); err != nil {
		return fmt.Errorf("write the probe key: %w", err)
	}
	st.faultAt = time.Now()
	if err := inj.KillRedis(ctx, 0); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.StartRedis(context.WithoutCancel(ctx), 0, fs.Persistence) })
	st.rep.Victim = "redis-server (" + fs.Persistence + ")"
	st.mark(st.faultAt, "redis-server killed")
	if err := sleepCtx(ctx, fs.Hold.D()); err != nil {
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
	kept, err := r.rdb.Exists(ctx, probe).Result()
	if err != nil {
		return fmt.Errorf("read the probe key: %w", err)
	}
	r.rdb.Del(ctx, probe)
	st.rep.Outage = st.outage(kept == 1)
	st.note("%s", st.rep.Outage.Why)
	return nil
}

// failover: the Sentinel group's replicas are cut off from the master; the
// victim sale takes the lock on the master (with wait_replicas the master
// cannot confirm it, and the sale is refused) and stops before its write;
// the master is killed with SIGKILL, a replica that never saw the lock is
// promoted, a second sale takes the same lock there, and the victim is
// continued while it holds it.
func (st *faultState) failover(ctx context.Context) error {
	r := st.r
	inj := r.cfg.Injector
	if err := inj.PrepareFailover(ctx); err != nil {
		return err
	}
	if err := r.waitAllReady(ctx); err != nil {
		return err
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	loadSKU := r.cfg.Scenario.SKU + "-load"
	if err := r.shop.reset(ctx, r.cfg.Target, st.run.Stage, loadSKU, failoverLoadStock, st.run.Segments); err != nil {
		return fmt.Errorf("reset %s: %w", loadSKU, err)
	}
	if err := inj.HoldReplication(ctx); err != nil {
		return err
	}
	st.note("the replicas were cut off from the master: what it grants from now on is on the master alone")
	// The pause is armed on the master alone: the replica Sentinel promotes
	// never had it, so no sale offered through the failover can claim it
	// there and stop its shop.
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := r.applyFaults(ctx, r.cfg.Target, st.run.Stage, armed); err != nil {
		return fmt.Errorf("arm the pause: %w", err)
	}
	first, second := r.names[0], r.names[1]
	answerA := st.victim(ctx, first)
	_, err := st.waitStopped(ctx, answerA)
	var aDone *saleAnswer
	switch {
	case errors.Is(err, errAnsweredFirst):
		a := <-answerA
		aDone = &a
		st.victimAnswered(a)
		st.note("the first sale, on %s, did not get the lock: %s", first, a)
	case err != nil:
		return err
	default:
		st.note("the first sale, on %s, holds the lock on the master and stopped before its write", first)
	}
	// Sales go on from here, through the kill and the promotion, so that
	// stuck and recovered are measured under load: to the shops the pause
	// did not stop, for another SKU of the stage (the victims' lock and
	// audit stay theirs).
	loadDone := st.background(ctx, failoverLoad(st.run.Fault), loadSKU, namesBut(r.names, first)...)
	defer loadDone()
	master, err := inj.KillMaster(ctx)
	if err != nil {
		return err
	}
	st.faultAt, st.rep.Victim = time.Now(), "master "+master
	st.mark(st.faultAt, "master killed")
	promoted, err := inj.WaitFailover(ctx)
	if err != nil {
		return err
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "failover to "+promoted)
	st.note("the Sentinels promoted %s, which never saw the lock, %.0f ms after the master died", promoted, ms(st.healAt.Sub(st.faultAt)))
	// The shops still run with the pause armed until they re-read the
	// faults from the promoted master, which never had it: wait until
	// they do (one may still be dialling the dead master).
	if err := r.awaitFaults(ctx, r.urlsOf(r.livingReplicas(aDone == nil, first)), st.run.Stage, st.run.Faults); err != nil {
		return err
	}
	answerB := st.saleOnceUp(ctx, second)
	holding := st.waitHolding(ctx, second, answerB) == nil
	if aDone == nil {
		if holding {
			st.note("a second sale, on %s, took the same lock on the new master while the first still holds it", second)
			if err := sleepCtx(ctx, readBeforeContinue); err != nil {
				return err
			}
		}
		if _, err := st.continueVictim(first, answerA); err != nil {
			return err
		}
	}
	st.note("the second sale answered %s", <-answerB)
	loadDone()
	return st.conclude(ctx)
}

// failoverLoadStock is the stock of the SKU the failover's load buys: more
// than it can sell.
const failoverLoadStock = 1_000_000

// failoverLoad is how long sales are offered from a failover's kill on:
// the step's observe, else long enough for Sentinel's promotion (about 3 s
// here) and the two sales after it.
func failoverLoad(fs *FaultStep) Duration {
	if fs.Observe > 0 {
		return fs.Observe
	}
	return Duration(6 * time.Second)
}

// redlockMasterLoss: the victim sale takes the redlock lock on a majority
// of the independent masters and stops before its write; one master is
// killed with SIGKILL and started again empty, which is what a failover to
// a replica that never saw the lock amounts to; a second sale must still
// find no majority until the victim, continued, releases the lock.
func (st *faultState) redlockMasterLoss(ctx context.Context) error {
	r := st.r
	inj := r.cfg.Injector
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := st.resetWith(ctx, armed); err != nil {
		return err
	}
	first, second := r.names[0], r.names[1]
	answerA := st.victim(ctx, first)
	if _, err := st.waitStopped(ctx, answerA); err != nil {
		return err
	}
	st.note("the first sale, on %s, holds the lock on the masters and stopped before its write", first)
	st.faultAt, st.rep.Victim = time.Now(), "redlock master 1"
	if err := inj.KillRedis(ctx, 0); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.StartRedis(context.WithoutCancel(ctx), 0, PersistenceNone) })
	st.mark(st.faultAt, "master 1 killed")
	if err := inj.StartRedis(ctx, 0, PersistenceNone); err != nil {
		return err
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "master 1 back, empty")
	st.note("redlock's first master was killed and started again without the lock")
	if err := st.setFaults(ctx, st.run.Faults, namesBut(r.names, first)); err != nil {
		return err
	}
	answerB := st.victim(ctx, second)
	if st.waitHoldingWithin(ctx, second, answerB, secondSaleWait) == nil {
		st.note("a second sale, on %s, took the lock too", second)
	} else {
		st.note("a second sale, on %s, found no majority while the first held the lock", second)
	}
	if _, err := st.continueVictim(first, answerA); err != nil {
		return err
	}
	st.note("the second sale answered %s", <-answerB)
	return st.conclude(ctx)
}

// partition: the victim sale takes the lock on the first replica and works
// long; that replica is cut off from Redis for hold while sales go on
// through the proxy; the victim's answer says whether it gave up.
func (st *faultState) partition(ctx context.Context) error {
	r, fs := st.r, st.run.Fault
	inj := r.cfg.Injector
	victim, answer, err := st.slowVictimHolding(ctx)
	if err != nil {
		return err
	}
	if err := r.applyFaults(ctx, r.cfg.Target, st.run.Stage, st.run.Faults); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	st.faultAt, st.rep.Victim = time.Now(), victim
	if err := inj.CutRedis(victim); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.HealRedis(victim) })
	st.mark(st.faultAt, "partition: "+victim)
	st.note("%s was cut off from Redis while holding the lock", victim)
	left := st.watchLeave(ctx, victim)
	// The sales go to the other replicas: the one cut off would only tie
	// the load generator's workers up in requests that time out.
	loadDone := st.background(ctx, fs.Observe, st.r.cfg.Scenario.SKU, namesBut(r.names, victim)...)
	defer loadDone()
	if err := sleepCtx(ctx, fs.Hold.D()); err != nil {
		return err
	}
	st.healAt = time.Now()
	if err := inj.HealRedis(victim); err != nil {
		return err
	}
	st.mark(st.healAt, "healed")
	st.victimAnswered(<-answer)
	if at := left(); !at.IsZero() {
		after := ms(at.Sub(st.faultAt))
		st.rep.VictimLeftMS = &after
		st.mark(at, "holder gave up")
		st.note("the holder left its critical section %.0f ms after the partition began, and answered %.0f ms after it", after, *st.rep.VictimAnswerMS)
	}
	loadDone()
	return st.conclude(ctx)
}

// watchLeave watches, in the background, for the named replica to have
// no sale inside the critical section any more; the returned function
// waits for that moment (zero when it did not come within holdTimeout).
func (st *faultState) watchLeave(ctx context.Context, name string) func() time.Time {
	key := holdersKey(st.run.Stage, st.r.cfg.Scenario.SKU)
	var at time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		if st.poll(ctx, nil, func() bool {
			n, err := st.r.holders.HGet(ctx, key, name).Int()
			return err == nil && n == 0 || errors.Is(err, redis.Nil)
		}, name+" leaving the critical section") == nil {
			at = time.Now()
		}
	}()
	return func() time.Time { <-done; return at }
}

// lockState says who is inside the critical section and how long the
// stage's lock has left, for the notes.
func (st *faultState) lockState(ctx context.Context) string {
	inside, err := st.r.holders.HGetAll(ctx, holdersKey(st.run.Stage, st.r.cfg.Scenario.SKU)).Result()
	if err != nil {
		return "holders unknown: " + err.Error()
	}
	state := fmt.Sprintf("inside: %v", inside)
	if st.r.rdb != nil {
		if ttl, err := st.r.rdb.PTTL(ctx, "lockstep:"+st.run.Stage+":{"+st.r.cfg.Scenario.SKU+"}:lock").Result(); err == nil && ttl > 0 {
			state += fmt.Sprintf(", lock expires in %d ms", ttl.Milliseconds())
		}
	}
	return state
}

// resetWith resets the stage's stock and sets faults on every replica.
func (st *faultState) resetWith(ctx context.Context, f Faults) error {
	r := st.r
	if err := r.shop.reset(ctx, r.cfg.Target, st.run.Stage, r.cfg.Scenario.SKU, st.run.Stock, st.run.Segments); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := r.applyFaults(ctx, r.cfg.Target, st.run.Stage, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

// setFaults sets faults through, and waits for, the named replicas only:
// another may be dead or stopped.
func (st *faultState) setFaults(ctx context.Context, f Faults, names []string) error {
	urls := st.r.urlsOf(names)
	if err := st.r.shop.setFaults(ctx, urls[0], st.run.Stage, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if err := st.r.awaitFaults(ctx, urls, st.run.Stage, f); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

// victim sends one sale to the named replica; its answer is recorded and
// lands in the returned channel.
func (st *faultState) victim(ctx context.Context, name string) <-chan saleAnswer {
	url := st.r.urlsOf([]string{name})[0]
	out := make(chan saleAnswer, 1)
	go func() {
		a := st.r.shop.sale(ctx, url, st.run.Stage, st.r.cfg.Scenario.SKU)
		res := a.result()
		st.record(res)
		st.tl.add(a.end, classify(res.Code) == outcomeSale)
		out <- a
	}()
	return out
}

// slowVictimHolding resets the stage with the victim's long work, starts
// the victim sale on the first replica and waits until it holds the lock.
func (st *faultState) slowVictimHolding(ctx context.Context) (string, <-chan saleAnswer, error) {
	victim := st.r.names[0]
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
func (st *faultState) continueVictim(name string, answer <-chan saleAnswer) (time.Time, error) {
	at := time.Now()
	if err := st.r.cfg.Injector.ContinueReplica(name); err != nil {
		return at, err
	}
	st.mark(at, "SIGCONT "+name)
	st.victimAnswered(<-answer)
	return at, nil
}

// saleOnceUp sends sales to the named replica until one is not refused
// with 503 (the replica may not have seen the new master yet), for at most
// holdTimeout; every answer is recorded, the last lands in the channel.
func (st *faultState) saleOnceUp(ctx context.Context, name string) <-chan saleAnswer {
	url := st.r.urlsOf([]string{name})[0]
	out := make(chan saleAnswer, 1)
	go func() {
		deadline := time.Now().Add(holdTimeout)
		for {
			a := st.r.shop.sale(ctx, url, st.run.Stage, st.r.cfg.Scenario.SKU)
			res := a.result()
			st.record(res)
			st.tl.add(a.end, classify(res.Code) == outcomeSale)
			if a.status != http.StatusServiceUnavailable || time.Now().After(deadline) || sleepCtx(ctx, retryUnavailable) != nil {
				out <- a
				return
			}
		}
	}()
	return out
}

func (st *faultState) victimAnswered(a saleAnswer) {
	st.rep.VictimAnswer, st.rep.VictimStatus = a.String(), a.status
	if !st.faultAt.IsZero() {
		after := ms(a.end.Sub(st.faultAt))
		st.rep.VictimAnswerMS = &after
	}
}

// background offers sales of sku for d at the step's rate, through the
// proxy or, when replicas are named, to those replicas in turn; the
// returned function waits for the last answer (calling it again is fine).
func (st *faultState) background(ctx context.Context, d Duration, sku string, replicas ...string) func() {
	fs := st.run.Fault
	urls := []string{st.r.cfg.Target}
	if len(replicas) > 0 {
		urls = st.r.urlsOf(replicas)
	}
	for i, u := range urls {
		urls[i] = deductURL(u, st.run.Stage, sku)
	}
	record := st.record
	if sku != st.r.cfg.Scenario.SKU {
		record = st.recordElsewhere
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		attack(ctx, attackSpec{
			name: st.run.Stage + "-" + fs.Kind, url: urls[0], also: urls[1:],
			rate: fs.Rate, workers: fs.Workers, duration: d.D(),
			timeout: st.run.Timeout.D(), onResult: record,
		}, st.tl, st.r.progress.answer)
	}()
	return func() { <-done }
}

func (st *faultState) record(res *vegeta.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.results = append(st.results, *res)
}

func (st *faultState) recordElsewhere(res *vegeta.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.elsewhere = append(st.elsewhere, *res)
}

func (st *faultState) mark(at time.Time, label string) { st.tl.mark(at, label) }

func (st *faultState) note(format string, args ...any) {
	st.rep.Notes = append(st.rep.Notes, fmt.Sprintf(format, args...))
}

func (st *faultState) undo() {
	for _, u := range slices.Backward(st.undos) {
		u()
	}
}

// errAnsweredFirst: the sale a step waited on answered before it held its
// lock (or stopped).
var errAnsweredFirst = errors.New("the sale answered before it held the lock")

// waitHolding waits until the named replica has a sale inside the critical
// section (track_holders), or its sale answered.
func (st *faultState) waitHolding(ctx context.Context, name string, answered <-chan saleAnswer) error {
	return st.waitHoldingWithin(ctx, name, answered, holdTimeout)
}

func (st *faultState) waitHoldingWithin(ctx context.Context, name string, answered <-chan saleAnswer, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	key := holdersKey(st.run.Stage, st.r.cfg.Scenario.SKU)
	return st.poll(ctx, answered, func() bool {
		n, _ := st.r.holders.HGet(ctx, key, name).Int()
		return n > 0
	}, name+" holding the lock")
}

// waitStopped waits until a replica is stopped and returns its name.
func (st *faultState) waitStopped(ctx context.Context, answered <-chan saleAnswer) (string, error) {
	var name string
	err := st.poll(ctx, answered, func() bool {
		if stopped := st.r.cfg.Injector.StoppedReplicas(); len(stopped) > 0 {
			name = stopped[0]
			return true
		}
		return false
	}, "a replica stopped before its write")
	if err == nil {
		st.undos = append(st.undos, func() { _ = st.r.cfg.Injector.ContinueReplica(name) })
	}
	return name, err
}

// waitOtherHolder waits a little for a holder other than except to be
// inside its critical section.
func (st *faultState) waitOtherHolder(ctx context.Context, except string) bool {
	key := holdersKey(st.run.Stage, st.r.cfg.Scenario.SKU)
	ctx, cancel := context.WithTimeout(ctx, secondHolderWait)
	defer cancel()
	return st.poll(ctx, nil, func() bool {
		counts, _ := st.r.holders.HGetAll(ctx, key).Result()
		for name, n := range counts {
			if name != except && n != "0" {
				return true
			}
		}
		return false
	}, "another holder") == nil
}

// poll checks cond until it holds, answered delivers (errAnsweredFirst,
// without taking the answer), or holdTimeout passes.
func (st *faultState) poll(ctx context.Context, answered <-chan saleAnswer, cond func() bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if answered != nil && len(answered) > 0 {
			return errAnsweredFirst
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// conclude measures the step from its answers and reads the audit.
func (st *faultState) conclude(ctx context.Context) error {
	st.measure()
	audit, err := st.r.shop.audit(ctx, st.r.cfg.Target, st.run.Stage, st.r.cfg.Scenario.SKU)
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
func (st *faultState) measure() {
	rep, tl := st.rep, st.tl
	rep.AtMS, rep.HealedAtMS = tl.since(st.faultAt), tl.since(st.healAt)
	st.mu.Lock()
	defer st.mu.Unlock()
	var last, lastSaleBefore time.Time
	var firstAfterFault, firstAfterHeal time.Time
	for _, res := range slices.Concat(st.results, st.elsewhere) {
		end := res.End()
		if end.After(last) {
			last = end
		}
		if classify(res.Code) == outcomeSale && !end.After(st.faultAt) && end.After(lastSaleBefore) {
			lastSaleBefore = end
		}
		if res.Timestamp.Before(st.faultAt) {
			continue
		}
		rep.Requests++
		switch classify(res.Code) {
		case outcomeSale:
			rep.Sales++
			if firstAfterFault.IsZero() || end.Before(firstAfterFault) {
				firstAfterFault = end
			}
			if !res.Timestamp.Before(st.healAt) && (firstAfterHeal.IsZero() || end.Before(firstAfterHeal)) {
				firstAfterHeal = end
			}
		case outcomeBusy:
			rep.Busy++
		case outcomeError:
			rep.Errors++
		}
	}
	stuckFrom := st.faultAt
	if !lastSaleBefore.IsZero() {
		stuckFrom = lastSaleBefore
	}
	rep.WindowMS = ms(last.Sub(st.faultAt))
	rep.Stuck = firstAfterFault.IsZero()
	rep.StuckMS = ms(last.Sub(stuckFrom))
	if !rep.Stuck {
		rep.StuckMS = ms(firstAfterFault.Sub(stuckFrom))
		tl.mark(firstAfterFault, "first sale")
	}
	if !firstAfterHeal.IsZero() {
		recovery := ms(firstAfterHeal.Sub(st.healAt))
		rep.RecoveryMS = &recovery
	}
}

// fillRow puts the step's answers in the row's columns.
func (st *faultState) fillRow() {
	st.mu.Lock()
	results := slices.Clone(st.results)
	st.mu.Unlock()
	t := &tally{replicas: map[string]struct{}{}, errorSamples: map[string]int{}}
	for i := range results {
		if t.started.IsZero() || results[i].Timestamp.Before(t.started) {
			t.started = results[i].Timestamp
		}
		t.add(&results[i])
	}
	t.sort()
	st.row.fillFromTally(t)
	stuck := st.rep.Stuck
	st.row.Stuck, st.row.RecoveryMS = &stuck, st.rep.RecoveryMS
}

// outage says what a redis-restart step lost, and why.
func (st *faultState) outage(dataKept bool) *OutageReport {
	fs, a := st.run.Fault, st.row.Audit
	o := &OutageReport{Persistence: fs.Persistence, DownMS: ms(st.healAt.Sub(st.faultAt)), AuditSold: a.Sold, AuditInitial: a.Initial}
	st.mu.Lock()
	for _, res := range st.results {
		if classify(res.Code) == outcomeSale {
			o.SalesAcked++
		}
		if !res.Timestamp.Before(st.faultAt) && res.Timestamp.Before(st.healAt) {
			o.Answers++
			if classify(res.Code) != outcomeSale {
				o.Failures++
				o.MaxFailMS = max(o.MaxFailMS, ms(res.Latency))
			}
		}
		if classify(res.Code) == outcomeSale && res.End().Before(st.faultAt) {
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
			"at %.0f/s: writes are fsynced once a second, so the last second can be lost", fs.Persistence, o.LostSales, o.LostMS, o.SalesPerSecBefore)
	default:
		o.Why = fmt.Sprintf("the append-only file (%s) held every acknowledged sale: Redis writes it before it "+
			"answers, and a killed process leaves what it wrote to the kernel; everysec's one-second window is "+
			"lost only when the machine itself goes down", fs.Persistence)
	}
	if extra > 0 {
		o.Why += fmt.Sprintf("; %d sale(s) were written but their answers were lost with the connection (the shop said 503)", extra)
	}
	return o
}

// urlsOf maps replica names to their URLs.
func (r *runner) urlsOf(names []string) []string {
	var urls []string
	for _, n := range names {
		if i := slices.Index(r.names, n); i >= 0 {
			urls = append(urls, r.cfg.ReplicaURLs[i])
		}
	}
	return urls
}

// livingReplicas names every replica, or all but one that is stopped.
func (r *runner) livingReplicas(oneStopped bool, stopped string) []string {
	if oneStopped {
		return namesBut(r.names, stopped)
	}
	return r.names
}

func holdersKey(stage, sku string) string { return "lockstep:" + stage + ":{" + sku + "}:holders" }

// forgetHolder drops a killed replica's count among the SKU's holders (see
// the shop's track_holders).
func (r *runner) forgetHolder(ctx context.Context, stage, sku, replica string) error {
	if err := r.holders.HDel(ctx, holdersKey(stage, sku), replica).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("forget %s's holders: %w", replica, err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// faultSummary says in a few words what the fault did to the stage.
func (rep *FaultReport) summary() string {
	var parts []string
	if rep.Stuck {
		parts = append(parts, fmt.Sprintf("stuck %s", fmtMS(rep.StuckMS)+"+"))
	} else {
		parts = append(parts, "stuck "+fmtMS(rep.StuckMS))
	}
	if rep.RecoveryMS != nil {
		parts = append(parts, "recovered "+fmtMS(*rep.RecoveryMS))
	}
	return strings.Join(parts, ", ")
}

func fmtMS(v float64) string { return fmt.Sprintf("%.0f ms", v) }
