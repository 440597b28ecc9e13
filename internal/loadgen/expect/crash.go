package expect

import (
	"fmt"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// crashMakers are the checks of the crash step.
func crashMakers() map[string]maker {
	makers := withoutArgs(map[string]checkFunc{
		"stuck-after-crash": checkStuck, "lock-without-ttl": checkLockWithoutTTL, "sells-after-reset": checkSellsAfterReset,
	})
	makers["recovers-within"] = recoversWithin
	return makers
}

func checkStuck(r *report.StageRun, _ []report.StageRun) (bool, string) {
	switch {
	case r.Fault != nil:
		return r.Fault.Stuck, fmt.Sprintf("%d sales out of %d requests after the fault", r.Fault.Sales, r.Fault.Requests)
	case r.Crash == nil || !r.Crash.Triggered:
		return false, "no crash happened"
	}
	return r.Stuck != nil && *r.Stuck, fmt.Sprintf("%d sales out of %d requests after the crash", r.Crash.Sales, r.Crash.Requests)
}

func checkLockWithoutTTL(r *report.StageRun, _ []report.StageRun) (bool, string) {
	keys, _ := r.AfterCrash()
	if len(keys) == 0 {
		return false, "no lock key seen after the crash (is the Redis address known?)"
	}
	for _, k := range keys {
		if k.TTLMS == -1 {
			return true, fmt.Sprintf("%s has no TTL", k.Key)
		}
	}
	return false, fmt.Sprintf("every lock key expires (%s: %d ms)", keys[0].Key, keys[0].TTLMS)
}

func checkSellsAfterReset(r *report.StageRun, _ []report.StageRun) (bool, string) {
	_, sold := r.AfterCrash()
	if sold == nil {
		return false, "no reset after the crash"
	}
	return *sold, fmt.Sprintf("sale after reset: %t", *sold)
}

func recoversWithin(args []string) (checkFunc, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one duration")
	}
	limit, err := time.ParseDuration(args[0])
	if err != nil {
		return nil, fmt.Errorf("duration: %w", err)
	}
	return func(r *report.StageRun, _ []report.StageRun) (bool, string) {
		if r.RecoveryMS == nil {
			return false, "no sale after the crash"
		}
		return *r.RecoveryMS <= float64(limit.Milliseconds()), fmt.Sprintf("first sale %.0f ms after the crash (limit %s)", *r.RecoveryMS, limit)
	}, nil
}
