// Package scenarios holds the workshop's scenario files. default.yaml is
// built into cmd/loadgen and cmd/workshop, so they run without a checkout.
package scenarios

import (
	_ "embed"
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen"
)

//go:embed default.yaml
var defaultYAML string

// DefaultName is how reports refer to the built-in scenario.
const DefaultName = "scenarios/default.yaml (built in)"

// Load reads the scenario file at path, or the built-in default when path
// is empty. It returns the scenario and the name to report it under.
func Load(path string) (*loadgen.Scenario, string, error) {
	if path == "" {
		sc, err := loadgen.ParseScenario([]byte(defaultYAML))
		if err != nil {
			return nil, "", fmt.Errorf("built-in scenario: %w", err)
		}
		return sc, DefaultName, nil
	}
	sc, err := loadgen.LoadScenario(path)
	return sc, path, err
}
