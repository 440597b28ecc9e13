package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
)

// crashFault: the victim sale takes the lock on the first replica and works
// long; that replica is killed with SIGKILL while it holds the lock; sales
// are offered through the proxy to see when, if ever, they go through again.
type crashFault struct{}

func (crashFault) Run(ctx context.Context, st *Step) error {
	fs := st.run.Fault
	victim, answer, err := st.slowVictimHolding(ctx)
	if err != nil {
		return err
	}
	st.faultAt = time.Now()
	if err := st.env.Injector.KillReplica(ctx, victim); err != nil {
		return err
	}
	st.healAt = st.faultAt
	st.rep.Victim = victim
	st.mark(st.faultAt, "kill -9 "+victim)
	st.note("%s was killed with SIGKILL while holding the lock", victim)
	// A killed process holds nothing: its count must not make the next
	// holder look like a second one.
	if err := st.forgetHolder(ctx, victim); err != nil {
		return err
	}
	if err := st.setFaults(ctx, st.run.Faults, namesBut(st.env.Names, victim)); err != nil {
		return err
	}
	st.background(ctx, fs.Observe, st.env.SKU)()
	st.victimAnswered(<-answer)
	if err := st.conclude(ctx); err != nil {
		return err
	}
	if !st.rep.Stuck {
		return nil
	}
	// Stuck: show the lock that never expires, and that only a reset
	// (which deletes it) lets sales through again.
	keys, err := st.env.Stores.LockKeys(ctx, st.run.Stage)
	if err != nil {
		return fmt.Errorf("inspect lock keys: %w", err)
	}
	st.rep.LockKeys = keys
	if err := st.env.Shop.Reset(ctx, st.env.Target, st.run.Stage, st.env.SKU, st.run.Stock, st.run.Segments); err != nil {
		return fmt.Errorf("reset after the crash: %w", err)
	}
	st.mark(time.Now(), "reset")
	a := st.env.Shop.Sale(ctx, st.env.Target, st.run.Stage, st.env.SKU)
	sold := a.Err == nil && attack.Classify(uint16(a.Status)) == attack.Sale
	st.rep.SaleAfterReset = &sold
	st.tl.Add(a.End, sold)
	return nil
}
