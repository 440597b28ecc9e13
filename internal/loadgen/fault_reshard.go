package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/sleep"
	"github.com/lockstep/lockstep/segments"
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

func (reshardFault) run(ctx context.Context, st *faultState) error {
	r, fs := st.r, st.run.Fault
	if err := st.resetWith(ctx, st.run.Faults); err != nil {
		return err
	}
	loadDone := st.background(ctx, fs.Observe, r.cfg.Scenario.SKU)
	defer loadDone()
	if err := sleep.For(ctx, fs.Before.D()); err != nil {
		return err
	}
	key := movedKey(st.run.Stage, r.cfg.Scenario.SKU, st.run.Segments)
	move := wholeMove(st, key)
	if fs.Kind == plan.FaultReshardHalfWay {
		move = halfWayMove(st, key)
	}
	st.faultAt, st.rep.Victim = time.Now(), "slot of "+key
	st.mark(st.faultAt, move.label)
	from, to, err := r.cfg.Injector.MigrateSlot(ctx, key, move.move)
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
func wholeMove(st *faultState, key string) slotPlan {
	return slotPlan{move: SlotMove{Pace: st.run.Fault.Hold.D()}, label: "slot migration", moved: func(from, to string) {
		st.note("the slot of %s moved from %s to %s in %.0f ms while sales went on", key, from, to, report.MS(st.healAt.Sub(st.faultAt)))
	}}
}

// movedKey is the stock key of the SKU's first segment on the stages that
// split it, else of the SKU.
func movedKey(stage, sku string, n int) string {
	if n = segmentCount(stage, n); n > 0 {
		return segmentKey(stage, sku, 0, n, "stock")
	}
	return "lockstep:" + stage + ":{" + sku + "}:stock"
}

// segmentCount is how many segments a stage splits a SKU into when reset
// with n (0: the shop's default, segments.DefaultCount); 0 for the stages
// that do not split it.
func segmentCount(stage string, n int) int {
	switch {
	case stage != "segmented" && stage != "segmented-atomic":
		return 0
	case n == 0:
		return segments.DefaultCount
	}
	return n
}

// segmentKey is the key of segment i of n of sku that ends in suffix
// ("stock", "lock").
func segmentKey(stage, sku string, i, n int, suffix string) string {
	return "lockstep:" + stage + ":{" + segments.Tag(sku, i, n) + "}:" + suffix
}
