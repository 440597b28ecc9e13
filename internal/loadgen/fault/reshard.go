package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
)

// reshardFault: sales go on at a fixed rate through the proxy while the Redis
// Cluster slot of the SKU's busiest key — its first segment's on the
// segmented stages, the SKU's own on the others — moves to another master,
// one key per MIGRATE with the step's hold spread between them, as
// redis-cli --cluster reshard moves a slot. Meanwhile sales meet ASK
// redirects and, for scripts whose keys are split between the two masters,
// TRYAGAIN; the shops retry those, so none fails, none is applied twice,
// nothing is oversold. The reshard-halfway step stops the move half-way
// (halfWayMove).
type reshardFault struct{}

func (reshardFault) Run(ctx context.Context, st *Step) error {
	fs := st.run.Fault
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	loadDone := st.background(ctx, fs.Observe, st.env.SKU)
	defer loadDone()
	if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	key := st.env.Stores.StockKey(st.run.Stage, st.env.SKU, st.run.Segments)
	move := wholeMove(st, key)
	if fs.Kind == plan.FaultReshardHalfWay {
		move = halfWayMove(st, key)
	}
	st.faultAt, st.rep.Victim = time.Now(), "slot of "+key
	st.mark(st.faultAt, move.label)
	from, to, err := st.env.Injector.MigrateSlot(ctx, key, move.move)
	if err != nil {
		return fmt.Errorf("migrate the slot of %s: %w", key, err)
	}
	st.healAt = time.Now()
	st.mark(st.healAt, "slot on "+to)
	loadDone()
	move.moved(from, to)
	return st.conclude(ctx)
}

// slotPlan is what the reshard steps do differently: how the slot moves,
// what marks its start, and what is noted and measured once it moved.
type slotPlan struct {
	move  SlotMove
	label string
	moved func(from, to string)
}

// wholeMove moves key's slot in one go, a key per MIGRATE over the step's
// hold.
func wholeMove(st *Step, key string) slotPlan {
	return slotPlan{move: SlotMove{Pace: st.run.Fault.Hold.D()}, label: "slot migration", moved: func(from, to string) {
		st.note("the slot of %s moved from %s to %s in %.0f ms while sales went on", key, from, to, report.MS(st.healAt.Sub(st.faultAt)))
	}}
}
