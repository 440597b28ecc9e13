// Package shoprules is the shop's rules as the load generator checks a
// scenario against them and runs it (plan.Shop): which stages are async,
// the largest stock and segment count, and the fault knobs the shop
// accepts. They are the stores' packages' own (asyncorders, inventory,
// segments), read here so that internal/loadgen imports none of them;
// whoever runs a scenario (cmd/workshop, cmd/loadgen, scenarios, the
// deploy and loadgen tests) passes Shop on.
package shoprules

import (
	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/segments"
)

// Shop is this module's shop.
func Shop() plan.Shop {
	return plan.Shop{
		Async: func(stage string) bool {
			_, ok := asyncorders.ModeOf(stage)
			return ok
		},
		MaxStock:    inventory.MaxStock,
		MaxSegments: segments.MaxCount,
		Faults:      validFaults,
	}
}

// validFaults applies the shop's own rules to a scenario's fault knobs,
// so a fault the shop would refuse fails when the scenario is read.
func validFaults(f plan.Faults) error {
	return inventory.Faults{
		Work: f.Work.D(), WorkMax: f.WorkMax.D(), SlowRatio: f.SlowRatio, Slow: f.Slow.D(),
		LockTTL: f.LockTTL.D(), CrashHoldingLock: f.CrashHoldingLock, PauseBeforeWrite: f.PauseBeforeWrite,
		TrackHolders: f.TrackHolders, WaitReplicas: f.WaitReplicas, WaitTimeout: f.WaitTimeout.D(),
		Fence: f.Fence,
	}.Validate()
}
