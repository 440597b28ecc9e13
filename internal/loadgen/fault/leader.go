package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// leaderFailover: the victim sale takes the stage's lock on a consensus
// system (etcd, ZooKeeper) and stops before its write; the leader of the
// ensemble is killed with SIGKILL while sales of another SKU go on, and the
// members left elect a new one. A second sale must then still find the
// lock taken — Raft and Zab commit the lock on a quorum before granting it,
// so the new leader has it, unlike a Sentinel-promoted replica — until the
// victim, continued, writes and releases it. The killed member is started
// again at the end.
func leaderFailover(ctx context.Context, st *Step) error {
	stage := st.run.Stage
	inj := st.env.Injector
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := st.resetWith(ctx, armed); err != nil {
		return err
	}
	loadSKU := st.env.SKU + "-load"
	if err := st.env.Shop.Reset(ctx, st.env.Target, stage, loadSKU, failoverLoadStock, st.run.Segments); err != nil {
		return fmt.Errorf("reset %s: %w", loadSKU, err)
	}
	first, second := st.env.Names[0], st.env.Names[1]
	answerA := st.victim(ctx, first)
	if _, err := st.waitStopped(ctx, answerA); err != nil {
		return err
	}
	st.note("the first sale, on %s, holds the lock and stopped before its write", first)
	// The pause fault must not stop anyone else: the victim claimed it.
	if err := st.setFaults(ctx, st.run.Faults, namesBut(st.env.Names, first)); err != nil {
		return err
	}
	loadDone := st.background(ctx, st.run.Fault.Observe, loadSKU, namesBut(st.env.Names, first)...)
	defer loadDone()
	leader, err := inj.KillLeader(ctx, stage)
	if err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.RestartMember(context.WithoutCancel(ctx), stage) })
	st.faultAt, st.rep.Victim = time.Now(), "leader "+leader
	st.mark(st.faultAt, "leader "+leader+" killed")
	elected, err := inj.WaitLeader(ctx, stage)
	if err != nil {
		return err
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "new leader "+elected)
	st.note("the members left elected %s %.0f ms after %s died", elected, report.MS(st.healAt.Sub(st.faultAt)), leader)
	answerB := st.victim(ctx, second)
	if st.waitHoldingWithin(ctx, second, answerB, secondSaleWait) == nil {
		st.note("a second sale, on %s, took the lock too: the failover lost it", second)
	} else {
		st.note("a second sale, on %s, found the lock still taken after the failover", second)
	}
	if _, err := st.continueVictim(first, answerA); err != nil {
		return err
	}
	st.note("the second sale answered %s", <-answerB)
	loadDone()
	if err := inj.RestartMember(ctx, stage); err != nil {
		return fmt.Errorf("restart the killed member: %w", err)
	}
	return st.conclude(ctx)
}
