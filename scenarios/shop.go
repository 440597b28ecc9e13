package scenarios

import (
	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// Shop is this module's shop as the load generator checks a scenario
// against it and runs it: which stages are async.
func Shop() plan.Shop {
	return plan.Shop{Async: func(stage string) bool {
		_, ok := asyncorders.ModeOf(stage)
		return ok
	}}
}
