package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// partitionFault: the victim sale takes the lock on the first replica and works
// long; that replica is cut off from Redis for hold while sales go on
// through the proxy; the victim's answer says whether it gave up.
type partitionFault struct{}

func (partitionFault) Run(ctx context.Context, st *Step) error {
	fs := st.run.Fault
	inj := st.env.Injector
	victim, answer, err := st.slowVictimHolding(ctx)
	if err != nil {
		return err
	}
	if err := st.applyFaults(ctx, st.run.Faults); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	st.faultAt, st.rep.Victim = time.Now(), victim
	if err := inj.CutRedis(victim); err != nil {
		return err
	}
	st.undos = append(st.undos, func() { _ = inj.HealRedis(victim) })
	st.mark(st.faultAt, "partition: "+victim)
	st.note("%s was cut off from Redis while holding the lock", victim)
	left := watchLeave(ctx, st, victim)
	// The sales go to the other replicas: the one cut off would only tie
	// the load generator's workers up in requests that time out.
	loadDone := st.background(ctx, fs.Observe, st.env.SKU, namesBut(st.env.Names, victim)...)
	defer loadDone()
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	st.healAt = time.Now()
	if err := inj.HealRedis(victim); err != nil {
		return err
	}
	st.mark(st.healAt, "healed")
	st.victimAnswered(<-answer)
	if at := left(); !at.IsZero() {
		after := report.MS(at.Sub(st.faultAt))
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
func watchLeave(ctx context.Context, st *Step, name string) func() time.Time {
	var at time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		if st.poll(ctx, nil, func() bool {
			counts, err := st.holders(ctx)
			return err == nil && counts[name] == 0
		}, name+" leaving the critical section") == nil {
			at = time.Now()
		}
	}()
	return func() time.Time { <-done; return at }
}
