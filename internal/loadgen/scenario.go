package loadgen

import (
	"errors"
	"fmt"
	"os"

	"github.com/lockstep/lockstep/internal/loadgen/expect"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// LoadScenario reads a scenario file (ParseScenario).
func LoadScenario(path string, shop plan.Shop) (*plan.Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := ParseScenario(data, shop)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// ParseScenario parses a scenario with plan.Parse and also checks what
// plan cannot know: that every expectation is one loadgen judges, and that
// hold_workers is on one of shop's async stages.
func ParseScenario(data []byte, shop plan.Shop) (*plan.Scenario, error) {
	return plan.Parse(data, shop, func(run plan.RunSpec) []error {
		var errs []error
		if run.HoldWorkers && !shop.IsAsync(run.Stage) {
			errs = append(errs, errors.New("hold_workers holds the order workers of an async stage"))
		}
		for _, e := range run.Expect {
			if err := expect.Parse(e); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	})
}
