package fault

import "github.com/lockstep/lockstep/internal/loadgen/plan"

// kindOf is the kind that runs fs; nil for a kind plan does not know.
func kindOf(fs *plan.FaultStep) Kind {
	switch fs.Kind {
	case plan.FaultCrash:
		return crashFault{}
	case plan.FaultPause:
		return pauseFault{}
	case plan.FaultRedisRestart:
		return redisRestartFault{}
	case plan.FaultFailover:
		return failoverFault{}
	case plan.FaultPartition:
		return partitionFault{}
	case plan.FaultReshard, plan.FaultReshardHalfWay:
		return reshardFault{}
	case plan.FaultOrdersDown:
		return ordersDownFault{}
	case plan.FaultWorkerKill:
		return workerKillFault{hook: hookAfterRead}
	case plan.FaultDuplicateDelivery:
		return workerKillFault{hook: hookAfterInsert}
	}
	return nil
}
