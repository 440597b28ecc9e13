package fault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"github.com/lockstep/lockstep/internal/sleep"
)

// failoverFault kills what holds the stage's lock state and lets its
// replacement take over: the Sentinel group's master, one of redlock's
// masters, or the leader of the stage's etcd cluster or ZooKeeper
// ensemble (plan.FaultStep.Target).
type failoverFault struct{}

func (failoverFault) Run(ctx context.Context, st *Step) error {
	switch st.run.Fault.Target {
	case plan.FailoverMaster:
		return masterFailover(ctx, st)
	case plan.FailoverLeader:
		return leaderFailover(ctx, st)
	}
	return redlockMasterLoss(ctx, st)
}

// masterFailover: the Sentinel group's replicas are cut off from the master; the
// victim sale takes the lock on the master (with wait_replicas the master
// cannot confirm it, and the sale is refused) and stops before its write;
// the master is killed with SIGKILL, a replica that never saw the lock is
// promoted, a second sale takes the same lock there, and the victim is
// continued while it holds it.
func masterFailover(ctx context.Context, st *Step) error {
	inj := st.env.Injector
	if err := inj.PrepareFailover(ctx); err != nil {
		return err
	}
	if err := st.env.WaitAllReady(ctx); err != nil {
		return err
	}
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	lockKey := st.lockKey()
	loadSKU, err := st.env.Stores.LoadSKU(ctx, st.env.SKU, lockKey)
	if err != nil {
		return err
	}
	if err := st.env.Shop.Reset(ctx, st.env.Target, st.run.Stage, loadSKU, failoverLoadStock, st.run.Segments); err != nil {
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
	if err := st.applyFaults(ctx, armed); err != nil {
		return fmt.Errorf("arm the pause: %w", err)
	}
	first, second := st.env.Names[0], st.env.Names[1]
	answerA := st.victim(ctx, first)
	_, err = st.waitStopped(ctx, answerA)
	var aDone *shopapi.Answer
	switch {
	case errors.Is(err, errAnsweredFirst):
		a := <-answerA
		aDone = &a
		st.victimAnswered(a)
		st.note("the first sale, on %s, did not get the lock: %s", first, a)
		// Nobody claimed the pause: disarm it before the load, or a sale
		// of the load claims it where it survives the failover (on a
		// cluster, the faults may live on a master that does not die).
		if err := st.setFaults(ctx, st.run.Faults, st.env.Names); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		st.note("the first sale, on %s, holds the lock on the master and stopped before its write", first)
	}
	// Sales go on from here, through the kill and the promotion, so that
	// stuck and recovered are measured under load: to the shops the pause
	// did not stop, for another SKU of the stage (the victims' lock and
	// audit stay theirs).
	loadDone := st.background(ctx, failoverLoad(st.run.Fault), loadSKU, namesBut(st.env.Names, first)...)
	defer loadDone()
	master, err := inj.KillMaster(ctx, lockKey)
	if err != nil {
		return err
	}
	st.faultAt, st.rep.Victim = time.Now(), "master "+master
	st.mark(st.faultAt, "master killed")
	promoted, err := inj.WaitFailover(ctx, lockKey)
	if err != nil {
		return err
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "failover to "+promoted)
	st.note("a replica that never saw the lock, %s, was promoted %.0f ms after the master died", promoted, report.MS(st.healAt.Sub(st.faultAt)))
	// The shops still run with the pause armed until they re-read the
	// faults from the promoted master, which never had it: wait until
	// they do (one may still be dialling the dead master).
	if err := st.env.Shop.AwaitFaults(ctx, st.env.urlsOf(st.env.livingReplicas(aDone == nil, first)), st.run.Stage, st.run.Faults); err != nil {
		return err
	}
	answerB := st.saleOnceUp(ctx, second)
	holding := st.waitHolding(ctx, second, answerB) == nil
	if aDone == nil {
		if holding {
			st.note("a second sale, on %s, took the same lock on the new master while the first still holds it", second)
			if err := sleep.For(ctx, readBeforeContinue); err != nil {
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
// the step's observe, else long enough for a promotion (Sentinel's about
// 3 s here, a cluster's 4 s), the two sales after it, and the killed node
// back as a replica, without which a WAIT fails (a cluster's 2–6 s more).
func failoverLoad(fs *plan.FaultStep) plan.Duration {
	if fs.Observe > 0 {
		return fs.Observe
	}
	return plan.Duration(12 * time.Second)
}

// redlockMasterLoss: the victim sale takes the redlock lock on a majority
// of the independent masters and stops before its write; one master is
// killed with SIGKILL and started again empty, which is what a failover to
// a replica that never saw the lock amounts to; a second sale must still
// find no majority until the victim, continued, releases the lock.
func redlockMasterLoss(ctx context.Context, st *Step) error {
	inj := st.env.Injector
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := st.resetWith(ctx, armed); err != nil {
		return err
	}
	first, second := st.env.Names[0], st.env.Names[1]
	answerA := st.victim(ctx, first)
	if _, err := st.waitStopped(ctx, answerA); err != nil {
		return err
	}
	st.note("the first sale, on %s, holds the lock on the masters and stopped before its write", first)
	st.faultAt, st.rep.Victim = time.Now(), "redlock master 1"
	if err := inj.KillRedis(ctx, 0); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.StartRedis(context.WithoutCancel(ctx), 0, plan.PersistenceNone) })
	st.mark(st.faultAt, "master 1 killed")
	if err := inj.StartRedis(ctx, 0, plan.PersistenceNone); err != nil {
		return err
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "master 1 back, empty")
	st.note("redlock's first master was killed and started again without the lock")
	if err := st.setFaults(ctx, st.run.Faults, namesBut(st.env.Names, first)); err != nil {
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
